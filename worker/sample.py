"""Samples with known truth, written as NIfTI, for trying the jobs: an FOD volume for the
peaks job (:func:`write_sample`) and a multi-shell DWI for the response and fod jobs
(:func:`write_dwi_sample`)."""

from __future__ import annotations

import json
from pathlib import Path

import nibabel as nib
import numpy as np

from gpu.fod import dwi_phantom, shell_scheme, tissue_responses
from gpu.peaks.phantom import fod_phantom
from worker.io.gradients import write_fsl_gradients
from worker.io.nifti import save_nifti_atomic
from worker.io.response_files import write_response

__all__ = ["write_sample", "write_dwi_sample", "DWI_SAMPLE_SHELLS"]

#: The DWI sample's acquisition: b = 0 volumes, then (b, directions) shells.
DWI_SAMPLE_SHELLS = (5, ((1000, 30), (2000, 60)))


def _affine(shape: tuple[int, int, int]) -> np.ndarray:
    """2 mm isotropic voxels, RAS, centred."""
    affine = np.diag([2.0, 2.0, 2.0, 1.0])
    affine[:3, 3] = -np.array(shape) + 1.0
    return affine


def _ellipsoid(shape: tuple[int, int, int]) -> np.ndarray:
    grid = np.indices(shape, dtype=np.float64)
    centre = (np.array(shape, dtype=np.float64) - 1.0)[:, None, None, None] / 2.0
    radius = np.array(shape, dtype=np.float64)[:, None, None, None] / 2.0
    return (((grid - centre) / radius) ** 2).sum(axis=0) <= 1.0


def _save(data: np.ndarray, affine: np.ndarray, path: Path) -> Path:
    img = nib.Nifti1Image(data, affine)
    img.header.set_xyzt_units("mm")
    img.set_qform(affine, code=1)
    img.set_sform(affine, code=1)
    return save_nifti_atomic(img, path)


def _describe(folder: Path, paths: dict[str, Path], description: dict) -> dict[str, Path]:
    (folder / "sample.json").write_text(json.dumps({**description, "files": {name: path.name for name, path
                                                                              in paths.items()}}, indent=2))
    return {**paths, "description": folder / "sample.json"}


def write_sample(folder: Path, shape: tuple[int, int, int] = (24, 24, 12), lmax: int = 8,
                 noise: float = 0.02, seed: int = 0) -> dict[str, Path]:
    """Write ``fod.nii.gz`` (MRtrix3 SH basis), ``mask.nii.gz``, the truth as
    ``truth_peaks.nii.gz`` (sh2peaks layout, weight × direction) and ``truth_count.nii.gz``,
    and ``sample.json`` describing them. 2 mm isotropic voxels, RAS affine."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    phantom = fod_phantom(shape, lmax, noise=noise, seed=seed)
    affine = _affine(shape)
    truth = (phantom["directions"] * phantom["weights"][..., None]).reshape(*shape, 9)
    paths = {
        "fod": _save(phantom["sh"], affine, folder / "fod.nii.gz"),
        "mask": _save(_ellipsoid(shape).astype(np.uint8), affine, folder / "mask.nii.gz"),
        "truth_peaks": _save(truth.astype(np.float32), affine, folder / "truth_peaks.nii.gz"),
        "truth_count": _save(phantom["count"], affine, folder / "truth_count.nii.gz"),
    }
    return _describe(folder, paths, {
        "what": "FOD phantom: 1-3 fibers per voxel (40/40/20 %), crossings >= 45 deg, weights 1 and U(0.5, 1), "
                "Gaussian noise on the SH coefficients",
        "lmax": lmax, "basis": "mrtrix", "shape": list(shape), "noise": noise, "seed": seed})


def write_dwi_sample(folder: Path, shape: tuple[int, int, int] = (40, 40, 20), snr: float = 20.0,
                     seed: int = 0) -> dict[str, Path]:
    """Write a multi-shell DWI (:func:`gpu.fod.dwi_phantom`: WM of 1–3 crossing fibres, GM and
    CSF in partial volume, Rician noise) as ``dwi.nii.gz`` with FSL ``dwi.bval``/``dwi.bvec``
    (:data:`DWI_SAMPLE_SHELLS`), ``mask.nii.gz``, the truth as ``truth_peaks.nii.gz`` (the
    fibres in sh2peaks layout, largest first: direction × its share of the voxel's b = 0
    signal, the WM fraction times the fibre's weight), ``truth_count.nii.gz``,
    ``truth_fractions.nii.gz`` (WM, GM, CSF signal fractions at b = 0) and the tissues' exact
    responses ``truth_wm.txt``, ``truth_gm.txt``, ``truth_csf.txt`` (MRtrix3's format), and
    ``sample.json`` describing them. 2 mm isotropic voxels, RAS affine."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    n_b0, shells = DWI_SAMPLE_SHELLS
    bvals, bvecs = shell_scheme(n_b0, shells, seed=seed)
    phantom = dwi_phantom(shape, bvals, bvecs, snr=snr, seed=seed)
    affine = _affine(shape)
    order = np.argsort(-phantom["weights"], axis=-1, kind="stable")
    weights = np.take_along_axis(phantom["weights"], order, axis=-1) * phantom["fractions"][..., :1]
    fibres = np.take_along_axis(phantom["fibres"], order[..., None], axis=-2)
    paths = {"dwi": _save(phantom["dwi"], affine, folder / "dwi.nii.gz")}
    paths["bvec"], paths["bval"] = write_fsl_gradients(folder / "dwi.bvec", folder / "dwi.bval",
                                                       np.column_stack([bvecs, bvals]), affine)
    paths.update({
        "mask": _save(_ellipsoid(shape).astype(np.uint8), affine, folder / "mask.nii.gz"),
        "truth_peaks": _save((fibres * weights[..., None]).reshape(*shape, 9).astype(np.float32), affine,
                             folder / "truth_peaks.nii.gz"),
        "truth_count": _save((weights > 0).sum(axis=-1).astype(np.uint8), affine, folder / "truth_count.nii.gz"),
        "truth_fractions": _save(phantom["fractions"].astype(np.float32), affine, folder / "truth_fractions.nii.gz"),
    })
    shell_bvalues = np.array([0.0] + [b for b, _ in shells])
    for tissue, response in zip(("wm", "gm", "csf"), tissue_responses(shell_bvalues)):
        paths[f"truth_{tissue}"] = folder / f"truth_{tissue}.txt"
        write_response(paths[f"truth_{tissue}"], response, shell_bvalues)
    return _describe(folder, paths, {
        "what": "multi-shell DWI phantom: in thirds along x mostly WM (1-3 crossing fibres along y in turn), GM, "
                "CSF, each voxel partly the other two tissues; Rician noise",
        "shells": {"b0": n_b0, **{str(b): count for b, count in shells}}, "shape": list(shape), "snr": snr,
        "seed": seed})
