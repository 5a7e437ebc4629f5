"""CPU backend of FMLS segmentation: the loop of :mod:`gpu.fixels.cpu_loops` over voxels.

A run of at most :data:`SERIAL_MAX_VOXELS` voxels takes the loop's ahead-of-time build where
``fibertensor warmup`` made one (:mod:`gpu.ahead_of_time`) while the process's runs of it add
up to no more (:func:`gpu.ahead_of_time.serial_build`): the same machine code on one thread,
without numba's start-up, which costs a fresh process more than such runs
(docs/decisions/cpu-ahead-of-time.md). Other runs, and every run without a build, go
through numba on every thread (:func:`gpu.cpu_parallel.run_parallel_loop`). Either gives the
same bytes.
"""

from __future__ import annotations

import numpy as np

from gpu import ahead_of_time
from gpu.fixels.fmls_tables import FmlsTables

__all__ = ["segment_voxels_cpu", "SERIAL_MAX_VOXELS", "LOOP_MODULE", "COMPILE_SECONDS"]

#: Runs of at most this many voxels take the loop's serial ahead-of-time build, where there is
#: one, until the process's runs of it add up to more: about as long on one thread as numba's
#: start-up, which more voxels repay on several cores (docs/decisions/cpu-ahead-of-time.md).
SERIAL_MAX_VOXELS = 4096

#: The module of the loop ``segment_loop``.
LOOP_MODULE = "gpu.fixels.cpu_loops"

#: Seconds the segmentation loop takes to compile on an idle 2-core machine: what a first run
#: is told to expect.
COMPILE_SECONDS = 17


def segment_voxels_cpu(coeffs: np.ndarray, tables: FmlsTables, integral_threshold: float, peak_threshold: float,
                       merge_ratio: float, maxnum: int, dir_from_peak: bool, capacity: int,
                       run_voxels: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """FMLS fixels of each voxel (row) of SH ``coeffs`` (V, n_coeffs) on the CPU.

    ``run_voxels``: the voxels of the whole run these rows are a chunk of (default V), which
    picks the serial build (at most :data:`SERIAL_MAX_VOXELS`) or numba's parallel loop.

    Returns counts (V,) int32, directions (V, capacity, 3), afd (V, capacity) and
    peak_amp (V, capacity), float64: voxel v's first min(counts[v], capacity) fixels in lobe
    order. A voxel whose count exceeds ``capacity`` must be run again with more.
    """
    n = coeffs.shape[0]
    counts = np.zeros(n, np.int32)
    out_dir = np.zeros((n, capacity, 3))
    out_afd = np.zeros((n, capacity))
    out_peak = np.zeros((n, capacity))
    args = (np.ascontiguousarray(coeffs, np.float64), tables.lmax, tables.unit, tables.neighbours, tables.weights,
            np.ascontiguousarray(tables.sh_to_amp.T), tables.legendre, tables.legendre_step, tables.derivative_factors,
            float(integral_threshold), float(peak_threshold), float(merge_ratio), int(maxnum), bool(dir_from_peak),
            counts, out_dir, out_afd, out_peak)
    serial = None
    if (n if run_voxels is None else run_voxels) <= SERIAL_MAX_VOXELS:
        serial = ahead_of_time.serial_build(f"{LOOP_MODULE}.segment_loop", args, n, SERIAL_MAX_VOXELS)
    if serial is not None:
        serial(*args)
    else:
        _run_on_every_core(args)
    return counts, out_dir, out_afd, out_peak


def _run_on_every_core(args: tuple) -> None:
    """The loop through numba, its voxels over every thread."""
    from gpu.cpu_parallel import run_parallel_loop
    from gpu.cuda.compile_notice import announce_compile, is_compiled

    loop = ahead_of_time.import_numba_module(LOOP_MODULE).segment_loop
    if not is_compiled(loop, args):
        announce_compile("the FMLS CPU loop", COMPILE_SECONDS)
    run_parallel_loop(loop, *args)
