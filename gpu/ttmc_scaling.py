"""Power-of-two scales that keep every FP16 value of a TTMc finite.

Poster "TTMc in low precision on GPUs", Section 2:

* one-sided scaling, per GEMM ``Y_(n) = U_n X_(n)``: ``Ũ_n = R_n U_n``, ``X̃_(n) = X_(n) S_n``,
  ``Y_(n) = R_n⁻¹ Ỹ_(n) S_n⁻¹``, with R_n, S_n from the ∞-norms of the rows of U_n and the
  columns (mode-n fibers) of X_(n);
* Kronecker-product scaling: ``X̃_(1) = D_1 X_(1) (D_N ⊗ … ⊗ D_2)`` once,
  ``Ũ_n = R_n U_n D_n⁻¹``, recovery ``Y = Ỹ ×_1 R_1⁻¹ … ×_N R_N⁻¹`` in one pass.

All scales are powers of two, so scaling and recovery are exact (barring underflow, which
the bound in :mod:`gpu.ttmc` accounts for). Headroom: with ``|X̃| ≤ 2^a`` and every row of
``Ũ_n`` of absolute sum ≤ ``2^{t_n}``, the intermediate after k GEMMs is bounded by
``2^{a + Σ_{j≤k} t_j} ∏(1+θ_j)``; choosing ``a + Σ t ≤ E`` with ``E = ⌊log2 max⌋ − 1``
(14 for FP16) leaves a factor two for rounding, so no partial product reaches 65504.

This module is host-side arithmetic on small vectors (slice maxima, factor matrices); the
passes over the tensor live in :mod:`gpu.ttmc_cpu` and :mod:`gpu.ttmc_cuda`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpu.ttmc_bound import Precision

__all__ = ["ceil_log2", "KroneckerScales", "kronecker_scales", "onesided_split", "row_exponents"]


def ceil_log2(values: np.ndarray) -> np.ndarray:
    """⌈log2 v⌉ exactly for v > 0 (via frexp, no floating-point log); 0 where v == 0."""
    values = np.asarray(values, dtype=np.float64)
    mantissa, exponent = np.frexp(values)
    result = np.where(mantissa == 0.5, exponent - 1, exponent)
    return np.where(values > 0, result, 0).astype(np.int64)


def row_exponents(row_measure: np.ndarray, target: int) -> np.ndarray:
    """Exponents r with ``row_measure · 2^r ≤ 2^target`` (the largest such); 0 for zero rows."""
    return np.where(row_measure > 0, target - ceil_log2(row_measure), 0).astype(np.int64)


@dataclass(frozen=True)
class KroneckerScales:
    """Exponents of D_n (``x_exp[n]``, length I_n) and R_n (``row_exp[n]``, length J_n).

    ``u_scaled[n] = R_n U_n D_n⁻¹`` in float64 (exact), ``row_growth[n]`` the largest row
    absolute sum of it, ``x_bound`` a guaranteed bound on ``max |X̃|``.
    """

    x_exp: list[np.ndarray]
    row_exp: list[np.ndarray]
    u_scaled: list[np.ndarray]
    row_growth: list[float]
    x_bound: float


def _growth_exponents(shape: tuple[int, ...]) -> list[int]:
    # Half the worst-case growth log2(I_n) goes to Ũ_n, half stays with X̃: orthonormal
    # factor rows (row sum ≤ √I_n) then need no scaling and both operands keep binades
    # above the FP16 subnormal range.
    return [int(ceil_log2(np.array([float(i)]))[0]) // 2 for i in shape]


def kronecker_scales(
    maxima: list[np.ndarray], matrices: list[np.ndarray], precision: Precision
) -> KroneckerScales:
    """Choose D_n from the slice maxima ``maxima[n][i] = max |X[…, i, …]|`` (mode n).

    ``d_n[i] = 2^{−⌈log2(m_n[i]) / N⌉}``: since ``|X_{i_1…i_N}| ≤ m_n[i_n]`` for every n,
    ``|X_i| ≤ ∏_n m_n[i_n]^{1/N}`` and so ``|X̃| ≤ 1`` by construction, one pass over X (a
    geometric-mean Ruiz step; exact equilibration when |X| is rank one). A shift ``2^a`` on
    the first mode then places the maximum at the top of the budget, and R_n brings each
    row of ``U_n D_n⁻¹`` to absolute sum ≤ ``2^{t_n}``.
    """
    n_modes = len(maxima)
    shape = tuple(len(m) for m in maxima)
    x_exp = []
    for m in maxima:
        m = np.asarray(m, dtype=np.float64)
        with np.errstate(divide="ignore"):
            e = np.floor(-np.log2(np.where(m > 0, m, 1.0)) / n_modes)
        x_exp.append(e.astype(np.int64))
    growth = _growth_exponents(shape)
    shift = precision.exp_budget - sum(growth)
    x_exp[0] = x_exp[0] + shift
    row_exp, u_scaled, row_growth = [], [], []
    for n, u in enumerate(matrices):
        u_d = np.ldexp(np.asarray(u, dtype=np.float64), -x_exp[n][None, :])
        rows = row_exponents(np.abs(u_d).sum(axis=1), growth[n])
        scaled = np.ldexp(u_d, rows[:, None])
        row_exp.append(rows)
        u_scaled.append(scaled)
        row_growth.append(float(np.abs(scaled).sum(axis=1).max(initial=0.0)))
    return KroneckerScales(x_exp, row_exp, u_scaled, row_growth, float(2.0**shift))


def onesided_split(inner: int, precision: Precision) -> tuple[int, int]:
    """Exponent targets (p, q) for ``|Ũ| ≤ 2^p``, ``|X̃| ≤ 2^q`` with ``I·2^{p+q} ≤ 2^E``.

    Then every FP32-accumulated inner product of length I stays below ``2^E (1+θ)``.
    """
    room = precision.exp_budget - int(ceil_log2(np.array([float(inner)]))[0])
    p = room // 2
    return p, room - p
