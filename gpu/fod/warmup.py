"""Compile the CSD and MSMT-CSD kernels a backend uses (and on a GPU, response estimation's
tensor fit) into numba's on-disk cache.

The warm-up goes through :func:`gpu.fod.msmt_csd` and :func:`gpu.fod.csd` themselves on a
few phantom voxels, so the kernels see the argument types of a real run; the solvers'
kernels do not depend on lmax or the number of volumes (they take them from the arrays).
On a GPU the kernels' cubins are saved then too, for fresh processes to launch without
numba (gpu.cuda.family_kernels). The CPU loops go through numba, also where an
ahead-of-time build (gpu.ahead_of_time) would serve these few voxels: larger runs take
numba's, and the build is made of what numba compiled here (gpu.fod.ahead_of_time).
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from gpu.ahead_of_time import numba_only
from gpu.fod.deconvolution import csd, msmt_csd
from gpu.fod.phantom import dwi_phantom, shell_scheme, tissue_responses
from gpu.fod.response_tensor import tensor_fa_and_direction

__all__ = ["warm_up_fod"]


def warm_up_fod(backend: str = "cpu", log: Callable[[str], None] = lambda message: None) -> float:
    """Compile (or load) the ``backend`` (cpu|cuda) CSD and MSMT-CSD kernels; returns the
    seconds it took, about zero where the cache was already warm. For cuda, the CPU
    MSMT-CSD loop too (the CUDA backend solves there the voxels its kernel hands back), and
    the tensor fit's kernel."""
    bvals, bvecs = shell_scheme(2, ((1000, 30), (2000, 30)))
    dwi = dwi_phantom((3, 1, 1), bvals, bvecs, snr=None)["dwi"]
    # the CUDA kernels are compiled for the signals' type: float32, as jobs read every DWI,
    # and float64, as a caller of gpu.fod may hand one (the CPU loops take float64 always)
    dwis = (dwi.astype(np.float32), dwi) if backend == "cuda" else (dwi,)
    wm, gm, csf = tissue_responses([0.0, 1000.0, 2000.0])
    started = time.perf_counter()
    with numba_only():
        for signals in dwis:
            msmt_csd(signals, bvals, bvecs, [wm, gm, csf], backend=backend)
            csd(signals, bvals, bvecs, wm[-1], backend=backend)
        if backend == "cuda":
            msmt_csd(dwi, bvals, bvecs, [wm, gm, csf], backend="cpu")
            # response estimation's tensor fit, on the float32 signals a job reads: rows
            # gathered a volume at a time (a NIfTI's) and voxel-major (a volume-fastest .mif's)
            rows = dwis[0].reshape(-1, bvals.size)
            for layout in (rows, np.asfortranarray(rows)):
                tensor_fa_and_direction(layout, np.column_stack([bvecs, bvals]), backend)
    seconds = time.perf_counter() - started
    log(f"fod: CSD and MSMT-CSD ({backend}): {seconds:.1f} s")
    return seconds
