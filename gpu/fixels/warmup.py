"""Compile the FMLS segmentation kernels a backend uses into numba's on-disk cache, through
:func:`gpu.fixels.segment_fods` on a few phantom voxels (the kernels take lmax from the
arrays). On a GPU the kernels' cubins are saved then too, for fresh processes to launch
without numba (gpu.cuda.family_kernels). The CPU loop goes through numba, also where an
ahead-of-time build (gpu.ahead_of_time) would serve these few voxels: larger runs take
numba's, and the build is made of what numba compiled here (gpu.fixels.ahead_of_time)."""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from gpu.ahead_of_time import numba_only
from gpu.fixels.segment import segment_fods

__all__ = ["warm_up_fixels"]


def warm_up_fixels(backend: str = "cpu", log: Callable[[str], None] = lambda message: None) -> float:
    """Compile (or load) the ``backend`` (cpu|cuda) FMLS kernels; returns the seconds it took,
    about zero where the cache was already warm. For cuda, the CPU loop too: the CUDA backend
    redoes there the voxels with more fixels than its first pass holds."""
    # one fibre along z: an apodised delta (zonal terms only, index l(l+1)/2 in MRtrix3's order)
    sh = np.zeros((3, 1, 1, 45))
    for l in range(0, 9, 2):
        sh[..., l * (l + 1) // 2] = np.sqrt((2 * l + 1) / (4 * np.pi)) * np.exp(-l * (l + 1) / 20)
    started = time.perf_counter()
    # float32 as the image readers give it, laid out as NIfTI and as dwi2fod's .mif store it
    with numba_only():
        for image in (np.asfortranarray(sh, np.float32), np.ascontiguousarray(sh, np.float32)):
            segment_fods(image, backend=backend)
        if backend == "cuda":
            segment_fods(sh, backend="cpu")
    seconds = time.perf_counter() - started
    log(f"fixels: FMLS segmentation ({backend}): {seconds:.1f} s")
    return seconds
