"""Tensor-times-matrix chain (TTMc) in FP64, FP32 or FP16 with power-of-two scaling.

``Y = X ×_1 U_1 ×_2 U_2 … ×_N U_N`` with ``U_n ∈ R^{J_n × I_n}``, computed as a chain of
mode-n GEMMs ``Y_(n) = U_n X_(n)`` (poster "TTMc in low precision on GPUs", Algorithm 1).
FP16 means FP16 storage with FP32 accumulation. Scaling (poster, Section 2; scales in
:mod:`gpu.compress.scaling`): ``none``, ``onesided`` (row/column scaling around every GEMM) or
``kronecker`` (scale X once, scale each U_n, recover Y in one pass). Ordering: ``given``,
``ssf`` (smallest shared dimension first, poster Section 3) or ``best`` (all orders, least
bound). The report carries the time of every phase, the order, the forward error bound
(:mod:`gpu.compress.bound`) and whether a value overflowed; non-finite results are never
returned: the call raises :class:`TTMcOverflowError` or, on request, recomputes in the next
wider precision.

The underflow part of the bound: a value rounded into the subnormal range errs by at most
``η`` (the smallest subnormal) absolutely. In scaled coordinates step k adds at most
``η (1 + I_k M_{k-1})(1+θ_k)`` per output entry (output rounding, plus the matrix entries
that underflowed times the input bound ``M_{k-1}``), which the inverse scales map back with
Frobenius norm ``η‖T_k⁻¹‖_F``, then the remaining GEMMs amplify by ``∏_{j>k} ‖U_j‖_F (1+θ_j)``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from gpu.cuda.backend import resolve_backend
from gpu.compress.bound import (
    Precision,
    choose_order,
    get_precision,
    poster_literal_coefficient,
    rounding_coefficient,
    step_theta,
)
from gpu.compress.scaling import (
    SAMPLE_MARGIN,
    KroneckerScales,
    ceil_log2,
    kronecker_u_scales,
    kronecker_x_exponents,
    onesided_split,
    row_exponents,
    sample_maxima,
    sample_positions,
)

__all__ = ["SCALINGS", "ORDERS", "TTMcReport", "TTMcResult", "TTMcOverflowError", "ttmc", "make_ops"]

SCALINGS = ("none", "onesided", "kronecker")
ORDERS = ("given", "ssf", "best")
_WIDER = {"fp16": "fp32", "fp32": "fp64"}


@dataclass
class TTMcReport:
    """What a TTMc did: phases and their seconds, order, bound, overflow.

    ``maxima_from``: where the Kronecker scales came from, ``sample`` or ``exact``.
    """

    precision: str
    scaling: str
    order: tuple[int, ...]
    backend: str
    gemm: str
    times: list[tuple[str, float]]
    norm_x: float
    norm_u: tuple[float, ...]
    bound: float
    bound_rounding: float
    bound_underflow: float
    bound_poster_literal: float
    overflow: bool
    nonfinite: int
    maxima_from: str | None = None
    fallback_from: str | None = None
    attempts: list[dict] = field(default_factory=list)

    @property
    def total_time(self) -> float:
        return float(sum(t for _, t in self.times))

    def phase_time(self, prefix: str) -> float:
        return float(sum(t for name, t in self.times if name.startswith(prefix)))

    def as_dict(self) -> dict:
        out = asdict(self)
        out["order"] = list(self.order)
        out["times"] = {name: t for name, t in self.times}
        out["total_time"] = self.total_time
        return out


@dataclass
class TTMcResult:
    """``y`` is Y, or with ``recover=False`` the scaled Ỹ with ``Y = Ỹ ×_n diag(2^{−row_exp[n]})``."""

    y: object
    report: TTMcReport
    row_exp: list[np.ndarray] | None = None


class TTMcOverflowError(ArithmeticError):
    """A TTMc produced a non-finite value; ``report`` says where it ran and with what."""

    def __init__(self, message: str, report: TTMcReport):
        super().__init__(message)
        self.report = report


def make_ops(backend: str = "auto", gemm: str = "auto"):
    """The backend's operations object: ``CpuTTMcOps`` or ``CudaTTMcOps``."""
    resolved = resolve_backend(backend)
    if resolved == "cpu":
        from gpu.compress.backend_cpu import CpuTTMcOps

        return CpuTTMcOps()
    from gpu.compress.backend_cuda import CudaTTMcOps

    return CudaTTMcOps(gemm=gemm)


