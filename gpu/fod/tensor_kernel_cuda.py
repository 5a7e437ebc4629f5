"""CUDA kernel of the tensor fit response estimation starts from: one voxel per thread,
float64, the steps of :func:`gpu.fod.response_tensor.tensor_params` (``dwi2tensor``'s
iteratively reweighted linear least squares, its 7 × 7 normal equations solved by Cholesky).

The voxel's signals are read once per iteration (log and weights recomputed from them, not
kept: a thread's registers hold the normal matrix, its factor and the parameters alone),
from the signals laid out a volume at a time, so that a warp's reads are coalesced and a DWI
gathered a volume at a time (:func:`gpu.fod.voxel_rows.masked_rows`) goes to the GPU uncopied.
Results equal the CPU's to rounding (the GPU contracts multiply-adds, and sums each volume
in turn where numpy's loops may pair them). A voxel whose matrix is not positive definite, or
that holds no positive signal, gets NaN parameters, as the CPU's passes give it.
"""

from __future__ import annotations

import math

from numba import cuda, float64

__all__ = ["tensor_kernel"]

# the parameters (Dxx, Dyy, Dzz, Dxy, Dxz, Dyz, log S0) and the packed lower triangle of
# their normal matrix
_K = 7
_PACKED = _K * (_K + 1) // 2


@cuda.jit(device=True)
def _cholesky_solve(normal, rhs, lower, x):
    """x of normal · x = rhs (``normal`` packed by rows, lower triangle) in the order of the
    CPU's :func:`gpu.fod.response_tensor._cholesky_solve`; False where a pivot is not positive."""
    e = 0
    for i in range(_K):
        row_i = i * (i + 1) // 2
        for j in range(i + 1):
            row_j = j * (j + 1) // 2
            value = normal[e]
            for m in range(j):
                value -= lower[row_i + m] * lower[row_j + m]
            if i == j:
                if not value > 0.0:
                    return False
                lower[e] = math.sqrt(value)
            else:
                lower[e] = value / lower[row_j + j]
            e += 1
    for i in range(_K):
        row_i = i * (i + 1) // 2
        value = rhs[i]
        for m in range(i):
            value -= lower[row_i + m] * x[m]
        x[i] = value / lower[row_i + i]
    for i in range(_K - 1, -1, -1):
        value = x[i]
        for m in range(i + 1, _K):
            value -= lower[m * (m + 1) // 2 + i] * x[m]
        x[i] = value / lower[i * (i + 1) // 2 + i]
    return True


@cuda.jit(cache=True)
def tensor_kernel(volumes, design, products, iterations, params):
    """params[v] = the tensor fit of volumes[:, v] (n,), ``iterations`` reweightings.

    volumes : (n, V) float32 or float64; design : (n, 7) float64; products : (n, 28) float64,
    each volume's products of design columns (lower triangle by rows); params : (V, 7) float64.
    """
    v = cuda.grid(1)
    if v >= volumes.shape[1]:
        return
    n = volumes.shape[0]
    normal = cuda.local.array(_PACKED, float64)
    lower = cuda.local.array(_PACKED, float64)
    rhs = cuda.local.array(_K, float64)
    x = cuda.local.array(_K, float64)
    peak = float64(volumes[0, v])
    for i in range(1, n):
        peak = max(peak, float64(volumes[i, v]))
    # dwi2tensor floors the signal at 1e-6 of the voxel's largest value before the log
    floor = 1e-6 * peak
    solved = floor > 0.0
    it = 0
    while solved and it <= iterations:
        for e in range(_PACKED):
            normal[e] = 0.0
        for k in range(_K):
            rhs[k] = 0.0
        for i in range(n):
            s = max(float64(volumes[i, v]), floor)
            if it == 0:
                w = s
            else:
                t = 0.0
                for k in range(_K):
                    t += design[i, k] * x[k]
                w = math.exp(t)
            squared = w * w
            for e in range(_PACKED):
                normal[e] += squared * products[i, e]
            weighted_log = squared * math.log(s)
            for k in range(_K):
                rhs[k] += weighted_log * design[i, k]
        solved = _cholesky_solve(normal, rhs, lower, x)
        it += 1
    for k in range(_K):
        params[v, k] = x[k] if solved else math.nan
