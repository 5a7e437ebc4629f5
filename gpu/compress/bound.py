"""Rounding model, forward error bound and TTM ordering for the tensor-times-matrix chain.

The TTMc ``Y = X ×_{m_1} U_{m_1} … ×_{m_N} U_{m_N}`` is a chain of GEMMs
``Y_(m) = U_m X_(m)`` (poster "TTMc in low precision on GPUs", Algorithm 1). Each GEMM has
inner dimension ``I_m`` and, computed in floating point, satisfies componentwise
``|fl(U X) − U X| ≤ θ_m |U||X|``, with ``θ_m = γ_{I_m} = I_m u/(1 − I_m u)`` when storage and
accumulation share the unit roundoff ``u``, and ``θ_m = (1+u_s)(1+γ_{I_m}(u_a)) − 1`` for
FP16 storage (``u_s = 2⁻¹¹``) with FP32 accumulation (``u_a``).

Induction over the chain gives ``|Ŷ − Y| ≤ (∏_i (1+θ_{m_i}) − 1)·|X| ×_m |U_m|``, hence the
normwise bound (poster, Section 3)::

    ‖Ŷ − Y‖_F ≤ ‖X‖_F ∏_n ‖U_n‖_F · Σ_i θ_{m_i} ∏_{j<i} (1 + θ_{m_j})

The poster prints the sum as ``Σ_i ∏_{j≤i} γ_{I_j}``. Read literally that is dominated by
``γ_{I_1}`` alone and misses the rounding of every later GEMM, so it is not an upper bound;
the derivation above restores the ``(1 + γ)`` factors. Two consequences we document:
the rounding part of the bound is symmetric in the order (``∏(1+θ) − 1``), and the literal
form with ``u = 2⁻¹¹`` is infinite for ``I ≥ 2048`` because FP16 storage does not mean FP16
accumulation. Both expressions are reported; tests hold the computed error to ours.

The rounding of the inputs to the storage precision adds ``(1+u_s)^{N+1}``, and
gradual underflow adds an absolute term (at most one subnormal per stored value),
which :mod:`gpu.compress.ttmc` evaluates from the power-of-two scales.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "PRECISIONS",
    "Precision",
    "get_precision",
    "gamma",
    "step_theta",
    "rounding_coefficient",
    "poster_literal_coefficient",
    "chain_flops",
    "choose_order",
]


@dataclass(frozen=True)
class Precision:
    """Storage and accumulation formats of one TTMc precision.

    ``u_store``/``u_acc`` are unit roundoffs; ``eta`` bounds the absolute error of a rounding
    that underflows (half the smallest subnormal; we keep the whole subnormal so the value
    stays representable in float64 for fp64); ``exp_budget`` is the largest power of two a
    scaled value may reach: one binade below overflow for FP16, 2⁶⁴ for the wide formats,
    where scaling only has to keep values far from both ends of the range.
    """

    name: str
    storage: type
    accumulate: type
    u_store: float
    u_acc: float
    eta: float
    exp_budget: int

    @property
    def max_finite(self) -> float:
        return float(np.finfo(self.storage).max)


def _make(name: str, storage: type, accumulate: type, u_acc: float) -> Precision:
    info = np.finfo(storage)
    return Precision(
        name=name,
        storage=storage,
        accumulate=accumulate,
        u_store=float(info.eps) / 2,
        u_acc=u_acc,
        eta=float(info.smallest_subnormal),
        exp_budget=min(int(math.floor(math.log2(float(info.max)))) - 1, 64),
    )


PRECISIONS: dict[str, Precision] = {
    "fp64": _make("fp64", np.float64, np.float64, 2.0**-53),
    "fp32": _make("fp32", np.float32, np.float32, 2.0**-24),
    # Tensor cores accumulate FP16 products in FP32 but are not guaranteed to round to
    # nearest; 2⁻²³ (one ulp instead of half) covers truncating accumulation as well.
    "fp16": _make("fp16", np.float16, np.float32, 2.0**-23),
}


def get_precision(name: str) -> Precision:
    if name not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {name!r}")
    return PRECISIONS[name]


def gamma(k: int, u: float) -> float:
    """γ_k = k·u / (1 − k·u) (Higham, Accuracy and Stability, Lemma 3.1); inf when k·u ≥ 1."""
    ku = k * u
    return math.inf if ku >= 1.0 else ku / (1.0 - ku)


def step_theta(inner: int, precision: Precision) -> float:
    """Relative componentwise error θ of one GEMM with inner dimension ``inner``.

    Equal storage/accumulation: γ_I(u). FP16: the FP32-accumulated sum is rounded once to
    FP16, ``(1+u_s)(1+γ_I(u_a)) − 1``. Power-of-two scaling adds no rounding.
    """
    theta = gamma(inner, precision.u_acc)
    if precision.u_store > precision.u_acc:
        theta = (1 + precision.u_store) * (1 + theta) - 1
    return theta


def rounding_coefficient(thetas: list[float], input_rounding: float) -> float:
    """c = (1+u_in)^{N+1} · ∏_i (1+θ_i) − 1, written as the sum of the poster's Section 3.

    ``Σ_i θ_i ∏_{j<i}(1+θ_j)`` equals ``∏(1+θ) − 1``; ``input_rounding`` is the unit
    roundoff of converting X and the N matrices to the storage format (0 if exact).
    """
    total, prefix = 0.0, 1.0
    for theta in thetas:
        total += theta * prefix
        prefix *= 1 + theta
    storage = (1 + input_rounding) ** (len(thetas) + 1)
    return storage * (1 + total) - 1


def poster_literal_coefficient(inner_dims: list[int], u: float) -> float:
    """The poster's printed ``Σ_i ∏_{j≤i} γ_{I_j}`` (for comparison; not an upper bound)."""
    total, prefix = 0.0, 1.0
    for inner in inner_dims:
        prefix *= gamma(inner, u)
        total += prefix
    return total