def ttmc(
    x,
    matrices,
    *,
    precision: str = "fp16",
    scaling: str = "kronecker",
    order: str = "ssf",
    backend: str = "auto",
    gemm: str = "auto",
    on_overflow: str = "raise",
    recover: bool = True,
    maxima: str = "sample",
    ops=None,
) -> TTMcResult:
    """Compute ``Y = X ×_1 U_1 … ×_N U_N`` (poster Algorithm 1) with its error bound.

    ``x``: array of order N (numpy, or a device array with the CUDA backend);
    ``matrices[n]``: host array J_n × I_n. ``on_overflow``: ``raise`` or ``fallback``
    (recompute in the next wider precision). ``recover=False`` (Kronecker only) returns the
    scaled FP16 Ỹ and its row exponents instead of Y (poster: partial reconstruction).
    ``maxima`` (Kronecker): ``sample`` reads X once (scales from a sample, headroom
    measured in the same pass), ``exact`` runs a stats pass first; both guarantee the
    same headroom (:mod:`gpu.compress.scaling`).
    """
    if scaling not in SCALINGS:
        raise ValueError(f"scaling must be one of {', '.join(SCALINGS)}, not {scaling!r}")
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, not {order!r}")
    if maxima not in ("sample", "exact"):
        raise ValueError(f"maxima must be sample or exact, not {maxima!r}")
    if on_overflow not in ("raise", "fallback"):
        raise ValueError(f"on_overflow must be raise or fallback, not {on_overflow!r}")
    if not recover and scaling != "kronecker":
        raise ValueError("recover=False needs kronecker scaling (the other strategies recover as they go)")
    mats = [np.asarray(u) for u in matrices]
    shape = tuple(int(s) for s in x.shape)
    if len(mats) != len(shape):
        raise ValueError(f"a tensor of order {len(shape)} needs {len(shape)} matrices, got {len(mats)}")
    for n, u in enumerate(mats):
        if u.ndim != 2 or u.shape[1] != shape[n]:
            raise ValueError(f"matrix {n} must be J × {shape[n]}, got shape {u.shape}")
    ops = ops if ops is not None else make_ops(backend)
    attempts = []
    current = precision
    while True:
        result = _run(ops, x, mats, get_precision(current), scaling, order, recover, maxima)
        report = result.report
        attempts.append({"precision": current, "overflow": report.overflow, "nonfinite": report.nonfinite})
        if not report.overflow:
            break
        if on_overflow == "fallback" and current in _WIDER:
            current = _WIDER[current]
            continue
        raise TTMcOverflowError(
            f"TTMc in {current} with {scaling} scaling produced {report.nonfinite} non-finite "
            f"values (overflow beyond {get_precision(current).max_finite:g}); use kronecker "
            f"scaling, a wider precision, or on_overflow='fallback'",
            report,
        )
    report.attempts = attempts
    if current != precision:
        report.fallback_from = precision
    return result


def _after(order, norm_u, thetas):
    """``after[k] = ∏_{j≥k} ‖U_{m_j}‖_F (1+θ_{m_j})``: growth of an error made before GEMM k."""
    after = [1.0] * (len(order) + 1)
    for k in range(len(order) - 1, -1, -1):
        m = order[k]
        after[k] = after[k + 1] * norm_u[m] * (1 + thetas[m])
    return after


def _kron_underflow(order, scales: KroneckerScales, shape, norm_u, thetas, prec: Precision) -> float:
    inv_d = [math.sqrt(float(np.sum(np.ldexp(1.0, -2 * e)))) for e in scales.x_exp]
    inv_r = [math.sqrt(float(np.sum(np.ldexp(1.0, -2 * r)))) for r in scales.row_exp]
    after = _after(order, norm_u, thetas)
    term = prec.eta * math.prod(inv_d) * after[0]
    bound_in = scales.x_bound
    done: set[int] = set()
    for k, m in enumerate(order):
        alpha = prec.eta * (1 + shape[m] * bound_in) * (1 + thetas[m])
        bound_in = bound_in * scales.row_growth[m] * (1 + thetas[m])
        done.add(m)
        inv_t = math.prod(inv_r[j] if j in done else inv_d[j] for j in range(len(shape)))
        term += alpha * inv_t * after[k + 1]
    return term


