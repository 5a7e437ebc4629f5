"""A small multi-shell DWI phantom (:mod:`gpu.fod.phantom`) written as the fod and response
jobs take it: NIfTI with FSL bvals/bvecs, and the phantom's exact tissue responses."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpu.fod import dwi_phantom, shell_scheme, tissue_responses
from worker.io.images import write_image
from worker.io.response_files import write_response

__all__ = ["SHAPE", "AFFINE", "write_phantom", "write_fsl", "write_exact_responses"]

SHAPE = (12, 6, 4)
#: voxel → scanner, positive determinant: FSL's bvecs are the scanner directions with x flipped
AFFINE = np.array([[2.0, 0, 0, -11], [0, 2.0, 0, -5], [0, 0, 2.0, -3], [0, 0, 0, 1]])


def write_fsl(folder: Path, bvals: np.ndarray, scanner_dirs: np.ndarray, stem: str = "dwi") -> tuple[Path, Path]:
    """FSL files for an image whose affine is diagonal, of either determinant sign: x flipped
    either way (MRtrix3 flips it for a positive determinant; a negative one flips it back)."""
    bval, bvec = folder / f"{stem}.bval", folder / f"{stem}.bvec"
    np.savetxt(bval, bvals[None], fmt="%g")
    np.savetxt(bvec, (scanner_dirs * [-1.0, 1.0, 1.0]).T, fmt="%.10f")
    return bval, bvec


def write_phantom(folder: Path, shells=((1000, 30), (2000, 45), (3000, 60)), n_b0: int = 4, seed: int = 0) -> dict:
    """``dwi.nii`` (SHAPE, AFFINE), ``dwi.bval``/``dwi.bvec``, ``mask.nii`` and ``wm.txt``,
    ``gm.txt``, ``csf.txt`` (the exact responses) in ``folder``; returns the paths, the
    data and the scheme."""
    bvals, dirs = shell_scheme(n_b0, shells, seed=seed)
    dwi = dwi_phantom(SHAPE, bvals, dirs, snr=50.0, seed=seed)["dwi"]
    paths = {"dwi": write_image(folder / "dwi.nii", dwi, AFFINE),
             "mask": write_image(folder / "mask.nii", np.ones(SHAPE, np.uint8), AFFINE)}
    paths["bval"], paths["bvec"] = write_fsl(folder, bvals, dirs)
    paths.update(write_exact_responses(folder, [0.0] + [b for b, _ in shells]))
    return {"paths": paths, "dwi": dwi, "bvals": bvals, "dirs": dirs}


def write_exact_responses(folder: Path, shell_bvalues, stem: str = "") -> dict[str, Path]:
    paths = {}
    for tissue, response in zip(("wm", "gm", "csf"), tissue_responses(shell_bvalues)):
        paths[tissue] = folder / f"{stem}{tissue}.txt"
        write_response(paths[tissue], response, np.asarray(shell_bvalues))
    return paths


def write_head_in_noise(folder: Path) -> dict:
    """The DWI sample (:func:`worker.sample.write_dwi_sample`, 24×24×12) with noise alone outside
    its ellipsoid and a dark block inside (``head.nii``, with the sample's FSL files): a brain
    mask's case. Returns the paths (``dwi``, ``bval``, ``bvec``) and ``inside``, the ellipsoid."""
    from worker.io.images import load_image_data, read_image_header
    from worker.sample import write_dwi_sample

    paths = write_dwi_sample(folder / "sample", shape=(24, 24, 12))
    info = read_image_header(paths["dwi"], "dwi")
    dwi = load_image_data(info).astype(np.float32)
    inside = load_image_data(read_image_header(paths["mask"], "mask")) > 0
    rng = np.random.default_rng(3)
    sigma = dwi[inside][:, 0].mean() / 20
    dwi[~inside] = np.abs(rng.normal(0, sigma, ((~inside).sum(), dwi.shape[3])))
    dwi[10:14, 10:14, 5:7] *= 0.1
    return {"dwi": write_image(folder / "head.nii", dwi, info.affine), "bval": paths["bval"], "bvec": paths["bvec"],
            "inside": inside}


def write_biased_compartments(folder: Path) -> dict[str, Path]:
    """A multi-tissue fit of :func:`write_head_in_noise` (its exact responses, within its brain
    mask) with a smooth multiplicative bias on every compartment: ``wmfod.nii``, ``gm.nii``,
    ``csf.nii`` and ``mask.nii`` in ``folder``, what ``mtnormalise`` is for."""
    from gpu.fod import msmt_csd
    from gpu.fod.brain_mask import dwi_brain_mask
    from worker.io.gradients import read_gradients
    from worker.io.images import load_image_data, read_image_header
    from worker.io.response_files import read_response

    head = write_head_in_noise(folder)
    info = read_image_header(head["dwi"], "dwi")
    dwi = load_image_data(info)
    scheme = read_gradients(info, bvecs=head["bvec"], bvals=head["bval"])
    mask = dwi_brain_mask(dwi, scheme[:, 3])
    responses = [read_response(folder / "sample" / f"truth_{t}.txt")[0] for t in ("wm", "gm", "csf")]
    wm, gm, csf = msmt_csd(dwi, scheme[:, 3], scheme[:, :3], responses, [8, 0, 0], mask=mask, backend="cpu")
    x, y, z = np.indices(mask.shape)
    bias = (1 + 0.2 * np.sin(x / 7.0) + 0.1 * z / mask.shape[2]).astype(np.float32)
    paths = {"mask": write_image(folder / "mask.nii", mask.astype(np.uint8), info.affine)}
    for name, image in (("wmfod", wm), ("gm", gm), ("csf", csf)):
        image = np.asarray(image, np.float32)
        paths[name] = write_image(folder / f"{name}.nii", image * (bias[..., None] if image.ndim == 4 else bias),
                                  info.affine)
    return paths
