"""numba.cuda kernels of :mod:`gpu.compress.quantize`: one grid-stride pass per direction.

``quantize_kernel``: ``codes[i] = ⌊(x[i] − ref[i]) / step + ½⌋`` as int32 (the residual of the
Tucker reconstruction, or the core with no reference), flagging a code that would not fit; ``dequantize_kernel``:
``out[i] = ref[i] + step · codes[i]`` in float64. Arrays are flat views; host arrays are
copied to the device and the results copied back, device arrays (numba or CuPy) stay there.
Launched from their cubins on a GPU (:mod:`gpu.compress.cuda_kernels`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from gpu.compress.cuda_kernels import compress_kernels, launch_view

__all__ = ["quantize_kernel", "dequantize_kernel", "quantize_cuda", "dequantize_cuda"]

_BLOCK = 256
_MAX_BLOCKS = 4096


@cuda.jit(cache=True)
def quantize_kernel(x, ref, use_ref, inv_step, codes, overflow):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, x.shape[0], stride):
        v = x[i] - ref[i] if use_ref else x[i]
        u = v * inv_step
        if abs(u) >= 2147483647.0:  # its code would not fit in 32 bits: the call is refused
            overflow[0] = 1
            u = 0.0
        codes[i] = np.int32(math.floor(u + 0.5))


@cuda.jit(cache=True)
def dequantize_kernel(codes, ref, use_ref, step, out):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, codes.shape[0], stride):
        v = codes[i] * step
        out[i] = ref[i] + v if use_ref else v


def _grid(n: int) -> int:
    return max(1, min(_MAX_BLOCKS, (n + _BLOCK - 1) // _BLOCK))


def _flat_device(api, a):
    """A flat device view of ``a`` and whether it came from the host."""
    if isinstance(a, np.ndarray):
        return api.to_device(np.ascontiguousarray(a).reshape(-1)), True
    return launch_view(a, flat=True), False


def quantize_cuda(values, step: float, reference=None):
    """:func:`gpu.compress.quantize.quantize` on the GPU, and the largest ``|values −
    reference|`` where a code would not fit in 32 bits (else None)."""
    kernels = compress_kernels()
    api = kernels.api
    shape = values.shape
    x, on_host = _flat_device(api, values)
    ref = _flat_device(api, reference)[0] if reference is not None else x
    codes = api.device_array(x.shape[0], np.int32)
    overflow = kernels.full(1, np.int32, 0)
    kernels["quantize_kernel"][_grid(x.shape[0]), _BLOCK](x, ref, reference is not None, 1.0 / step, codes, overflow)
    largest = None
    if overflow.copy_to_host()[0]:  # the error path: its message names the largest value
        v = x.copy_to_host() - (ref.copy_to_host() if reference is not None else 0.0)
        largest = float(np.abs(v).max())
    return (codes.copy_to_host().reshape(shape) if on_host else codes.reshape(shape)), largest


def dequantize_cuda(codes, step: float, reference=None):
    """:func:`gpu.compress.quantize.dequantize` on the GPU (float64)."""
    kernels = compress_kernels()
    api = kernels.api
    shape = codes.shape
    q, on_host = _flat_device(api, codes)
    out = api.device_array(q.shape[0], np.float64)
    ref = _flat_device(api, reference)[0] if reference is not None else out
    kernels["dequantize_kernel"][_grid(q.shape[0]), _BLOCK](q, ref, reference is not None, float(step), out)
    return out.copy_to_host().reshape(shape) if on_host else out.reshape(shape)
