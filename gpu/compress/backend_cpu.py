"""CPU backend of the TTMc: the passes over the tensor and the mode-n products in numpy.

FP16 is emulated with the GPU's rounding model: values are stored as numpy float16, each
GEMM multiplies and accumulates in float32 and rounds the result once to float16 (tensor
cores with FP32 accumulation do the same), so the CPU and CUDA backends share one error
bound. The mode-n product ``Y_(n) = U_n X_(n)`` (poster, Algorithm 1) runs on the
``(P, I_n, Q)`` view of the C-ordered tensor as a batched GEMM ``U_n @ X[p]``: no transposed
copy of X is made.
"""

from __future__ import annotations

import contextlib
import math
import time

import numpy as np

from gpu.compress.bound import Precision
from gpu.compress.scaling import ceil_log2

# Entries of at most 4 bytes (float32: 2^-149 to 2^128) times powers of two whose exponents add
# up to at most this stay in float64's normal range (2^-1022 to 2^1024) at every partial product.
_EXACT_REACH = 800

__all__ = ["CpuTTMcOps", "mode_view", "mode_product"]


def mode_view(shape: tuple[int, ...], mode: int) -> tuple[int, int, int]:
    """(P, I, Q): the products of the dimensions before and after ``mode``."""
    p = int(np.prod(shape[:mode], dtype=np.int64))
    q = int(np.prod(shape[mode + 1 :], dtype=np.int64))
    return p, shape[mode], q


def mode_product(x: np.ndarray, u: np.ndarray, mode: int, precision: Precision) -> np.ndarray:
    """``X ×_mode U`` with storage/accumulation of ``precision`` (``U`` is J × I)."""
    p, i, q = mode_view(x.shape, mode)
    acc = precision.accumulate
    ua = u.astype(acc, copy=False)
    out_shape = x.shape[:mode] + (u.shape[0],) + x.shape[mode + 1 :]
    # Overflow is detected on the result (non-finite count), not through numpy warnings.
    with np.errstate(over="ignore", invalid="ignore"):
        if q == 1:
            y = x.reshape(p, i).astype(acc, copy=False) @ ua.T
        else:
            y = np.matmul(ua, x.reshape(p, i, q).astype(acc, copy=False))
        return y.astype(precision.storage).reshape(out_shape)


