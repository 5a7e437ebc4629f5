"""Compile every SS-HOPM kernel a backend uses into numba's on-disk cache.

A kernel compiles once per argument-type signature, so the warm-up goes through
:func:`gpu.peaks.search.sshopm_peaks` itself, on a few phantom voxels per lmax: the kernels
see the argument types of a real run. The CPU loop takes one signature (its chunks are made
C-contiguous float64); the CUDA kernels take two, whole device arrays and slices of them
(a volume in several chunks), so the CUDA warm-up runs once whole and once in chunks, and
the SH→tensor kernel two more, coefficients in either layout (gpu.peaks.backend_cuda).
On a GPU the kernels' cubins are saved then too, for fresh processes to launch without
numba (gpu.cuda.family_kernels).
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from gpu.ahead_of_time import numba_only
from gpu.peaks.phantom import fod_phantom
from gpu.peaks.search import sshopm_peaks
from gpu.sh_basis import SUPPORTED_LMAX

__all__ = ["warm_up_peaks"]

_VOXELS = 3


def warm_up_peaks(
    backend: str = "cpu",
    lmaxes: tuple[int, ...] = SUPPORTED_LMAX,
    log: Callable[[str], None] = lambda message: None,
) -> dict[int, float]:
    """Compile (or load) the ``backend`` (cpu|cuda) kernels of each lmax; returns the seconds
    each lmax took, about zero where the cache was already warm. numba's CPU loops, also where
    an ahead-of-time build (gpu.ahead_of_time) exists: runs without a current build take
    numba's."""
    seconds = {}
    for lmax in lmaxes:
        # Fibers in every voxel, so that every phase runs (the CUDA climb kernel only with seeds).
        sh = fod_phantom((_VOXELS,), lmax, fiber_fractions=(0.0, 1.0, 0.0), noise=0.0)["sh"]
        started = time.perf_counter()
        with numba_only():
            sshopm_peaks(sh, backend=backend)
        if backend == "cuda":
            sshopm_peaks(sh, backend=backend, chunk_voxels=_VOXELS - 1)
            # a NIfTI's layout: each coefficient's voxels together (the phantom has each
            # voxel's coefficients together), another type for the SH→tensor kernel
            sshopm_peaks(np.asfortranarray(sh), backend=backend)
            sshopm_peaks(np.asfortranarray(sh), backend=backend, chunk_voxels=_VOXELS - 1)
        seconds[lmax] = time.perf_counter() - started
        log(f"peaks lmax {lmax:2d} ({backend}): {seconds[lmax]:.1f} s")
    return seconds
