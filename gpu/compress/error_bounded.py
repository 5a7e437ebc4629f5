"""Error-bounded Tucker coding: a truncated Tucker decomposition as the predictor, its core
and factors quantised and entropy-coded, and the reconstruction's error quantised and coded
in the SZ style, all against one error budget. Every stream is coded by chunked rANS
(:mod:`gpu.compress.chunked_rans`: independent chunks, so the residual is coded and decoded
on the GPU on the CUDA backend); version-2 archives' range-coded streams
(:mod:`gpu.compress.entropy_coding`) are still decoded.

The volume is coded as ``X̂ = Q(G) ×_n Q(U_n)`` plus ``Δ · q`` with
``q = ⌊(X − X̂)/Δ + ½⌋`` (:mod:`gpu.compress.quantize`), so the decoded volume is
``X̂ + Δq`` cast to the output type, and its error is the residual quantiser's alone: at
most ``Δ/2`` per entry (``--abs``), or a Frobenius norm the encoder measures while it picks
``Δ`` (``--tol``, ``--psnr``). The Tucker part (ST-HOSVD, :func:`gpu.compress.hosvd.st_hosvd`,
core by the FP16 TTMc) only has to predict well: the coarser it is coded, the more the
residual costs. The split of the budget between truncation (the ranks), the quantisation
of the core (step ``c``) and the residual is chosen by measuring the coded size (order-0
entropy of every stream) on a sub-grid of the volume for a few truncation levels and core
steps, then the whole volume is coded with the best; where the Tucker part alone meets the
target there is no residual. Order-0 coding of the residual, not a Lorenzo predictor on it,
and a uniform quantiser with entropy coding for the core rest on measurements
(docs/decisions/compress-residual-coding.md). Ballester-Ripoll, Lindstrom & Pajarola,
TTHRESH (IEEE TVCG 2019) code the core to an error budget as here; Di & Cappello (IPDPS 2016)
and Liang et al. (SZ3, ICDE 2021) the prediction residual.

Errors: relative Frobenius ``‖X − Y‖_F/‖X‖_F``, absolute maximum ``max |X − Y|`` and
``PSNR = 20 log10((max X − min X)/RMSE)`` (SZ's definition), all on the decoded values ``Y``
as the decoder returns them (cast to the output type).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from gpu.compress import chunked_rans, entropy_coding
from gpu.compress.hosvd import array_module, mode_products, namespace_of, recover_core, st_hosvd, to_host
from gpu.compress.quantize import dequantize, quantize, quantize_histogram
from gpu.compress.step_error import step_error, step_errors

__all__ = ["ErrorTarget", "EncodedTensor", "encode_tensor", "decode_tensor", "error_metrics", "cast_output",
           "TARGET_MODES", "CODERS"]

TARGET_MODES = ("tol", "abs", "psnr")
#: share of a Frobenius budget the encoder aims at (the rest absorbs the search's sampling)
AIM = 0.98
#: factor entries (orthonormal columns, |u| ≤ 1) are quantised on one of these grids
FACTOR_STEPS = (2.0**-11, 2.0**-9, 2.0**-13)
#: truncation levels tried, as multiples of the residual quantiser's own relative error
_TRUNCATIONS = (0.3, 0.5, 0.8, 1.2, 1.8, 2.7, 4.0, 6.0, 9.0, 14.0)
#: core steps tried, relative to the step whose error equals the residual quantiser's
_CORE_STEPS = (0.25, 0.5, 1.0, 2.0, 4.0)
_SAMPLE = 1 << 19
#: calls of the error at most in one step search (:func:`_largest_fitting_step`)
_SEARCH_CALLS = 40
#: -log(error/budget) taken for an error of 0
_LOG_FLOOR = 50.0
#: how far past the budget a one-sided step aims, as a multiple of the line's move
_OVERSHOOT = 1.6


@dataclass(frozen=True)
class ErrorTarget:
    """One error target: ``tol`` (relative Frobenius), ``abs`` (max absolute) or ``psnr`` (dB)."""

    mode: str
    value: float

    def __post_init__(self):
        if self.mode not in TARGET_MODES:
            raise ValueError(f"error target mode must be one of {TARGET_MODES}, got {self.mode!r}")
        if not (math.isfinite(self.value) and self.value > 0):
            raise ValueError(f"error target must be a positive finite number, got {self.value}")


#: streams of fewer codes are coded and decoded on the host on the CUDA backend too: their
#: few chunks would run on as few GPU threads, each slower than a host core
DEVICE_CODES = 1 << 16
#: the integer coders by name: chunked rANS (written, archive version 3) and the range coder
#: of version-2 archives (read)
CODERS = {"rans": chunked_rans, "range": entropy_coding}


@dataclass
class EncodedTensor:
    """The coded streams and their steps; ``residual_step`` 0 means no residual; ``coder``
    names the integer coder of the streams (:data:`CODERS`)."""

    shape: tuple[int, ...]
    ranks: tuple[int, ...]
    core_step: float
    core_stream: bytes
    factor_step: float
    factor_streams: list[bytes]
    residual_step: float
    residual_stream: bytes
    report: dict = field(default_factory=dict)
    coder: str = "rans"

    @property
    def nbytes(self) -> int:
        return len(self.core_stream) + sum(map(len, self.factor_streams)) + len(self.residual_stream)


def cast_output(y, dtype):
    """The decoded values in ``dtype``: integers rounded and clipped to the type's range
    (host or device arrays, where they are)."""
    xp = namespace_of(y)
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return xp.clip(xp.rint(y), info.min, info.max).astype(dtype)
    return y.astype(dtype)


def error_metrics(x, y) -> dict:
    """``relative_error``, ``max_error`` and ``psnr`` (dB) of ``y`` against ``x`` (float64;
    host or device arrays, where they are)."""
    xp = namespace_of(x)
    x64 = x.astype(xp.float64) if xp is not np else np.asarray(x, dtype=np.float64)
    diff = xp.asarray(y).astype(xp.float64) - x64
    norm_x = float(xp.linalg.norm(x64))
    err = float(xp.linalg.norm(diff))
    rmse = err / math.sqrt(max(x64.size, 1))
    value_range = float(x64.max() - x64.min()) if x64.size else 0.0
    psnr = math.inf if rmse == 0 else (20 * math.log10(value_range / rmse) if value_range > 0 else -math.inf)
    return {"relative_error": err / norm_x if norm_x else (0.0 if err == 0 else math.inf),
            "max_error": float(xp.abs(diff).max()) if diff.size else 0.0, "psnr": psnr}


def _entropy_bytes(codes) -> float:
    """Order-0 entropy of int32 ``codes`` (the quantiser's) in bytes (+16), from the rANS
    coder's clipped histogram (:func:`chunked_rans.clipped_histogram`), where the codes are (a
    short stream's on the host, :data:`DEVICE_CODES`): exact within its bins, and each code
    beyond them taken as a value of its own (log2 n bits). Such codes lie far in a core's
    tail, where they rarely repeat; a histogram over their whole range took most of the budget
    search (docs/decisions/compress-search-entropy.md)."""
    if codes.size == 0:
        return 0.0
    if codes.size < DEVICE_CODES:
        codes = to_host(codes)
    return _histogram_bytes(chunked_rans.clipped_histogram(codes, _where(codes)), codes.size)


def _histogram_bytes(hist: np.ndarray, n: int) -> float:
    """:func:`_entropy_bytes` of ``n`` codes from their clipped histogram."""
    if n == 0:
        return 0.0
    inner = hist[1:-1]
    inner = inner[inner > 0]  # most of the bins are empty: their logs cost most of a call
    bits = -(inner * np.log2(inner / n)).sum() + int(hist[0] + hist[-1]) * math.log2(n)
    return float(bits / 8) + 16


def _quantized_bytes(values, step: float, reference=None, keep_codes: bool = True):
    """The codes of ``values`` (None unless ``keep_codes``) and their :func:`_entropy_bytes`,
    counted in the quantiser's pass where the values are on the device."""
    codes, hist = quantize_histogram(values, step, reference, backend=_where(values), keep_codes=keep_codes)
    return codes, _histogram_bytes(hist, values.size)


def _abs_allowance(target: float, dtype: np.dtype, max_abs: float) -> float:
    """The largest error before the cast that keeps ``max |X − Y| ≤ target`` after it."""
    if np.issubdtype(dtype, np.integer):
        # integer X: an error below k + ½ rounds to at most k
        return (math.floor(target) + 0.5) * (1 - 1e-9)
    if dtype.itemsize < 8:
        # the cast rounds by half an ulp, and a different BLAS by a few float64 ulps
        allowance = target - 2 * float(np.spacing(np.asarray(max_abs + target, dtype=dtype)))
    else:
        allowance = target * (1 - 1e-9)
    if allowance <= 0:
        raise ValueError(f"abs target {target:g} is below the resolution of {dtype.name} at values up to "
                         f"{max_abs:g}; give a larger --abs")
    return allowance


def _mode_tails(core) -> list[np.ndarray]:
    """Per mode, the energy (sum of squares) the core loses when cut to each rank 0…I_n
    (its slices from that rank on; on the host)."""
    xp = namespace_of(core)
    squares = xp.ascontiguousarray(core * core)
    tails = []
    for n, size in enumerate(core.shape):
        # sums over the modes before n, then after it, as two matrix-vector products: a sum
        # over several axes at once leaves most of a GPU idle when few sums remain
        before, after = math.prod(core.shape[:n]), math.prod(core.shape[n + 1:])
        rows = squares.reshape(before, size * after)
        rows = rows[0] if before == 1 else xp.ones(before) @ rows  # (numpy's product with one row is slow)
        energy = to_host(rows if after == 1 else rows.reshape(size, after) @ xp.ones(after))
        tails.append(np.concatenate([np.cumsum(energy[::-1])[::-1], [0.0]]))
    return tails


def _sub_ranks(tails: list[np.ndarray], threshold: float, cap: tuple[int, ...]) -> tuple[int, ...]:
    """Per mode, the fewest leading slices of the core whose discarded energy ≤ threshold
    (``tails``: :func:`_mode_tails` of the core)."""
    return tuple(int(min(limit, max(1, np.argmax(tail <= threshold)))) for tail, limit in zip(tails, cap))


def _sample_grid(shape, rng) -> list[np.ndarray]:
    """Sorted index subsets per mode whose grid holds about ``_SAMPLE`` entries."""
    n = math.prod(shape)
    if n <= _SAMPLE:
        return [np.arange(s) for s in shape]
    fraction = (_SAMPLE / n) ** (1 / len(shape))
    return [np.sort(rng.choice(s, max(2, int(round(s * fraction))), replace=False)) for s in shape]


def _largest_fitting_step(error, budget: float, start: float, ratio: float, lowest: float,
                          highest: float) -> float | None:
    """The largest step ``s`` in [``lowest``, ``highest``], to within a factor ``ratio``,
    whose ``error(s) ≤ budget``, for an error that grows with the step, about as a power of
    it (uniform quantisation: RMS error ≈ step/√12), starting at ``start``; None where even
    ``lowest`` does not fit.

    In log step and log error the power law is a line: from ``start`` the search extends
    the line through its last two steps (error ∝ step from the first) a little past the
    budget until a step fits and one does not, then narrows that bracket by Brent's method
    (Brent 1973, ch. 4: inverse quadratic interpolation, bisection where it stalls). A
    handful of calls of ``error``, where halving the bracket takes a dozen.
    """
    def step_at(u: float) -> float:
        return min(max(math.exp(u), lowest), highest)

    def g(u: float) -> float:  # log of error / budget at the step e^u
        value = error(step_at(u))
        return math.log(value / budget) if value > 0 else -_LOG_FLOOR

    lo, hi = math.log(lowest), math.log(highest)
    u1 = min(max(math.log(start), lo), hi)
    f1 = g(u1)
    u0 = f0 = None
    calls = 1
    while (f1 <= 0 and u1 < hi) or (f1 > 0 and u1 > lo):  # one side only: extend the line
        if calls == _SEARCH_CALLS:
            return step_at(u1) if f1 <= 0 else None
        slope = (f1 - f0) / (u1 - u0) if u0 is not None and u1 != u0 and f1 != f0 else 1.0
        # a little past where the line meets the budget, so that the next step crosses it
        move = -f1 / slope * _OVERSHOOT if slope > 0 else math.copysign(math.log(2.0), -f1)
        move = math.copysign(min(max(abs(move), math.log(1.01)), math.log(4.0)), -f1)
        u = min(max(u1 + move, lo), hi)
        f = g(u)
        calls += 1
        if (f <= 0) != (f1 <= 0):
            return step_at(_brent(g, u1, f1, u, f, math.log(ratio), _SEARCH_CALLS - calls))
        u0, f0, u1, f1 = u1, f1, u, f
    return step_at(u1) if f1 <= 0 else None


def _brent(g, a: float, fa: float, b: float, fb: float, tol: float, calls: int) -> float:
    """The end with ``g ≤ 0`` of a bracket [a, b] of a root of ``g`` (``fa``, ``fb`` of
    opposite signs, ``g ≤ 0`` fits) narrowed to ``tol`` by Brent's method, with at most
    ``calls`` calls of ``g``."""
    c, fc = a, fa
    d = e = b - a
    for _ in range(max(calls, 0)):
        if (fb > 0) == (fc > 0):
            c, fc = a, fa
            d = e = b - a
        if abs(fc) < abs(fb):
            a, b, c, fa, fb, fc = b, c, b, fb, fc, fb
        half, middle = 0.5 * tol, 0.5 * (c - b)
        if abs(middle) <= half or fb == 0:
            break
        if abs(e) >= half and abs(fa) > abs(fb):
            s = fb / fa
            if a == c:  # the secant
                p, q = 2.0 * middle * s, 1.0 - s
            else:  # inverse quadratic interpolation
                q, r = fa / fc, fb / fc
                p = s * (2.0 * middle * q * (q - r) - (b - a) * (r - 1.0))
                q = (q - 1.0) * (r - 1.0) * (s - 1.0)
            q = -q if p > 0 else q
            p = abs(p)
            if 2.0 * p < min(3.0 * middle * q - abs(half * q), abs(e * q)):
                e, d = d, p / q
            else:
                d = e = middle
        else:
            d = e = middle
        a, fa = b, fb
        b += d if abs(d) > half else math.copysign(half, middle)
        fb = g(b)
    return b if fb <= 0 else c


def _where(a) -> str:
    """The backend of the passes over ``a``: ``cuda`` for a CuPy array, else ``cpu``."""
    return "cpu" if namespace_of(a) is np else "cuda"


def _largest_step(x, prediction, budget: float, start: float) -> float | None:
    """The largest residual step whose quantisation error ``‖R − Δq‖_F ≤ budget`` (R = x −
    prediction, no output cast), None when ``‖R‖_F`` already is (no residual needed)."""
    where = _where(x)
    # ‖R‖_F and the error at the search's first step (start, through log and exp) in one
    # pass: a pass a call costs a launch and a wait for its copy back
    first_step = math.exp(math.log(start))
    (norm, _), (first_error, _) = step_errors(x, prediction, [0.0, first_step], np.float64, where)
    if norm <= budget:
        return None

    def error(step):
        return first_error if step == first_step else step_error(x, prediction, step, np.float64, where)[0]

    return _largest_fitting_step(error, budget, start, 1.002, start * 2.0**-40, start * 1e6)


class _SampledFactors:
    """The factor matrices quantised on each grid of :data:`FACTOR_STEPS` (on the host, as
    the encoder codes them), and per (mode, rank, step) the coded bytes of their leading
    columns and those columns' rows on the sample grid, dequantised where the search
    computes (``xp``): kept for the next candidates, which share most of them."""

    def __init__(self, factors, grid: list[np.ndarray], xp):
        self._factors, self._grid, self._xp = [to_host(u) for u in factors], grid, xp
        self._codes: dict = {}
        self._bytes: dict = {}
        self._rows: dict = {}
        self._sampled: dict = {}

    def _codes_at(self, n: int, step: float) -> np.ndarray:
        if (n, step) not in self._codes:
            self._codes[n, step] = quantize(self._factors[n], step)
        return self._codes[n, step]

    def nbytes(self, n: int, rank: int, step: float) -> float:
        if (n, rank, step) not in self._bytes:
            self._bytes[n, rank, step] = _entropy_bytes(np.ascontiguousarray(self._codes_at(n, step)[:, :rank]))
        return self._bytes[n, rank, step]

    def sampled(self, n: int, rank: int, step: float):
        if (n, rank, step) not in self._sampled:
            if (n, step) not in self._rows:  # sent once a (mode, step): an upload waits, a copy there does not
                self._rows[n, step] = self._xp.asarray(dequantize(self._codes_at(n, step)[self._grid[n]], step))
            self._sampled[n, rank, step] = self._xp.ascontiguousarray(self._rows[n, step][:, :rank])
        return self._sampled[n, rank, step]


def _candidate_size(xs, core, factors: _SampledFactors, ranks, core_step, factor_step, target_kind, budget_s,
                    res_step, scale, bar: float = math.inf):
    """Estimated bytes of one (ranks, core step, factor step) choice, measured on the sample
    grid (``xs`` and ``core`` on the host or both on the device), the residual step it takes,
    and whether it was priced in full; infinite where a code would not fit in 32 bits (the
    coder refuses those). Where the core's and factors' bytes alone exceed ``bar`` (the best
    estimate so far) the residual is not priced: the choice cannot win, and that sum, a lower
    bound, is returned."""
    xp = namespace_of(xs)
    where = _where(xs)
    sub = xp.ascontiguousarray(core[tuple(slice(0, r) for r in ranks)])
    try:
        codes, core_bytes = _quantized_bytes(sub, core_step)
    except ValueError:
        return math.inf, res_step, True
    size = core_bytes + sum(factors.nbytes(n, r, factor_step) for n, r in enumerate(ranks))
    if size > bar:
        return size, res_step, False
    qc = xp.asarray(dequantize(codes, core_step, backend=where))
    xhat = xp.ascontiguousarray(mode_products(qc, [factors.sampled(n, r, factor_step) for n, r in enumerate(ranks)]))
    if target_kind == "l2":
        res_step = _largest_step(xs, xhat, budget_s, res_step)
        if res_step is None:
            return size, None, True
    try:
        residual_bytes = _quantized_bytes(xs, res_step, xhat, keep_codes=False)[1]
    except ValueError:
        return math.inf, res_step, True
    return size + residual_bytes * scale, res_step, True


def encode_tensor(
    x: np.ndarray,
    target: ErrorTarget,
    *,
    output_dtype=np.float64,
    ranks: tuple[int, ...] | None = None,
    precision: str = "fp16",
    scaling: str = "kronecker",
    order: str = "ssf",
    hooi_sweeps: int = 0,
    backend: str = "cpu",
    on_overflow: str = "fallback",
    progress=lambda fraction: None,
) -> EncodedTensor:
    """Code ``x`` (order 3–5) so that the decoded volume meets ``target``.

    Parameters
    ----------
    x : (I_1, …, I_N) real array, finite
    target : ErrorTarget
    output_dtype : the type the decoder casts to (the errors are measured after the cast)
    ranks : fixed Tucker ranks (the residual still meets the target), or None to search
    precision, scaling, order, hooi_sweeps, on_overflow : of the core's TTMc (:func:`st_hosvd`)
    backend : ``cpu``, ``cuda`` or ``auto``; on the GPU the volume is uploaded once and the
        search, reconstruction, residual and error measurements stay on the device

    Returns
    -------
    EncodedTensor
        Its ``report`` holds the measured ``relative_error``, ``max_error``, ``psnr``, the
        Tucker ranks, the budget's split and the TTMc bound (relative to ‖X‖_F).
    """
    times: dict[str, float] = {}
    start = time.perf_counter()
    output_dtype = np.dtype(output_dtype)
    xp = array_module(backend)
    x_in = _to_device(x) if xp is not np else np.asarray(x)
    x64 = x_in.astype(xp.float64)
    n = x64.size
    norm_x = float(xp.linalg.norm(x64))
    value_range = float(x64.max() - x64.min())
    max_abs = float(xp.abs(x64).max())
    if target.mode == "abs":
        kind, allowance = "abs", _abs_allowance(target.value, output_dtype, max_abs)
        budget = None
        unit = 2 * allowance  # the residual step
        relative_unit = allowance / math.sqrt(3) * math.sqrt(n) / norm_x if norm_x else 1.0
    else:
        if target.mode == "psnr":
            if value_range == 0:
                raise ValueError("PSNR is undefined for a constant volume; give --abs or --tol instead")
            budget = value_range / 10 ** (target.value / 20) * math.sqrt(n)
        else:
            if not target.value < 1:
                raise ValueError(f"tol must lie in (0, 1), got {target.value}")
            budget = target.value * norm_x
        kind = "l2"
        unit = AIM * budget * math.sqrt(12 / n)
        relative_unit = AIM * budget / norm_x if norm_x else 1.0
    if norm_x == 0:
        ranks = tuple(1 for _ in x64.shape)
    tolerances = [min(0.9, relative_unit * t) for t in _TRUNCATIONS]
    decomposition = st_hosvd(x_in, tol=None if ranks else tolerances[0], ranks=ranks, precision=precision,
                             scaling=scaling, order=order, hooi_sweeps=hooi_sweeps, backend=backend,
                             on_overflow=on_overflow, progress=lambda f: progress(0.5 * f))
    times["decomposition"] = time.perf_counter() - start
    core = recover_core(xp.asarray(decomposition.core), decomposition.core_exp)
    factors = decomposition.factors
    max_ranks = decomposition.ranks

    start = time.perf_counter()
    grid = _sample_grid(x64.shape, np.random.default_rng(0))
    xs = xp.ascontiguousarray(x64[xp.ix_(*[xp.asarray(g) for g in grid])])
    scale = n / xs.size
    budget_s = None if budget is None else AIM * budget / math.sqrt(scale)
    sampled_factors = _SampledFactors(factors, grid, xp)
    tails = _mode_tails(core)
    choices = {}
    # truncations below the decomposition's keep the same ranks: priced once
    priced = {}

    def sub_and_step(t_index, c_step) -> tuple:
        if ranks:
            sub = tuple(max_ranks)
        else:
            threshold = tolerances[t_index] ** 2 * norm_x**2 / len(max_ranks)
            sub = _sub_ranks(tails, threshold, max_ranks)
        return sub, c_step * unit * math.sqrt(n / math.prod(sub)) / math.sqrt(12)

    def price(t_index, c_step, f_step=FACTOR_STEPS[0]) -> tuple:
        sub, core_step = sub_and_step(t_index, c_step)
        if (sub, core_step, f_step) not in priced:
            # a choice priced only in part was above the bar then, so is above it now
            bar = min((size for size, *_ in priced.values()), default=math.inf)
            priced[sub, core_step, f_step] = _candidate_size(xs, core, sampled_factors, sub, core_step, f_step, kind,
                                                             budget_s, unit, scale, bar)
        size, res_step, in_full = priced[sub, core_step, f_step]
        return size, res_step, sub, core_step, in_full

    # choices left unpriced (finer than one whose core and factors alone exceeded the best
    # estimate), with that lower bound of their bytes
    unpriced = {}

    def size_of(t_index, c_step, f_step=FACTOR_STEPS[0]):
        key = (t_index, c_step, f_step)
        if key in unpriced:
            return unpriced[key]
        if key not in choices:
            choices[key] = price(t_index, c_step, f_step)
        return choices[key][0]

    def price_coarsest_first(keys) -> None:
        """Price the choices ``keys`` ((t, c, f), coarsest first) until one's core and factors
        alone exceed the bar; the finer ones' would too (a larger core, or the same quantised
        more finely: more bytes), so those not priced yet go unpriced, with that lower bound."""
        for k, key in enumerate(keys):
            size, _, _, _, in_full = price(*key)
            if not in_full:
                unpriced.update({finer: size for finer in keys[k + 1:]
                                 if (*sub_and_step(*finer[:2]), finer[2]) not in priced})
                return

    t_indices = [0] if ranks else list(range(len(tolerances)))
    # the coarsest truncations, then core steps, priced first: their small cores set a bar
    # that finer ones' cores alone often exceed; the choices (and their ties) then go in
    # their usual order
    price_coarsest_first([(t, 1.0, FACTOR_STEPS[0]) for t in reversed(t_indices)])
    best_t = min(t_indices, key=lambda t: size_of(t, 1.0))
    price_coarsest_first([(best_t, c, FACTOR_STEPS[0]) for c in sorted(_CORE_STEPS, reverse=True)])
    best_c = min(_CORE_STEPS, key=lambda c: size_of(best_t, c))
    best_f = min(FACTOR_STEPS, key=lambda f: size_of(best_t, best_c, f))
    for t in (best_t - 1, best_t + 1):
        if t in t_indices:
            size_of(t, best_c, best_f)
    (_, _, factor_step), (estimate, sample_step, sub, core_step, _) = min(choices.items(), key=lambda item: item[1][0])
    times["search"] = time.perf_counter() - start
    progress(0.7)

    start = time.perf_counter()
    # the kept core stays where the volume is: quantised, reconstructed and coded there
    kept = xp.ascontiguousarray(core[tuple(slice(0, r) for r in sub)])
    factor_codes = [quantize(u[:, :r], factor_step) for u, r in zip(factors, sub)]
    if kind == "l2" and sample_step is None:  # the sample needs no residual: nor, likely, the volume
        core_step = _coarsest_core_step(x64, kept, core_step, factor_codes, factor_step, budget, output_dtype)
    core_codes = quantize(kept, core_step, backend=_where(kept))
    xhat = _reconstruct(core_codes, core_step, factor_codes, factor_step, xp)
    unstepped = None  # the decoded volume's errors without a residual, for this reconstruction
    if kind == "l2" and sample_step is not None:
        unstepped = step_error(x64, xhat, 0.0, output_dtype, _where(x64))
        if unstepped[0] <= AIM * budget:
            # the volume needs none after all: coarsen the core until its error nears the target
            core_step = _coarsest_core_step(x64, kept, core_step, factor_codes, factor_step, budget, output_dtype)
            core_codes = quantize(kept, core_step, backend=_where(kept))
            xhat = _reconstruct(core_codes, core_step, factor_codes, factor_step, xp)
            unstepped = None
    residual_step, residual_codes, (error, max_error) = _code_residual(x64, xhat, kind, budget, unit, target,
                                                                       output_dtype, backend, unstepped)
    times["residual"] = time.perf_counter() - start
    progress(0.85)
    start = time.perf_counter()
    # the residual first: its side streams, the largest, are compressed while the rest is coded
    streams = chunked_rans.encode_streams([_coded_where(c) for c in
                                           ([residual_codes] if residual_step else []) + [core_codes, *factor_codes]])
    residual_stream = streams.pop(0) if residual_step else b""
    core_stream, *factor_streams = streams
    encoded = EncodedTensor(
        shape=tuple(x64.shape), ranks=tuple(sub), core_step=core_step, core_stream=core_stream,
        factor_step=factor_step, factor_streams=factor_streams, residual_step=residual_step or 0.0,
        residual_stream=residual_stream)
    times["entropy_coding"] = time.perf_counter() - start
    rmse = error / math.sqrt(max(n, 1))
    psnr = math.inf if rmse == 0 else (20 * math.log10(value_range / rmse) if value_range > 0 else -math.inf)
    metrics = {"relative_error": error / norm_x if norm_x else (0.0 if error == 0 else math.inf),
               "max_error": max_error, "psnr": psnr}
    encoded.report = {
        **metrics,
        "target": {"mode": target.mode, "value": target.value},
        "ranks": list(sub),
        "decomposition_ranks": list(max_ranks),
        "truncation_error": float(math.sqrt(max(norm_x**2 - float((kept * kept).sum()),
                                                0.0)) / norm_x) if norm_x else 0.0,
        "core_step": core_step,
        "factor_step": factor_step,
        "residual_step": residual_step or 0.0,
        "bytes": {"core": len(encoded.core_stream), "factors": sum(map(len, encoded.factor_streams)),
                  "residual": len(encoded.residual_stream)},
        "estimated_bytes": estimate,
        "bound": decomposition.bound,
        "core_precision": decomposition.core_precision,
        "ttmc": decomposition.ttmc_report.as_dict(),
        "times": {**decomposition.times, **times},
    }
    progress(1.0)
    return encoded


def _reconstruct(core_codes, core_step, factor_codes, factor_step, xp):
    """``Q(G) ×_n Q(U_n)`` in float64 exactly as the decoder computes it (where ``xp`` computes:
    numpy on the host, CuPy on the device)."""
    # C order: the residual's kernels take flat views
    return xp.ascontiguousarray(mode_products(xp.asarray(core_codes, dtype=xp.float64) * core_step,
                                              [xp.asarray(q, dtype=xp.float64) * factor_step for q in factor_codes]))


def _coarsest_core_step(x64, core, core_step, factor_codes, factor_step, budget, output_dtype) -> float:
    """Where the Tucker part alone meets a Frobenius budget, the coarsest core step that still
    does (so the error lands near the target, not far below it); else ``core_step``."""
    if budget is None:
        return core_step
    xp = namespace_of(x64)

    def error(step):
        xhat = _reconstruct(quantize(core, step, backend=_where(core)), step, factor_codes, factor_step, xp)
        return step_error(x64, xhat, 0.0, output_dtype, _where(x64))[0]

    return _largest_fitting_step(error, AIM * budget, core_step, 1.003, core_step, 2**30 * core_step) or core_step


def _code_residual(x64, xhat, kind, budget, unit, target, output_dtype, backend, unstepped=None):
    """The residual step (None: no residual), its codes, and the decoded volume's
    ``(‖Y − X‖_F, max |Y − X|)``, computed where ``x64`` and ``xhat`` are (host or device);
    ``unstepped``: those errors without a residual, where the caller measured them."""
    xp = namespace_of(x64)
    # each step's errors measured once (a pass over the volume each): the step found was
    # measured by the search, and the errors without a residual may have been by the caller
    known = {} if unstepped is None else {0.0: unstepped}

    def measure(*steps):
        new = [step for step in steps if step not in known]
        if new:
            known.update(zip(new, step_errors(x64, xhat, new, output_dtype, _where(x64))))

    def errors(step):  # (Frobenius, max) of the decoded volume, without forming it
        measure(step)
        return known[step]

    def coded(step):
        return xp.asarray(quantize(x64, step, xhat, backend=backend))

    if kind == "abs":
        step = unit
        for _ in range(60):
            measured = errors(step)
            if measured[1] <= target.value:
                return step, coded(step), measured
            step *= 0.97
        raise RuntimeError(f"could not meet abs target {target.value:g}")
    if 0.0 not in known:
        measure(0.0, math.exp(math.log(unit)))  # with the search's first step, in the same pass
    measured = errors(0.0)
    if measured[0] <= budget:
        return None, None, measured

    # the quantiser's own RMS error, step/√12 an entry, puts ``unit`` near the answer
    step = _largest_fitting_step(lambda s: errors(s)[0], budget, unit, 1.002, unit * 1e-12, unit * 1e3)
    if step is None:
        raise RuntimeError(f"could not meet the {target.mode} target {target.value:g}")
    return step, coded(step), errors(step)


def _coded_where(codes) -> tuple:
    """``(codes, backend)``: a stream of codes is coded where it is (numpy on the host, a
    device array on the GPU; a short one on the host wherever it is)."""
    on_device = not isinstance(codes, np.ndarray) and codes.size >= DEVICE_CODES
    return (codes, "cuda") if on_device else (to_host(codes), "cpu")


def decode_tensor(encoded: EncodedTensor, output_dtype=np.float64, backend: str = "cpu") -> np.ndarray:
    """The decoded volume ``cast(Q(G) ×_n Q(U_n) + Δq)`` in ``output_dtype``, on the host (on
    the CUDA backend the streams are decoded and the volume computed on the device, then
    copied back once)."""
    if encoded.coder not in CODERS:
        raise ValueError(f"unknown integer coder {encoded.coder!r}")
    xp = array_module(backend)

    def codes_of(stream: bytes, size: int, what: str):
        if encoded.coder == "rans":
            on_device = xp is not np and size >= DEVICE_CODES
            codes = chunked_rans.decode_integers(stream, backend=backend if on_device else "cpu")
            codes = xp.asarray(codes) if xp is not np else to_host(codes)
        else:
            codes = xp.asarray(entropy_coding.decode_integers(stream))
        if codes.size != size:
            raise ValueError(f"{what} stream holds {codes.size} values, {size} needed")
        return codes

    core_codes = codes_of(encoded.core_stream, math.prod(encoded.ranks), f"core (ranks {encoded.ranks})")
    factor_codes = [codes_of(stream, i * r, f"factor {n} ({i}×{r})").reshape(i, r)
                    for n, (stream, i, r) in enumerate(zip(encoded.factor_streams, encoded.shape, encoded.ranks))]
    xhat = _reconstruct(core_codes.reshape(encoded.ranks), encoded.core_step, factor_codes, encoded.factor_step, xp)
    if encoded.residual_step:
        codes = codes_of(encoded.residual_stream, xhat.size, "residual").reshape(xhat.shape)
        xhat = xp.asarray(dequantize(codes.astype(xp.int32, copy=False), encoded.residual_step, xhat,
                                     backend=backend))
    y = cast_output(xhat, output_dtype)
    if xp is np:
        return y
    from gpu.compress.staged_copy import copy_to_host

    return copy_to_host(xp.ascontiguousarray(y))


def _to_device(x):
    """``x`` as a CuPy array (a host array uploaded, a device array as it is)."""
    if not isinstance(x, np.ndarray):
        import cupy

        if isinstance(x, cupy.ndarray):
            return x
        x = np.asarray(x)
    from gpu.compress.staged_copy import copy_to_device

    return copy_to_device(x)
