"""numba.cuda kernel of :mod:`gpu.compress.step_error`: a block of threads per ``block``
entries, each thread's strided share summed in order, then the block's by a tree in shared
memory, a step at a time; per block and step one partial sum and maximum, copied back
together. Launched from its cubin on a GPU (:mod:`gpu.compress.cuda_kernels`)."""

from __future__ import annotations

import numpy as np
from numba import cuda, float64

from gpu.compress.cuda_kernels import compress_kernels, launch_view
from gpu.compress.quantize import decoded_value

__all__ = ["block_sums_kernel", "block_sums_cuda"]

_THREADS = 256


@cuda.jit(cache=True)
def block_sums_kernel(x, p, steps, inv_steps, cast, lo, hi, block, out):
    total = cuda.shared.array(_THREADS, float64)
    largest = cuda.shared.array(_THREADS, float64)
    t = cuda.threadIdx.x
    b = cuda.blockIdx.x
    end = min(x.shape[0], (b + 1) * block)
    for k in range(steps.shape[0]):  # a step at a time: its block's entries again, from cache
        s = 0.0
        m = 0.0
        i = b * block + t
        while i < end:
            d = decoded_value(x[i], p[i], steps[k], inv_steps[k], cast, lo, hi) - x[i]
            s += d * d
            m = max(m, abs(d))
            i += _THREADS
        total[t] = s
        largest[t] = m
        cuda.syncthreads()
        half = _THREADS // 2
        while half > 0:
            if t < half:
                total[t] += total[t + half]
                largest[t] = max(largest[t], largest[t + half])
            cuda.syncthreads()
            half //= 2
        if t == 0:
            out[(2 * k) * cuda.gridDim.x + b] = total[0]
            out[(2 * k + 1) * cuda.gridDim.x + b] = largest[0]
        cuda.syncthreads()


def _flat(api, a):
    if isinstance(a, np.ndarray):
        return api.to_device(np.ascontiguousarray(a, dtype=np.float64).reshape(-1))
    return launch_view(a, flat=True)


def block_sums_cuda(x, p, steps: np.ndarray, inv_steps: np.ndarray, cast, lo, hi, blocks: int, block: int):
    """Per-block sums of squared errors and maxima, (blocks, len(steps)) host arrays, of the
    device arrays, for each step."""
    kernels = compress_kernels()
    api = kernels.api
    k_steps = len(steps)
    d_steps = api.to_device(np.concatenate([steps, inv_steps]))
    out = api.device_array(2 * k_steps * blocks, np.float64)
    kernels["block_sums_kernel"][blocks, _THREADS](_flat(api, x), _flat(api, p), d_steps[:k_steps], d_steps[k_steps:],
                                                   cast, lo, hi, block, out)
    host = out.copy_to_host().reshape(k_steps, 2, blocks)
    return host[:, 0].T, host[:, 1].T
