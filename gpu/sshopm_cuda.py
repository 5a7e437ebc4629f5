"""CUDA backend of SS-HOPM: the generated ``sshopm_cuda_m{order}`` kernels.

One thread block per voxel and one thread per start (Ballard, Kolda & Plantenga 2011,
Sec. III-D); the tensor's unique entries sit in shared memory. Voxels are launched in chunks
so long runs report progress and can be cancelled between launches.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from gpu import sshopm_generated
from gpu.sshopm_layout import HIST_BINS, N_STATS

__all__ = ["run_sshopm_cuda"]

def run_sshopm_cuda(
    order: int,
    coeffs: np.ndarray,
    sh2t: np.ndarray,
    alphas: np.ndarray,
    starts: np.ndarray,
    neighbors: np.ndarray,
    fparams: np.ndarray,
    iparams: np.ndarray,
    npeaks: int,
    chunk_voxels: int = 1 << 18,
    progress: Callable[[float], None] | None = None,
) -> dict:
    """Same contract as :func:`gpu.sshopm_cpu.run_sshopm_cpu`, computed in float32 on the GPU.

    ``kernel_seconds`` is measured with CUDA events around the launches (transfers
    excluded); ``compute_seconds`` is the host wall time including transfers.
    """
    from numba import cuda

    kernel = getattr(sshopm_generated, f"sshopm_cuda_m{order}")
    n = coeffs.shape[0]
    n_starts = starts.shape[0]
    started = time.perf_counter()
    d_coeffs = cuda.to_device(np.ascontiguousarray(coeffs, np.float32))
    d_sh2t = cuda.to_device(np.ascontiguousarray(sh2t, np.float32))
    d_alphas = cuda.to_device(np.ascontiguousarray(alphas, np.float32))
    d_starts = cuda.to_device(np.ascontiguousarray(starts, np.float32))
    d_neighbors = cuda.to_device(np.ascontiguousarray(neighbors, np.int32))
    d_fparams = cuda.to_device(np.ascontiguousarray(fparams, np.float32))
    d_iparams = cuda.to_device(np.ascontiguousarray(iparams, np.int32))
    d_directions = cuda.to_device(np.full((n, npeaks, 3), np.nan, np.float32))
    d_amplitudes = cuda.to_device(np.full((n, npeaks), np.nan, np.float32))
    d_count = cuda.to_device(np.zeros(n, np.int32))
    d_stats = cuda.to_device(np.zeros((n, N_STATS), np.int32))
    d_hist = cuda.to_device(np.zeros(HIST_BINS, np.int32))
    kernel_seconds = 0.0
    for lo in range(0, n, chunk_voxels):
        hi = min(n, lo + chunk_voxels)
        begin, end = cuda.event(), cuda.event()
        begin.record()
        kernel[hi - lo, n_starts](d_coeffs[lo:hi], d_sh2t, d_alphas[lo:hi], d_starts, d_neighbors, d_fparams, d_iparams,
                                  d_directions[lo:hi], d_amplitudes[lo:hi], d_count[lo:hi], d_stats[lo:hi], d_hist)
        end.record()
        end.synchronize()
        kernel_seconds += begin.elapsed_time(end) / 1e3
        if progress is not None:
            progress(hi / n)
    result = {
        "directions": d_directions.copy_to_host(),
        "amplitudes": d_amplitudes.copy_to_host(),
        "count": d_count.copy_to_host(),
        "stats": d_stats.copy_to_host(),
        "hist": d_hist.copy_to_host().astype(np.int64),
        "kernel_seconds": kernel_seconds,
    }
    result["compute_seconds"] = time.perf_counter() - started
    return result