def chain_flops(shape: tuple[int, ...], out_dims: tuple[int, ...], order: tuple[int, ...]) -> int:
    """Multiply-adds of the GEMM chain in ``order``: Σ_k J_k · ∏(current dims)."""
    dims = list(shape)
    flops = 0
    for mode in order:
        flops += out_dims[mode] * int(np.prod(dims, dtype=np.int64))
        dims[mode] = out_dims[mode]
    return flops


def choose_order(
    shape: tuple[int, ...],
    out_dims: tuple[int, ...],
    how: str,
    bound_of_order=None,
) -> tuple[int, ...]:
    """The TTM order: ``given`` (0…N−1), ``ssf`` or ``best``.

    ``ssf`` is the poster's smallest-shared-first heuristic: modes by ``I_n`` ascending
    (ties by fewer flops). ``best`` searches all N! orders (N ≤ 5) for the smallest
    ``bound_of_order(order)``; orders whose bounds agree within 0.1 % (the rounding part is
    order-invariant, see the module docstring, so only the underflow part differs) are
    ranked by flops: a slower order is not worth a bound smaller in the fourth digit.
    """
    n = len(shape)
    if how == "given":
        return tuple(range(n))
    if how == "ssf":
        return tuple(sorted(range(n), key=lambda m: (shape[m], out_dims[m] / shape[m], m)))
    if how == "best":
        if n > 5:
            raise ValueError("the exhaustive order search is limited to order ≤ 5 (120 orders)")
        candidates = []
        for perm in itertools.permutations(range(n)):
            bound = bound_of_order(perm) if bound_of_order is not None else 0.0
            candidates.append((bound, chain_flops(shape, out_dims, perm), perm))
        least = min(c[0] for c in candidates)
        tied = [c for c in candidates if c[0] <= least * (1 + 1e-3)]
        return min(tied, key=lambda c: (c[1], c[2]))[2]
    raise ValueError(f"order must be given, ssf or best, not {how!r}")
