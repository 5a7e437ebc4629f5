"""The peaks peers on our phantoms: MRtrix3 ``sh2peaks`` and DIPY ``peak_directions``, each
with its fiber count and angular error against the phantom's true fibers."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from gpu.sh_basis import lmax_from_ncoeffs
from gpu.peaks.peak_matching import match_peaks

__all__ = ["run_sh2peaks", "run_dipy", "truth_agreement"]


def truth_agreement(directions: np.ndarray, count: np.ndarray, truth: dict) -> dict:
    """Share of voxels with the true fiber count, and the mean and 95th-percentile angle in
    degrees between matched peaks and the true fibers."""
    matched = match_peaks(directions, count, truth["directions"], truth["count"])
    return {"count_agreement": matched["count_agreement"], "mean_error_deg": matched["mean_error"],
            "p95_error_deg": matched["p95_error"]}


def run_sh2peaks(sh: np.ndarray, truth: dict, npeaks: int = 3, relative_threshold: float = 0.1,
                 threads: int | None = None) -> dict | None:
    """``sh2peaks -num npeaks`` on ``sh`` as a NIfTI file, its peaks kept above
    ``relative_threshold`` of the voxel's largest, as ours keeps them; None without MRtrix3."""
    exe = shutil.which("sh2peaks")
    if exe is None:
        return None
    import nibabel as nib

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp, "fod.nii"), Path(tmp, "peaks.nii")
        nib.save(nib.Nifti1Image(sh, np.eye(4)), src)
        started = time.perf_counter()
        subprocess.run([exe, "-quiet", "-num", str(npeaks), "-nthreads", str(threads or os.cpu_count()), str(src),
                        str(dst)], check=True)
        seconds = time.perf_counter() - started
        peaks = np.asarray(nib.load(dst).dataobj, np.float64).reshape(*sh.shape[:-1], npeaks, 3)
    amplitude = np.linalg.norm(peaks, axis=-1)
    amplitude[~np.isfinite(amplitude)] = 0.0
    keep = (amplitude > 0) & (amplitude >= relative_threshold * amplitude.max(axis=-1, keepdims=True))
    order = np.argsort(-np.where(keep, amplitude, -1.0), axis=-1, kind="stable")
    directions = np.take_along_axis(peaks / np.maximum(amplitude, 1e-30)[..., None], order[..., None], axis=-2)
    voxels = int(np.prod(sh.shape[:-1]))
    return {"method": "MRtrix3 sh2peaks", "seconds": seconds, "voxels": voxels,
            **truth_agreement(directions, keep.sum(axis=-1), truth)}


def run_dipy(sh: np.ndarray, truth: dict, npeaks: int = 3, relative_threshold: float = 0.1,
             voxels: int = 20000) -> dict | None:
    """DIPY's ``peak_directions`` on its default sphere, one voxel at a time in one thread,
    on the first ``voxels`` voxels; None without DIPY."""
    try:
        from dipy.data import default_sphere
        from dipy.direction.peaks import peak_directions
        from dipy.reconst.shm import sh_to_sf_matrix
    except ImportError:
        return None
    flat = sh.reshape(-1, sh.shape[-1]).astype(np.float64)[:voxels]
    b_matrix, _ = sh_to_sf_matrix(default_sphere, sh_order_max=lmax_from_ncoeffs(sh.shape[-1]),
                                  basis_type="tournier07", legacy=False)
    started = time.perf_counter()
    directions = np.full((flat.shape[0], npeaks, 3), np.nan)
    count = np.zeros(flat.shape[0], int)
    for v, coeffs in enumerate(flat):
        dirs, _, _ = peak_directions(coeffs @ b_matrix, default_sphere, relative_peak_threshold=relative_threshold,
                                     min_separation_angle=25)
        k = min(npeaks, len(dirs))
        directions[v, :k] = dirs[:k]
        count[v] = k
    seconds = time.perf_counter() - started
    flat_truth = {key: truth[key].reshape(-1, *truth[key].shape[len(sh.shape) - 1:])[:voxels]
                  for key in ("directions", "count")}
    return {"method": f"DIPY peak_directions ({len(default_sphere.vertices)} pts, 1 core)", "seconds": seconds,
            "voxels": flat.shape[0], **truth_agreement(directions, count, flat_truth)}
