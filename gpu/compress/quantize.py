"""Uniform scalar quantisation, the step every error-bounded stage of the codec takes.

``codes = ⌊(values − reference) / step + ½⌋`` and back ``reference + step · codes``: the
mid-tread quantiser whose error is at most ``step / 2`` per entry and about ``step/√12`` in
RMS when the values spread over many steps (Gersho & Gray 1992, Sec. 5.4). The residual
stage quantises the Tucker reconstruction's error this way (SZ's "prediction + linear
quantisation", Di & Cappello 2016, Sec. III-B, with the Tucker reconstruction as the
predictor). ``backend="cuda"`` runs the elementwise passes as numba.cuda kernels
(:mod:`gpu.compress.quantize_cuda`) on host or device arrays.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from gpu.cpu_parallel import run_parallel_loop
from gpu.cuda.backend import resolve_backend
from gpu.cuda.compile_notice import notice_compile

__all__ = ["quantize", "quantize_histogram", "dequantize", "decoded_value", "LOOP_ENTRIES"]

_BLOCK = 8192
#: arrays of this many entries or more are quantised by the parallel loop; fewer, by numpy in
#: the caller's thread (a few blocks: not worth the loop's hand-off)
LOOP_ENTRIES = 8 * _BLOCK


@njit(parallel=True, cache=True)
def _quantize_blocks(x, ref, use_ref, inv_step, codes, largest):  # pragma: no cover - compiled
    """``codes[i] = ⌊(x[i] − ref[i]) · inv_step + ½⌋`` and each block's largest ``|x[i] − ref[i]|``,
    in one pass (the operations, in order, of the numpy expression they replace)."""
    n = x.shape[0]
    for b in prange(largest.shape[0]):
        top = 0.0
        for i in range(b * _BLOCK, min(n, (b + 1) * _BLOCK)):
            v = x[i] - ref[i] if use_ref else x[i]
            top = max(top, abs(v))
            codes[i] = np.int32(math.floor(v * inv_step + 0.5))  # refused below where it does not fit
        largest[b] = top


def quantize(values, step: float, reference=None, backend: str = "cpu"):
    """Integer codes of ``values − reference`` on a grid of ``step``.

    Parameters
    ----------
    values : array, any shape
    step : float > 0
    reference : array of the same shape, or None (zero)
    backend : ``cpu``, ``cuda`` or ``auto``

    Returns
    -------
    codes : int32 array of ``values``' shape (a device array on the CUDA backend when the
        inputs are device arrays)
    """
    if not step > 0:
        raise ValueError(f"quantisation step must be positive, got {step}")
    if resolve_backend(backend) == "cuda":
        from gpu.compress.quantize_cuda import quantize_cuda

        codes, largest = quantize_cuda(values, step, reference)
    else:
        shape = np.shape(values)
        flat = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
        ref = flat if reference is None else np.ascontiguousarray(reference, dtype=np.float64).reshape(-1)
        # floor(v/step + ½) with the reciprocal, as the kernel computes it, so both backends agree on ties
        if flat.size < LOOP_ENTRIES:
            # by numpy in this thread, the same operations: the hand-off to the parallel-loop
            # thread cost more than the pass (the encoder's search quantises every factor so)
            v = flat - ref if reference is not None else flat
            largest = float(np.abs(v).max(initial=0.0))
            codes = np.floor(v * (1.0 / step) + 0.5)  # made int32 below, where they fit
        else:
            codes = np.empty(flat.size, np.int32)
            args = (flat, ref, reference is not None, 1.0 / step, codes, np.zeros(max(1, -(-flat.size // _BLOCK))))
            notice_compile(_quantize_blocks, args, "the compression CPU loops", None)
            run_parallel_loop(_quantize_blocks, *args)
            largest = float(args[-1].max())
        largest = largest if largest / step >= 2**31 - 1 else None
        codes = codes.astype(np.int32, copy=False).reshape(shape) if largest is None else None
    if largest is not None:
        raise ValueError(f"quantisation step {step:g} is too fine for 32-bit codes of values up to "
                         f"{largest:g}; the error target is too tight for this volume")
    return codes


def quantize_histogram(values, step: float, reference=None, backend: str = "cpu", keep_codes: bool = True):
    """:func:`quantize`'s codes (None unless ``keep_codes``) and their histogram clipped to
    ±(MAX_RADIUS + 1) (:func:`gpu.compress.chunked_rans.clipped_histogram`, (SPAN,) int64).
    On the CUDA backend (device arrays) in one pass and one copy back: the encoder's search
    prices its choices by such histograms, a wait for the device each."""
    if not step > 0:
        raise ValueError(f"quantisation step must be positive, got {step}")
    if resolve_backend(backend) == "cuda":
        from gpu.compress.chunked_rans_cuda import quantize_histogram_cuda

        codes, hist, overflowed = quantize_histogram_cuda(values, step, reference, keep_codes)
        if overflowed:  # quantize's own pass measures the largest value its message names
            quantize(values, step, reference, backend)
        return codes, hist
    from gpu.compress.chunked_rans import clipped_histogram

    codes = quantize(values, step, reference)
    return (codes if keep_codes else None), clipped_histogram(codes)


def dequantize(codes, step: float, reference=None, backend: str = "cpu"):
    """``reference + step · codes`` in float64 (the inverse of :func:`quantize` up to its
    rounding)."""
    if resolve_backend(backend) == "cuda":
        from gpu.compress.quantize_cuda import dequantize_cuda

        return dequantize_cuda(codes, step, reference)
    out = np.asarray(codes, dtype=np.float64) * step
    if reference is not None:
        out += np.asarray(reference, dtype=np.float64)
    return out


@register_jitable
def decoded_value(x, p, step, inv_step, cast, lo, hi):  # pragma: no cover - compiled
    """The decoder's value of entry ``x`` with prediction ``p`` and residual step ``step``, as
    :func:`quantize` then :func:`dequantize` and the output cast compute it, term for term:
    ``cast`` 0 none, 1 float32, 2 an integer type (half to even, as ``np.rint``, clipped to
    ``[lo, hi]``)."""
    q = math.floor((x - p) * inv_step + 0.5)
    v = q * step
    y = p + v
    if cast == 1:
        y = np.float64(np.float32(y))
    elif cast == 2:
        f = math.floor(y)
        d = y - f  # exact: y and its floor are within one unit of each other
        if d > 0.5 or (d == 0.5 and f % 2.0 != 0.0):
            f += 1.0
        y = min(max(f, lo), hi)
    return y
