"""CPU backend of SS-HOPM: the generated ``sshopm_cpu_m{order}`` loops (numba ``prange``)."""

from __future__ import annotations

import time
from typing import Callable

import numba
import numpy as np

from gpu.cuda.compile_notice import announce_compile, is_compiled
from gpu.cpu_parallel import run_parallel_loop
from gpu.peaks import sshopm_generated_cpu
from gpu.peaks.sshopm_layout import HIST_BINS, N_STATS
from gpu.peaks.sshopm_starts import neighbor_steps

__all__ = ["run_sshopm_cpu", "COMPILE_SECONDS"]

# Seconds sshopm_cpu_m{order} takes to compile on a small machine: what a first run is told to
# expect (the CUDA kernels: gpu.peaks.backend_cuda).
COMPILE_SECONDS = {2: 5, 4: 6, 6: 8, 8: 10, 10: 13, 12: 18}


def run_sshopm_cpu(
    order: int,
    coeffs: np.ndarray,
    sh2t: np.ndarray,
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
    loop = getattr(sshopm_generated_cpu, f"sshopm_cpu_m{order}")
    n = coeffs.shape[1]
    sh2t = np.ascontiguousarray(sh2t, np.float64)
    directions = np.full((n, npeaks, 3), np.nan)
    amplitudes = np.full((n, npeaks), np.nan)
    count = np.zeros(n, np.int32)
    stats = np.zeros((n, N_STATS), np.int32)
    hist = np.zeros(HIST_BINS, np.int64)
    n_threads = numba.get_num_threads()
    started = time.perf_counter()
    steps = neighbor_steps(starts, neighbors)
    for lo in range(0, n, chunk_voxels):
        hi = min(n, lo + chunk_voxels)
        chunk_hist = np.zeros((4 * n_threads, HIST_BINS), np.int64)
        # Always a C-contiguous float64 chunk: one compiled signature per order serves float32
        # and float64 volumes, whole or chunked (the loop works in float64, so this is exact).
        args = (np.ascontiguousarray(coeffs[:, lo:hi], np.float64), sh2t, starts, neighbors, steps, fparams, iparams,
                directions[lo:hi], amplitudes[lo:hi], count[lo:hi], stats[lo:hi], chunk_hist)
        if lo == 0 and not is_compiled(loop, args):
            announce_compile(f"the lmax-{order} SS-HOPM CPU loop", COMPILE_SECONDS[order])
        run_parallel_loop(loop, *args)
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
