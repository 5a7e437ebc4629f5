"""CPU backend of SS-HOPM: the generated ``sshopm_cpu_m{order}`` loops (numba ``prange``)."""

from __future__ import annotations

import time
from typing import Callable

import numba
import numpy as np

from gpu.peaks import sshopm_generated
from gpu.peaks.sshopm_layout import HIST_BINS, N_STATS

__all__ = ["run_sshopm_cpu"]

def run_sshopm_cpu(
    order: int,
    coeffs: np.ndarray,
    sh2t: np.ndarray,
    alphas: np.ndarray,
    starts: np.ndarray,
    neighbors: np.ndarray,
    fparams: np.ndarray,
    iparams: np.ndarray,
    npeaks: int,
    chunk_voxels: int = 16384,
    progress: Callable[[float], None] | None = None,
) -> dict:
    """Run SS-HOPM for each voxel (column) of SH ``coeffs`` (n_coeffs, voxels); ``sh2t`` maps
    them to unique tensor entries (:func:`gpu.peaks.symmetric_tensor.sh_to_tensor_matrix`), applied
    in float64 per voxel.

    Returns arrays ``directions`` (n, npeaks, 3), ``amplitudes`` (n, npeaks) — NaN where a
    voxel has fewer peaks —, ``count`` (n,), per-voxel ``stats`` (n, N_STATS), the
    iteration histogram ``hist`` and the compute time in seconds.
    """
    loop = getattr(sshopm_generated, f"sshopm_cpu_m{order}")
    n = coeffs.shape[1]
    sh2t = np.ascontiguousarray(sh2t, np.float64)
    directions = np.full((n, npeaks, 3), np.nan)
    amplitudes = np.full((n, npeaks), np.nan)
    count = np.zeros(n, np.int32)
    stats = np.zeros((n, N_STATS), np.int32)
    hist = np.zeros(HIST_BINS, np.int64)
    n_threads = numba.get_num_threads()
    started = time.perf_counter()
    for lo in range(0, n, chunk_voxels):
        hi = min(n, lo + chunk_voxels)
        chunk_hist = np.zeros((4 * n_threads, HIST_BINS), np.int64)
        loop(coeffs[:, lo:hi], sh2t, alphas[lo:hi], starts, neighbors, fparams, iparams,
             directions[lo:hi], amplitudes[lo:hi], count[lo:hi], stats[lo:hi], chunk_hist)
        hist += chunk_hist.sum(axis=0)
        if progress is not None:
            progress(hi / n)
    return {
        "directions": directions,
        "amplitudes": amplitudes,
        "count": count,
        "stats": stats,
        "hist": hist,
        "compute_seconds": time.perf_counter() - started,
    }
