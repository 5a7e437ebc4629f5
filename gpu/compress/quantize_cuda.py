"""numba.cuda kernels of :mod:`gpu.compress.quantize`: one grid-stride pass per direction.

``quantize_kernel``: ``codes[i] = ⌊(x[i] − ref[i]) / step + ½⌋`` as int32 (the residual of the
Tucker reconstruction, or the core with no reference); ``dequantize_kernel``:
``out[i] = ref[i] + step · codes[i]`` in float64. Arrays are flat views; host arrays are
copied to the device and the results copied back, device arrays (numba or CuPy) stay there.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

__all__ = ["quantize_kernel", "dequantize_kernel", "quantize_cuda", "dequantize_cuda"]

_BLOCK = 256
_MAX_BLOCKS = 4096


@cuda.jit(cache=True)
def quantize_kernel(x, ref, use_ref, inv_step, codes):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, x.shape[0], stride):
        v = x[i] - ref[i] if use_ref else x[i]
        codes[i] = np.int32(math.floor(v * inv_step + 0.5))


@cuda.jit(cache=True)
def dequantize_kernel(codes, ref, use_ref, step, out):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, codes.shape[0], stride):
        v = codes[i] * step
        out[i] = ref[i] + v if use_ref else v


def _grid(n: int) -> int:
    return max(1, min(_MAX_BLOCKS, (n + _BLOCK - 1) // _BLOCK))


def _flat_device(a):
    """A flat device view of ``a`` and whether it came from the host."""
    if isinstance(a, np.ndarray):
        return cuda.to_device(np.ascontiguousarray(a).reshape(-1)), True
    if not hasattr(a, "copy_to_host"):  # a CuPy array
        a = cuda.as_cuda_array(a)
    return a.reshape(-1), False


def quantize_cuda(values, step: float, reference=None):
    """:func:`gpu.compress.quantize.quantize` on the GPU."""
    shape = values.shape
    x, on_host = _flat_device(values)
    ref = _flat_device(reference)[0] if reference is not None else x
    codes = cuda.device_array(x.shape[0], dtype=np.int32)
    quantize_kernel[_grid(x.shape[0]), _BLOCK](x, ref, reference is not None, 1.0 / step, codes)
    return codes.copy_to_host().reshape(shape) if on_host else codes.reshape(shape)


def dequantize_cuda(codes, step: float, reference=None):
    """:func:`gpu.compress.quantize.dequantize` on the GPU (float64)."""
    shape = codes.shape
    q, on_host = _flat_device(codes)
    out = cuda.device_array(q.shape[0], dtype=np.float64)
    ref = _flat_device(reference)[0] if reference is not None else out
    dequantize_kernel[_grid(q.shape[0]), _BLOCK](q, ref, reference is not None, float(step), out)
    return out.copy_to_host().reshape(shape) if on_host else out.reshape(shape)
