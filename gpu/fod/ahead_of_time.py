"""The ahead-of-time builds of the CSD and MSMT-CSD CPU loops (:mod:`gpu.ahead_of_time`).
``fibertensor warmup --backend cpu --family fod`` builds the loops the warm-up ran
(:func:`gpu.fod.warmup.warm_up_fod`): a later CPU fit of any size (on the host's threads),
response estimation's included, runs without loading numba. A warm-up for the GPU builds
the MSMT-CSD loop alone, under a name of its own (so that it leaves a CPU build's CSD loop in
place): the CUDA backend solves there the voxels its kernel hands back, and a GPU job, whose
kernels launch from cubins, then does so without loading numba either.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BUILD_NAME", "FALLBACK_BUILD_NAME", "build_fod_ahead_of_time"]

#: The builds' names in :func:`gpu.ahead_of_time.build_folder`: the CPU loops, and the
#: MSMT-CSD loop alone (the CUDA backend's fallback).
BUILD_NAME = "fod"
FALLBACK_BUILD_NAME = "fod_fallback"


def build_fod_ahead_of_time(fallback: bool = False) -> Path:
    """Build every CSD and MSMT-CSD CPU loop signature this process has loaded or compiled
    into one extension module, :data:`BUILD_NAME`; with ``fallback``, the MSMT-CSD loop's
    alone, :data:`FALLBACK_BUILD_NAME`. Returns its path."""
    from gpu.ahead_of_time import build
    from gpu.fod import cpu_loops

    if fallback:
        return build(FALLBACK_BUILD_NAME, [cpu_loops.msmt_loop])
    return build(BUILD_NAME, [loop for loop in (cpu_loops.msmt_loop, cpu_loops.csd_loop) if loop.overloads])
