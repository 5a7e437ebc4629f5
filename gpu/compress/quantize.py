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

import numpy as np

from gpu.cuda.backend import resolve_backend

__all__ = ["quantize", "dequantize"]


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

        return quantize_cuda(values, step, reference)
    values = np.asarray(values, dtype=np.float64)
    if reference is not None:
        values = values - np.asarray(reference, dtype=np.float64)
    if values.size and float(np.abs(values).max()) / step >= 2**31 - 1:
        raise ValueError(f"quantisation step {step:g} is too fine for 32-bit codes of values up to "
                         f"{float(np.abs(values).max()):g}; the error target is too tight for this volume")
    # floor(v/step + ½) with the reciprocal, as the kernel computes it, so both backends agree on ties
    return np.floor(values * (1.0 / step) + 0.5).astype(np.int32)


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
