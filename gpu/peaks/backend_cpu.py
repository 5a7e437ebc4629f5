"""CPU backend of SS-HOPM: the generated ``sshopm_cpu_m{order}`` loops (numba ``prange``).

Like the fod and fixels loops, a run takes the loop's ahead-of-time build where
``fibertensor warmup`` made one (:mod:`gpu.ahead_of_time`), on the host's threads, without
numba's start-up (docs/decisions/cpu-ahead-of-time.md); without a build it goes through
numba on every core. The same bytes either way.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from gpu import ahead_of_time
from gpu.peaks.sshopm_layout import HIST_BINS, N_STATS
from gpu.peaks.sshopm_starts import neighbor_steps

__all__ = ["run_sshopm_cpu", "COMPILE_SECONDS", "LOOP_MODULE"]

#: The module of the generated loops ``sshopm_cpu_m{order}``.
LOOP_MODULE = "gpu.peaks.sshopm_generated_cpu"

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
    n = coeffs.shape[1]
    sh2t = np.ascontiguousarray(sh2t, np.float64)
    directions = np.full((n, npeaks, 3), np.nan)
    amplitudes = np.full((n, npeaks), np.nan)
    count = np.zeros(n, np.int32)
    stats = np.zeros((n, N_STATS), np.int32)
    hist = np.zeros(HIST_BINS, np.int64)
    started = time.perf_counter()
    steps = neighbor_steps(starts, neighbors)
    for lo in range(0, n, chunk_voxels):
        hi = min(n, lo + chunk_voxels)
        # Always a C-contiguous float64 chunk: one compiled signature per order serves float32
        # and float64 volumes, whole or chunked (the loop works in float64, so this is exact).
        args = (np.ascontiguousarray(coeffs[:, lo:hi], np.float64), sh2t, starts, neighbors, steps, fparams, iparams,
                directions[lo:hi], amplitudes[lo:hi], count[lo:hi], stats[lo:hi])
        chunk_hist = _run_build(order, args, hi - lo)
        hist += chunk_hist if chunk_hist is not None else _run_on_every_core(order, args, announce=lo == 0)
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


def _run_build(order: int, args: tuple, voxels: int) -> np.ndarray | None:
    """The loop of ``order`` over ``voxels`` voxels from its ahead-of-time build on the host's
    threads (:func:`gpu.ahead_of_time.map_on_threads`), each chunk of voxels a call with its
    coefficients' columns and a histogram row of its own; the iteration histogram
    (HIST_BINS,), or None where no build holds the loop."""
    build = ahead_of_time.lookup(f"{LOOP_MODULE}.sshopm_cpu_m{order}", (*args, np.zeros((1, HIST_BINS), np.int64)))
    if build is None:
        return None
    coeffs, shared, outputs = args[0], args[1:7], args[7:]

    def chunk(lo: int, hi: int) -> np.ndarray:
        hist = np.zeros((1, HIST_BINS), np.int64)
        build(np.ascontiguousarray(coeffs[:, lo:hi]), *shared, *(out[lo:hi] for out in outputs), hist)
        return hist[0]

    return np.sum(ahead_of_time.map_on_threads(chunk, voxels), axis=0)


def _run_on_every_core(order: int, args: tuple, announce: bool) -> np.ndarray:
    """The loop of ``order`` through numba, its voxels in chunks over every thread; its
    iteration histogram (HIST_BINS,)."""
    import numba

    from gpu.cpu_parallel import run_parallel_loop
    from gpu.cuda.compile_notice import announce_compile, is_compiled
    from gpu.peaks import sshopm_generated_cpu

    loop = getattr(sshopm_generated_cpu, f"sshopm_cpu_m{order}")
    args = (*args, np.zeros((4 * numba.get_num_threads(), HIST_BINS), np.int64))  # a row per chunk
    if announce and not is_compiled(loop, args):
        announce_compile(f"the lmax-{order} SS-HOPM CPU loop", COMPILE_SECONDS[order])
    run_parallel_loop(loop, *args)
    return args[-1].sum(axis=0)