def _kronecker_pass(ops, xd, mats, prec: Precision, maxima_from: str, first: int | None):
    """Choose D_n and read X: returns (array, scales, scan, source of the maxima, fused).

    ``sample``: D_n from a stratified sample and X read once. If the backend fuses the
    first mode product ``first`` (:mod:`gpu.compress.scaled_ttm`), that read is the product
    itself, with R_n planned for the largest ``max |X̃|`` the sample margin allows, which
    are the R_n a fit to any measured value up to it gives (:func:`kronecker_u_scales`);
    then the array is ``X̃ ×_first Ũ_first`` and ``fused`` is True. Otherwise (or if X̃
    came out above that room but within FP16) the pass writes X̃ and R_n are fitted to the
    measured ``max |X̃|`` (:mod:`gpu.compress.scaling`). If the cast overflows (the sample
    missed a slice maximum by more than the spare binades) or ``exact`` was asked for:
    exact maxima from a stats pass and a second scaling pass.
    """
    shape = tuple(int(s) for s in xd.shape)
    storage = prec.storage
    scan = None
    if maxima_from == "sample":
        with ops.phase("sample"):
            positions = sample_positions(shape)
            sampled = sample_maxima(ops.gather(xd, positions), positions, shape)
            x_exp, shift = kronecker_x_exponents(sampled, prec, SAMPLE_MARGIN)
        room = shift + SAMPLE_MARGIN
        fused = None if first is None else ops.fused_ttm_factors(xd, x_exp, first, mats[first].shape[0], prec)
        if fused is not None:
            planned = kronecker_u_scales(x_exp, room, mats, prec)
            with ops.phase(f"scale+ttm{first}"):
                y, handle = ops.scaled_ttm(xd, fused, planned.u_scaled[first], first, prec)
            scan = ops.read_scan(handle)
            if scan[2]:
                return None, None, scan, "sample", False
            measured = _exponent_of(scan[1])
            if scan[3] == 0 and measured <= room:
                return y, kronecker_u_scales(x_exp, measured, mats, prec), scan, "sample", True
        with np.errstate(over="ignore"):  # a maximum that would overflow the cast is the question asked
            castable = scan is None or bool(np.isfinite(np.float64(scan[1]).astype(storage)))
        if castable:
            with ops.phase("scale" if scan is None else "rescale"):
                y, handle = ops.scale_scan(xd, x_exp, storage)
            scan = ops.read_scan(handle)
            if scan[2] == 0 and scan[3] == 0:
                return y, kronecker_u_scales(x_exp, _exponent_of(scan[1]), mats, prec), scan, "sample", False
            if scan[2]:
                return None, None, scan, "sample", False
    with ops.phase("norms"):
        maxima, _, _ = ops.stats(xd)
    x_exp, _ = kronecker_x_exponents(maxima, prec)
    with ops.phase("rescale" if scan is not None else "scale"):
        y, handle = ops.scale_scan(xd, x_exp, storage)
    scan = ops.read_scan(handle)
    return y, kronecker_u_scales(x_exp, _exponent_of(scan[1]), mats, prec), scan, "exact", False


def _exponent_of(top: float) -> int:
    """⌈log2 max |X̃|⌉, the measured headroom exponent (0 for an all-zero tensor)."""
    return int(ceil_log2(np.array([top]))[0])


