"""The error a residual step leaves, in one pass over the volume without storing the decoded
values: for each entry ``y = cast(p + Δ·⌊(x − p)/Δ + ½⌋)``
(:func:`gpu.compress.quantize.decoded_value`: the volume the decoder returns with predictor
``p``, the Tucker reconstruction, and step ``Δ``), the sums the encoder's step searches compare
with their budget: ``Σ (y − x)²`` and ``max |y − x|``. Several steps can be measured in one
launch and one copy back (:func:`step_errors`), each block going over its entries once a step.

Sums are per block of ``BLOCK`` entries, then over the blocks on the host (``math.fsum``), so
a result does not depend on the thread count; within a block the CPU adds in order and the
GPU by a tree, so the two backends, and numpy's pairwise sum, may differ in the last bits.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from gpu.compress.quantize import decoded_value
from gpu.cpu_parallel import run_parallel_loop
from gpu.cuda.compile_notice import notice_compile
from gpu.cuda.backend import resolve_backend

__all__ = ["step_error", "step_errors", "cast_kind", "BLOCK"]

BLOCK = 8192


def cast_kind(dtype) -> tuple[int, float, float]:
    """``(cast, lo, hi)`` of the decoder's output type, as :func:`decoded_value` takes them."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return 2, float(info.min), float(info.max)
    return (1 if dtype.itemsize < 8 else 0), 0.0, 0.0


@njit(parallel=True, cache=True)
def _block_sums(x, p, steps, inv_steps, cast, lo, hi, sums, maxima):  # pragma: no cover - compiled
    n = x.shape[0]
    for b in prange(sums.shape[0]):
        for k in range(steps.shape[0]):  # a step at a time: its block's entries again, from cache
            total = 0.0
            largest = 0.0
            for i in range(b * BLOCK, min(n, (b + 1) * BLOCK)):
                d = decoded_value(x[i], p[i], steps[k], inv_steps[k], cast, lo, hi) - x[i]
                total += d * d
                largest = max(largest, abs(d))
            sums[b, k] = total
            maxima[b, k] = largest


def step_error(x, prediction, step: float, output_dtype, backend: str = "cpu") -> tuple[float, float]:
    """``(‖Y − X‖_F, max |Y − X|)`` of the volume decoded with residual step ``step``.

    Parameters
    ----------
    x, prediction : float64 arrays of one shape, C-contiguous (on the CUDA backend device
        arrays, numba or CuPy, and the pass runs on the GPU)
    step : float > 0, or 0 for no residual (every code 0: the decoded volume is the
        prediction, cast)
    output_dtype : the decoder's output type (its cast is part of the error)
    backend : ``cpu``, ``cuda`` or ``auto``
    """
    return step_errors(x, prediction, [step], output_dtype, backend)[0]


def step_errors(x, prediction, steps, output_dtype, backend: str = "cpu") -> list[tuple[float, float]]:
    """:func:`step_error` of each of ``steps`` in one launch and one copy back (a wait for
    the device where the search needs several): the same numbers as one call a step."""
    if not len(steps):
        raise ValueError("step_errors measures one step or more")
    cast, lo, hi = cast_kind(output_dtype)
    steps = np.asarray(steps, dtype=np.float64)
    inv_steps = np.divide(1.0, steps, out=np.zeros_like(steps), where=steps != 0)  # 0: q = ⌊½⌋ = 0 for every entry
    n = math.prod(x.shape)
    blocks = max(1, -(-n // BLOCK))
    if resolve_backend(backend) == "cuda":
        from gpu.compress.step_error_cuda import block_sums_cuda

        sums, maxima = block_sums_cuda(x, prediction, steps, inv_steps, cast, lo, hi, blocks, BLOCK)
    else:
        args = (np.ascontiguousarray(x, dtype=np.float64).reshape(-1),
                np.ascontiguousarray(prediction, dtype=np.float64).reshape(-1), steps, inv_steps, cast, lo, hi,
                np.empty((blocks, len(steps)), np.float64), np.empty((blocks, len(steps)), np.float64))
        notice_compile(_block_sums, args, "the compression CPU loops", None)
        run_parallel_loop(_block_sums, *args)
        sums, maxima = args[-2:]
    return [(math.sqrt(math.fsum(sums[:, k])), float(maxima[:, k].max())) for k in range(len(steps))]
