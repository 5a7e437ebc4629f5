"""CPU backend of FMLS segmentation: the loop of :mod:`gpu.fixels.cpu_loops` over voxels,
from its ahead-of-time build on the host's threads where ``fibertensor warmup`` made one
(:func:`gpu.ahead_of_time.run_on_threads`), else through numba; the same bytes either way.
"""

from __future__ import annotations

import numpy as np

from gpu import ahead_of_time
from gpu.fixels.fmls_tables import FmlsTables

__all__ = ["segment_voxels_cpu", "build_present", "LOOP_MODULE", "COMPILE_SECONDS"]

#: The module of the loop ``segment_loop``.
LOOP_MODULE = "gpu.fixels.cpu_loops"

#: Seconds the segmentation loop takes to compile on an idle 2-core machine: what a first run
#: is told to expect.
COMPILE_SECONDS = 17


def segment_voxels_cpu(coeffs: np.ndarray, tables: FmlsTables, integral_threshold: float, peak_threshold: float,
                       merge_ratio: float, maxnum: int, dir_from_peak: bool,
                       capacity: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """FMLS fixels of each voxel (row) of SH ``coeffs`` (V, n_coeffs) on the CPU.

    Returns counts (V,) int32, directions (V, capacity, 3), afd (V, capacity) and
    peak_amp (V, capacity), float64: voxel v's first min(counts[v], capacity) fixels in lobe
    order. A voxel whose count exceeds ``capacity`` must be run again with more.
    """
    n = coeffs.shape[0]
    args = _loop_args(coeffs, tables, integral_threshold, peak_threshold, merge_ratio, maxnum, dir_from_peak, capacity)
    build = ahead_of_time.lookup(f"{LOOP_MODULE}.segment_loop", args)
    if build is not None:
        # the voxel rows: the coefficients in, the counts and fixels out
        ahead_of_time.run_on_threads(build, args, (0, 14, 15, 16, 17), n)
    else:
        _run_on_every_core(args)
    return args[14:]


def build_present(tables: FmlsTables) -> bool:
    """Whether a current ahead-of-time build of the loop (``fibertensor warmup --backend cpu
    --family fixels``) is there for :func:`segment_voxels_cpu` to take."""
    args = _loop_args(np.zeros((1, tables.sh_to_amp.shape[1])), tables, 0.0, 0.0, 1.0, 0, False, 1)
    return ahead_of_time.lookup(f"{LOOP_MODULE}.segment_loop", args) is not None


def _loop_args(coeffs: np.ndarray, tables: FmlsTables, integral_threshold: float, peak_threshold: float,
               merge_ratio: float, maxnum: int, dir_from_peak: bool, capacity: int) -> tuple:
    """The loop's arguments, its outputs (counts, directions, afd, peak_amp) zeroed last."""
    n = coeffs.shape[0]
    return (np.ascontiguousarray(coeffs, np.float64), tables.lmax, tables.unit, tables.neighbours, tables.weights,
            np.ascontiguousarray(tables.sh_to_amp.T), tables.legendre, tables.legendre_step, tables.derivative_factors,
            float(integral_threshold), float(peak_threshold), float(merge_ratio), int(maxnum), bool(dir_from_peak),
            np.zeros(n, np.int32), np.zeros((n, capacity, 3)), np.zeros((n, capacity)), np.zeros((n, capacity)))


def _run_on_every_core(args: tuple) -> None:
    """The loop through numba, its voxels over every thread."""
    from gpu.cpu_parallel import run_parallel_loop
    from gpu.cuda.compile_notice import announce_compile, is_compiled

    loop = ahead_of_time.import_numba_module(LOOP_MODULE).segment_loop
    if not is_compiled(loop, args):
        announce_compile("the FMLS CPU loop", COMPILE_SECONDS)
    run_parallel_loop(loop, *args)