def _run(ops, x, mats, prec: Precision, scaling: str, how: str, recover: bool, maxima_from: str) -> TTMcResult:
    shape = tuple(int(s) for s in x.shape)
    out_dims = tuple(u.shape[0] for u in mats)
    storage = prec.storage
    out_dtype = np.float64 if prec.name == "fp64" else np.float32
    ops.times = []
    xd = ops.asarray(x)
    source = None
    fused = False
    if scaling == "kronecker":
        # given/ssf orders do not depend on the scales, so the first product can ride on the pass.
        first = None if how == "best" else choose_order(shape, out_dims, how)[0]
        y, scales, scan, source, fused = _kronecker_pass(ops, xd, mats, prec, maxima_from, first)
    else:
        # X is read once: converted to the working format (if it differs) while scanned.
        work = storage if scaling == "none" else (np.float64 if prec.name == "fp64" else np.float32)
        target = None if np.dtype(xd.dtype) == np.dtype(work) else work
        with ops.phase("scale" if target is not None else "norms"):
            y, handle = ops.scale_scan(xd, None, target)
        y = xd if y is None else y
        scan = ops.read_scan(handle)
    sumsq, x_top, nonfinite_in, cast_overflow = scan
    if nonfinite_in:
        raise ValueError(f"the input tensor has {nonfinite_in} non-finite values (NaN or inf); clean them first")
    norm_x = math.sqrt(sumsq)
    # not np.linalg.norm: its BLAS dot wakes OpenBLAS's threads, whose spinning afterwards
    # takes the cores an encode's copies and coders need (docs/decisions/compress-blas-threads.md)
    norm_u = tuple(math.sqrt(float(np.square(u).sum())) for u in mats)
    thetas = [step_theta(i, prec) for i in shape]
    wider_input = [np.dtype(x.dtype).itemsize] + [u.dtype.itemsize for u in mats]
    u_in = prec.u_store if max(wider_input) > np.dtype(storage).itemsize else 0.0
    scale_norms = norm_x * math.prod(norm_u)

    def rounding_of(order):
        return rounding_coefficient([thetas[m] for m in order], u_in) * scale_norms

    if scaling == "onesided":
        order = choose_order(shape, out_dims, how, rounding_of)
        y, underflow, nonfinite = _run_onesided(ops, y, mats, prec, order, norm_u, thetas)
        row_exp = None
    else:
        if scaling == "none":
            scales = KroneckerScales(
                x_exp=[np.zeros(i, np.int64) for i in shape],
                row_exp=[np.zeros(j, np.int64) for j in out_dims],
                u_scaled=[u.astype(np.float64) for u in mats],
                row_growth=[float(np.abs(u).sum(axis=1).max(initial=0.0)) for u in mats],
                x_bound=x_top,
            )

        def bound_of(order):
            return rounding_of(order) + _kron_underflow(order, scales, shape, norm_u, thetas, prec)

        order = choose_order(shape, out_dims, how, bound_of)
        underflow = _kron_underflow(order, scales, shape, norm_u, thetas, prec)
        us = [ops.asarray(u, storage) for u in scales.u_scaled]
        for m in order[1:] if fused else order:
            with ops.phase(f"ttm{m}"):
                y = ops.ttm(y, us[m], m, prec)
        with ops.phase("recover"):
            if recover:
                y, nonfinite = ops.kron_scale(y, [-r for r in scales.row_exp], out_dtype)
            else:
                nonfinite = ops.count_nonfinite(y)
        nonfinite = ops.read_int(nonfinite)
        row_exp = None if recover else scales.row_exp
    rounding = rounding_of(order)
    report = TTMcReport(
        precision=prec.name,
        scaling=scaling,
        order=tuple(int(m) for m in order),
        backend=ops.name,
        gemm=ops.gemm,
        times=ops.finish(),
        norm_x=norm_x,
        norm_u=norm_u,
        bound=rounding + underflow,
        bound_rounding=rounding,
        bound_underflow=underflow,
        bound_poster_literal=poster_literal_coefficient([shape[m] for m in order], prec.u_store)
        * scale_norms,
        overflow=nonfinite > 0 or cast_overflow > 0,
        nonfinite=nonfinite,
        maxima_from=source,
    )
    return TTMcResult(y=y, report=report, row_exp=row_exp)


def _run_onesided(ops, xd, mats, prec: Precision, order, norm_u, thetas):
    """One-sided scaling around every GEMM; ``xd`` and the intermediates are FP32 (FP64 for fp64)."""
    wide = np.float64 if prec.name == "fp64" else np.float32
    wide_eta = float(np.finfo(wide).smallest_subnormal) / 2
    after = _after(order, norm_u, thetas)
    z = xd
    underflow = 0.0
    inv_norms = []
    for k, m in enumerate(order):
        u = mats[m].astype(np.float64)
        p_exp, q_exp = onesided_split(u.shape[1], prec)
        with ops.phase(f"scale{m}"):
            xs, s, inv_s = ops.fiber_scale(z, m, q_exp, prec.storage)
            rows = row_exponents(np.abs(u).max(axis=1), p_exp)
            ut = ops.asarray(np.ldexp(u, rows[:, None]), prec.storage)
        with ops.phase(f"ttm{m}"):
            yt = ops.ttm(xs, ut, m, prec)
        with ops.phase(f"recover{m}"):
            z = ops.fiber_unscale(yt, m, rows, s, wide)
        inv_norms.append((k, m, rows, q_exp, inv_s, math.prod(z.shape)))
    with ops.phase("check"):
        nonfinite = ops.read_int(ops.count_nonfinite(z))
    # ‖S⁻¹‖_F of every step is read back only now, so the GEMMs run without a host sync.
    for k, m, rows, q_exp, inv_s, size in inv_norms:
        inv_s = ops.read_norm(inv_s)
        inv_r = math.sqrt(float(np.sum(np.ldexp(1.0, -2 * rows))))
        alpha = prec.eta * (1 + mats[m].shape[1] * 2.0**q_exp) * (1 + thetas[m])
        underflow += prec.eta * inv_s * after[k]
        underflow += (alpha * inv_r * inv_s + wide_eta * math.sqrt(size)) * after[k + 1]
    return z, underflow, nonfinite