class CpuTTMcOps:
    """The operations the TTMc driver needs, on host numpy arrays."""

    name = "cpu"
    gemm = "numpy"

    def __init__(self) -> None:
        self.times: list[tuple[str, float]] = []

    @contextlib.contextmanager
    def phase(self, name: str):
        start = time.perf_counter()
        yield
        self.times.append((name, time.perf_counter() - start))

    def finish(self) -> list[tuple[str, float]]:
        return list(self.times)

    @staticmethod
    def read_int(count) -> int:
        return int(count)

    @staticmethod
    def read_norm(value) -> float:
        return float(value)

    def asarray(self, a, dtype=None) -> np.ndarray:
        return np.ascontiguousarray(a, dtype=dtype)

    def to_host(self, a) -> np.ndarray:
        return np.asarray(a)

    def stats(self, x: np.ndarray) -> tuple[list[np.ndarray], float, int]:
        """Slice maxima ``max |X|`` per mode, ``‖X‖_F²`` and the count of non-finite entries."""
        x64 = np.abs(x.astype(np.float64, copy=False))
        finite = np.isfinite(x64)
        nonfinite = int(x64.size - np.count_nonzero(finite))
        if nonfinite:
            x64 = np.where(finite, x64, 0.0)
        maxima = []
        for n in range(x.ndim):
            others = tuple(a for a in range(x.ndim) if a != n)
            m = x64.max(axis=others) if x64.size else np.zeros(x.shape[n])
            # float32 maxima, as the CUDA kernel keeps them, so both pick the same scales.
            maxima.append(m.astype(np.float32).astype(np.float64))
        return maxima, float(np.sum(x64 * x64)), nonfinite

    def kron_scale(self, x: np.ndarray, exps: list[np.ndarray], dtype) -> tuple[np.ndarray, int]:
        """``X ×_1 diag(2^{e_1}) … ×_N diag(2^{e_N})`` rounded once to ``dtype``.

        The product of the powers of two is formed first and applied in float64, so the
        only rounding is the final cast; returns the array and its non-finite count.
        """
        with np.errstate(over="ignore", invalid="ignore"):
            y = self._times_powers_of_two(x, exps).astype(dtype)
        return y, self.count_nonfinite(y)

    def gather(self, x: np.ndarray, positions: list[np.ndarray]) -> np.ndarray:
        """The entries of X at the given per-mode index arrays, as float64."""
        return x[tuple(positions)].astype(np.float64)

    def scale_scan(self, x: np.ndarray, exps: list[np.ndarray] | None, dtype):
        """One pass: ``X ×_n diag(2^{e_n})`` rounded to ``dtype`` (``None``: nothing written).

        Returns the array (or None) and the scan ``(‖X‖_F², max |X̃|, non-finite inputs,
        non-finite values written)``; ``max |X̃|`` is taken before rounding. With non-finite
        inputs only the counts are meaningful.
        """
        x64 = x.astype(np.float64, copy=False)
        scaled = x64 if exps is None else self._times_powers_of_two(x, exps)
        y = None
        if dtype is not None:
            with np.errstate(over="ignore", invalid="ignore"):
                y = scaled.astype(dtype)
        bad_in = self.count_nonfinite(x64)
        top = float(np.abs(scaled).max(initial=0.0)) if not bad_in else math.nan
        bad_out = 0 if y is None else self.count_nonfinite(y)
        return y, (float(np.sum(x64 * x64)), top, bad_in, bad_out)

    @staticmethod
    def read_scan(scan) -> tuple[float, float, int, int]:
        return scan

    @staticmethod
    def fused_ttm_factors(x, exps, mode: int, rows: int, precision: Precision):
        """What :meth:`scaled_ttm` takes (here the exponents themselves), or None where the
        first product is not fused. The CPU takes the fused route as its two steps, so the
        driver's logic is the GPU's."""
        return exps if precision.name == "fp16" else None

    def scaled_ttm(self, x: np.ndarray, exps: list[np.ndarray], u: np.ndarray, mode: int, precision: Precision):
        """``fp16(X ×_n diag(2^{e_n})) ×_mode U`` and the scan of :meth:`scale_scan`.

        The CUDA backend fuses the two (:mod:`gpu.compress.scaled_ttm`); here they are the
        scaling pass and the mode product, with the same roundings.
        """
        y, scan = self.scale_scan(x, exps, precision.storage)
        return self.ttm(y, np.asarray(u).astype(precision.storage), mode, precision), scan

    @classmethod
    def _times_powers_of_two(cls, x: np.ndarray, exps) -> np.ndarray:
        """``X ×_1 diag(2^{e_1}) … ×_N diag(2^{e_N})`` in float64, exactly (what one ``ldexp``
        by the summed exponents gives): a mode at a time, in place, where every partial product
        stays in float64's normal range (entries of at most 4 bytes, exponents reaching at most
        ``_EXACT_REACH``); else through one grid of the summed exponents, the size of X."""
        reach = sum(int(np.abs(np.asarray(e)).max(initial=0)) for e in exps)
        if x.dtype.itemsize > 4 or reach > _EXACT_REACH:
            return np.ldexp(x.astype(np.float64, copy=False), cls._exponent_grid(x.shape, exps))
        out = x.astype(np.float64)
        for n, e in enumerate(exps):
            view = [1] * x.ndim
            view[n] = len(e)
            out *= np.ldexp(1.0, np.asarray(e, dtype=np.int64)).reshape(view)
        return out

    @staticmethod
    def _exponent_grid(shape, exps) -> np.ndarray:
        total = np.zeros(shape, dtype=np.int64) if len(shape) else np.zeros((), np.int64)
        for n, e in enumerate(exps):
            view = [1] * len(shape)
            view[n] = len(e)
            total = total + np.asarray(e, dtype=np.int64).reshape(view)
        return total

    def count_nonfinite(self, x: np.ndarray) -> int:
        return int(x.size - np.count_nonzero(np.isfinite(x)))

    def ttm(self, x: np.ndarray, u: np.ndarray, mode: int, precision: Precision) -> np.ndarray:
        return mode_product(x, u, mode, precision)

    def fiber_scale(self, x: np.ndarray, mode: int, target: int, dtype):
        """One-sided column scaling of ``X_(mode)``: each mode-``mode`` fiber to max ≤ 2^target.

        Returns the scaled tensor in ``dtype``, the fiber exponents s (P, Q) and the bound
        ``‖S⁻¹‖_F`` used by the underflow term.
        """
        p, i, q = mode_view(x.shape, mode)
        x3 = x.reshape(p, i, q)
        colmax = np.abs(x3.astype(np.float64, copy=False)).max(axis=1)
        s = np.where(colmax > 0, target - ceil_log2(colmax), 0)
        with np.errstate(over="ignore", invalid="ignore"):
            xs = np.ldexp(x3.astype(np.float64, copy=False), s[:, None, :]).astype(dtype)
        inv_norm = float(np.sqrt(np.sum(np.ldexp(1.0, -2 * s))))
        return xs.reshape(x.shape), s, inv_norm

    def fiber_unscale(self, y: np.ndarray, mode: int, row_exp: np.ndarray, s: np.ndarray, dtype):
        """``R⁻¹ Ỹ_(mode) S⁻¹`` into ``dtype`` (exact: powers of two)."""
        p, j, q = mode_view(y.shape, mode)
        e = -np.asarray(row_exp)[None, :, None] - s[:, None, :]
        with np.errstate(over="ignore", invalid="ignore"):
            z = np.ldexp(y.reshape(p, j, q).astype(np.float64), e).astype(dtype)
        return z.reshape(y.shape)
