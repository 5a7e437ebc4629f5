"""Power-of-two scales that keep every FP16 value of a TTMc finite.

Poster "TTMc in low precision on GPUs", Section 2:

* one-sided scaling, per GEMM ``Y_(n) = U_n X_(n)``: ``Ũ_n = R_n U_n``, ``X̃_(n) = X_(n) S_n``,
  ``Y_(n) = R_n⁻¹ Ỹ_(n) S_n⁻¹``, with R_n, S_n from the ∞-norms of the rows of U_n and the
  columns (mode-n fibers) of X_(n);
* Kronecker-product scaling: ``X̃_(1) = D_1 X_(1) (D_N ⊗ … ⊗ D_2)`` once,
  ``Ũ_n = R_n U_n D_n⁻¹``, recovery ``Y = Ỹ ×_1 R_1⁻¹ … ×_N R_N⁻¹`` in one pass.

All scales are powers of two, so scaling and recovery are exact (barring underflow, which
the bound in :mod:`gpu.compress.ttmc` accounts for). Headroom: with ``|X̃| ≤ 2^a`` and every row of
``Ũ_n`` of absolute sum ≤ ``2^{t_n}``, the intermediate after k GEMMs is bounded by
``2^{a + Σ_{j≤k} t_j} ∏(1+θ_j)``; choosing ``a + Σ t ≤ E`` with ``E = ⌊log2 max⌋ − 1``
(14 for FP16) leaves a factor two for rounding, so no partial product reaches 65504.

D_n come from slice maxima, exact (a stats pass over X, then ``|X̃| ≤ 2^a`` by
construction) or sampled (a stratified sample of a few thousand entries,
:func:`sample_positions`). With sampled maxima the scaling pass measures ``max |X̃|`` as it
writes X̃ and R_n take the budget that is left (:func:`kronecker_u_scales`), so the
headroom rule holds exactly either way while X is read once. Sampled maxima only
underestimate, which makes X̃ larger than planned, so the plan for them sits a few
binades lower (``SAMPLE_MARGIN``); only if they miss a slice's maximum by more than the
binades left above it (2^19 on a 256×256×2048 tensor) does the cast overflow, and the
driver (:mod:`gpu.compress.ttmc`) redoes the pass from exact maxima.

This module is host-side arithmetic on small vectors (slice maxima, factor matrices); the
passes over the tensor live in :mod:`gpu.compress.backend_cpu` and :mod:`gpu.compress.backend_cuda`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpu.compress.bound import Precision

__all__ = [
    "ceil_log2",
    "KroneckerScales",
    "SAMPLE_MARGIN",
    "kronecker_scales",
    "kronecker_u_scales",
    "kronecker_x_exponents",
    "onesided_split",
    "row_exponents",
    "sample_maxima",
    "sample_positions",
]


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


SAMPLE_MARGIN = 4  # binades between a sampled maximum's place in X̃ and X's share of the budget


def kronecker_x_exponents(
    maxima: list[np.ndarray], precision: Precision, margin: int = 0
) -> tuple[list[np.ndarray], int]:
    """Exponents of D_n from slice maxima ``maxima[n][i] ≥ max |X[…, i, …]|`` (mode n).

    ``d_n[i] = 2^{−⌈log2(m_n[i]) / N⌉}``: since ``|X_{i_1…i_N}| ≤ m_n[i_n]`` for every n,
    ``|X_i| ≤ ∏_n m_n[i_n]^{1/N}`` and so ``|X̃| ≤ 1`` (a geometric-mean Ruiz step; exact
    equilibration when |X| is rank one). A shift ``2^a`` on the first mode then places the
    maximum at the top of X's share of the exponent budget, less ``margin`` binades (room
    for what sampled maxima miss). Returns the exponents and ``a``, which bounds
    ``log2 max |X̃|`` when the maxima are exact (not when sampled).
    """
    n_modes = len(maxima)
    shape = tuple(len(m) for m in maxima)
    x_exp = []
    for m in maxima:
        m = np.asarray(m, dtype=np.float64)
        with np.errstate(divide="ignore"):
            e = np.floor(-np.log2(np.where(m > 0, m, 1.0)) / n_modes)
        x_exp.append(e.astype(np.int64))
    shift = precision.exp_budget - sum(_growth_exponents(shape)) - margin
    x_exp[0] = x_exp[0] + shift
    return x_exp, shift


def kronecker_u_scales(
    x_exp: list[np.ndarray], x_max_exp: int, matrices: list[np.ndarray], precision: Precision
) -> KroneckerScales:
    """R_n for D_n = diag(2^{x_exp[n]}) given ``max |X̃| ≤ 2^{x_max_exp}``.

    Each row of ``U_n D_n⁻¹`` is brought to absolute sum ≤ ``2^{t_n}`` with
    ``x_max_exp + Σ t_n ≤ E`` (the module's headroom rule); ``t_n`` starts at half of
    ``log2 I_n`` and, when X̃ takes more than its share, the largest t_n give way first.
    """
    shape = tuple(len(e) for e in x_exp)
    growth = _growth_exponents(shape)
    excess = x_max_exp + sum(growth) - precision.exp_budget
    while excess > 0:
        growth[int(np.argmax(growth))] -= 1
        excess -= 1
    row_exp, u_scaled, row_growth = [], [], []
    for n, u in enumerate(matrices):
        u_d = np.ldexp(np.asarray(u, dtype=np.float64), -np.asarray(x_exp[n])[None, :])
        rows = row_exponents(np.abs(u_d).sum(axis=1), growth[n])
        scaled = np.ldexp(u_d, rows[:, None])
        row_exp.append(rows)
        u_scaled.append(scaled)
        row_growth.append(float(np.abs(scaled).sum(axis=1).max(initial=0.0)))
    return KroneckerScales(list(x_exp), row_exp, u_scaled, row_growth, float(2.0**x_max_exp))


def kronecker_scales(
    maxima: list[np.ndarray], matrices: list[np.ndarray], precision: Precision
) -> KroneckerScales:
    """D_n and R_n from exact slice maxima, with ``|X̃| ≤ 2^a`` by construction."""
    x_exp, shift = kronecker_x_exponents(maxima, precision)
    return kronecker_u_scales(x_exp, shift, matrices, precision)


def sample_positions(shape: tuple[int, ...], per_index: int = 8, seed: int = 0) -> list[np.ndarray]:
    """Index arrays of a stratified sample: every index of every mode ≥ ``per_index`` times.

    ``T = per_index · max I_n`` positions; mode n's indices are ``0…I_n−1`` repeated and
    shuffled independently (fixed seed, so both backends and every call agree).
    """
    rng = np.random.default_rng(seed)
    total = per_index * max(shape)
    return [rng.permutation(np.resize(np.arange(i, dtype=np.int64), total)) for i in shape]


def sample_maxima(values: np.ndarray, positions: list[np.ndarray], shape: tuple[int, ...]) -> list[np.ndarray]:
    """Per-mode slice maxima of ``|values|`` over the sampled positions (non-finite → 0)."""
    v = np.abs(np.asarray(values, dtype=np.float64))
    v = np.where(np.isfinite(v), v, 0.0)
    maxima = []
    for n, idx in enumerate(positions):
        m = np.zeros(shape[n])
        np.maximum.at(m, idx, v)
        maxima.append(m)
    return maxima


def onesided_split(inner: int, precision: Precision) -> tuple[int, int]:
    """Exponent targets (p, q) for ``|Ũ| ≤ 2^p``, ``|X̃| ≤ 2^q`` with ``I·2^{p+q} ≤ 2^E``.

    Then every FP32-accumulated inner product of length I stays below ``2^E (1+θ)``.
    """
    room = precision.exp_budget - int(ceil_log2(np.array([float(inner)]))[0])
    p = room // 2
    return p, room - p
