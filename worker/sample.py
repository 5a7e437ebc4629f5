"""A sample FOD volume with known fibers, written as NIfTI, for trying the peaks job."""

from __future__ import annotations

import json
from pathlib import Path

import nibabel as nib
import numpy as np

from gpu.peaks.phantom import fod_phantom
from worker.io.nifti import save_nifti_atomic

__all__ = ["write_sample"]


def write_sample(folder: Path, shape: tuple[int, int, int] = (24, 24, 12), lmax: int = 8,
                 noise: float = 0.02, seed: int = 0) -> dict[str, Path]:
    """Write ``fod.nii.gz`` (MRtrix3 SH basis), ``mask.nii.gz``, the truth as
    ``truth_peaks.nii.gz`` (sh2peaks layout, weight × direction) and ``truth_count.nii.gz``,
    and ``sample.json`` describing them. 2 mm isotropic voxels, RAS affine."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    phantom = fod_phantom(shape, lmax, noise=noise, seed=seed)
    affine = np.diag([2.0, 2.0, 2.0, 1.0])
    affine[:3, 3] = -np.array(shape) + 1.0
    grid = np.indices(shape, dtype=np.float64)
    centre = (np.array(shape, dtype=np.float64) - 1.0)[:, None, None, None] / 2.0
    radius = np.array(shape, dtype=np.float64)[:, None, None, None] / 2.0
    mask = (((grid - centre) / radius) ** 2).sum(axis=0) <= 1.0
    truth = (phantom["directions"] * phantom["weights"][..., None]).reshape(*shape, 9)

    def image(data: np.ndarray) -> nib.Nifti1Image:
        img = nib.Nifti1Image(data, affine)
        img.header.set_xyzt_units("mm")
        img.set_qform(affine, code=1)
        img.set_sform(affine, code=1)
        return img

    paths = {
        "fod": save_nifti_atomic(image(phantom["sh"]), folder / "fod.nii.gz"),
        "mask": save_nifti_atomic(image(mask.astype(np.uint8)), folder / "mask.nii.gz"),
        "truth_peaks": save_nifti_atomic(image(truth.astype(np.float32)), folder / "truth_peaks.nii.gz"),
        "truth_count": save_nifti_atomic(image(phantom["count"]), folder / "truth_count.nii.gz"),
    }
    description = {
        "what": "FOD phantom: 1-3 fibers per voxel (40/40/20 %), crossings >= 45 deg, weights 1 and U(0.5, 1), "
                "Gaussian noise on the SH coefficients",
        "lmax": lmax, "basis": "mrtrix", "shape": list(shape), "noise": noise, "seed": seed,
        "files": {name: path.name for name, path in paths.items()},
    }
    (folder / "sample.json").write_text(json.dumps(description, indent=2))
    paths["description"] = folder / "sample.json"
    return paths
