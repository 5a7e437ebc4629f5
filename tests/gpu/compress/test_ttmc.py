"""TTMc (CPU backend) against the float64 reference: bounds, overflow, exact scaling, orders."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from gpu.compress.ttmc import TTMcOverflowError, ttmc
from gpu.compress.bound import (
    PRECISIONS,
    chain_flops,
    choose_order,
    gamma,
    poster_literal_coefficient,
    rounding_coefficient,
    step_theta,
)
from gpu.compress.backend_cpu import CpuTTMcOps
from gpu.compress.scaling import (
    SAMPLE_MARGIN,
    ceil_log2,
    kronecker_scales,
    kronecker_u_scales,
    kronecker_x_exponents,
    onesided_split,
    sample_maxima,
    sample_positions,
)


def reference(x, mats):
    y = np.asarray(x, dtype=np.float64)
    for n, u in enumerate(mats):
        y = np.moveaxis(np.tensordot(np.asarray(u, dtype=np.float64), y, axes=([1], [n])), 0, n)
    return y


def random_case(rng):
    order = int(rng.integers(3, 6))
    shape = tuple(int(s) for s in rng.integers(2, 10 if order < 5 else 6, order))
    ranks = tuple(int(rng.integers(1, s + 1)) for s in shape)
    # Entries over a few decades so the scalings have work to do.
    x = rng.standard_normal(shape) * np.exp(rng.uniform(-2, 2, shape))
    # Rows of norm 0.1..3: unscaled FP16 stays in range, so every strategy must succeed.
    mats = [rng.standard_normal((r, s)) / math.sqrt(s) * 10.0 ** rng.uniform(-1, 0.5) for r, s in zip(ranks, shape)]
    return x, mats


def test_every_precision_scaling_order_within_bound_on_100_random_tensors():
    rng = np.random.default_rng(2026)
    worst = {}
    for case in range(100):
        x, mats = random_case(rng)
        y64 = reference(x, mats)
        how = ("given", "ssf", "best")[case % 3]
        for precision in ("fp64", "fp32", "fp16"):
            for scaling in ("none", "onesided", "kronecker"):
                result = ttmc(x, mats, precision=precision, scaling=scaling, order=how, backend="cpu")
                err = float(np.linalg.norm(result.y - y64))
                report = result.report
                assert np.all(np.isfinite(result.y))
                assert not report.overflow
                assert err <= report.bound, (case, precision, scaling, how, err, report.bound)
                assert sorted(report.order) == list(range(x.ndim))
                key = (precision, scaling)
                worst[key] = max(worst.get(key, 0.0), err / report.bound if report.bound else 0.0)
    # The bound is a worst case: real errors sit well below it, but not absurdly far.
    assert all(0 < w < 1 for w in worst.values()), worst


def adversarial(rng, shape=(18, 14, 12)):
    """Entries spanning 1e-4..1e6 (beyond 65504) and matrices with entries near ±6e4."""
    magnitude = np.exp(rng.uniform(np.log(1e-4), np.log(1e6), shape))
    x = np.where(rng.random(shape) < 0.5, -1.0, 1.0) * magnitude
    mats = [rng.uniform(-6.0e4, 6.0e4, (5, s)) for s in shape]
    return x, mats


def test_adversarial_unscaled_fp16_overflow_is_reported():
    rng = np.random.default_rng(11)
    x, mats = adversarial(rng)
    with pytest.raises(TTMcOverflowError) as info:
        ttmc(x, mats, precision="fp16", scaling="none", backend="cpu")
    report = info.value.report
    assert report.overflow and report.nonfinite > 0
    assert "non-finite" in str(info.value)


def test_adversarial_fallback_recomputes_in_fp32():
    rng = np.random.default_rng(12)
    x, mats = adversarial(rng)
    y64 = reference(x, mats)
    result = ttmc(x, mats, precision="fp16", scaling="none", on_overflow="fallback", backend="cpu")
    assert result.report.precision == "fp32"
    assert result.report.fallback_from == "fp16"
    assert [a["precision"] for a in result.report.attempts] == ["fp16", "fp32"]
    assert np.linalg.norm(result.y - y64) <= result.report.bound


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("scaling", ["kronecker", "onesided"])
def test_adversarial_scaled_fp16_finite_and_within_bound(seed, scaling):
    rng = np.random.default_rng(100 + seed)
    x, mats = adversarial(rng)
    y64 = reference(x, mats)
    result = ttmc(x, mats, precision="fp16", scaling=scaling, order="ssf", backend="cpu")
    assert np.all(np.isfinite(result.y)) and not result.report.overflow
    err = np.linalg.norm(result.y - y64)
    assert err <= result.report.bound
    # Scaled FP16 keeps FP16 accuracy on data FP16 cannot even hold.
    assert err / np.linalg.norm(y64) < 1e-2


def test_kronecker_scaled_values_respect_fp16_headroom():
    rng = np.random.default_rng(13)
    x, mats = adversarial(rng)
    ops = CpuTTMcOps()
    maxima, _, _ = ops.stats(x)
    prec = PRECISIONS["fp16"]
    scales = kronecker_scales(maxima, mats, prec)
    xt, bad = ops.kron_scale(x, scales.x_exp, np.float64)
    assert bad == 0 and np.abs(xt).max() <= scales.x_bound
    bound = scales.x_bound
    for m in range(x.ndim):  # every partial product stays below 2^15 < 65504
        bound *= scales.row_growth[m] * (1 + step_theta(x.shape[m], prec))
        assert bound < 2.0**15
    result = ttmc(x, mats, precision="fp16", scaling="kronecker", recover=False, backend="cpu")
    assert result.y.dtype == np.float16 and np.all(np.isfinite(result.y))
    recovered, _ = ops.kron_scale(result.y, [-r for r in result.row_exp], np.float64)
    full = ttmc(x, mats, precision="fp16", scaling="kronecker", backend="cpu")
    np.testing.assert_array_equal(recovered.astype(np.float32), full.y)


def test_sample_covers_every_index_of_every_mode():
    shape = (7, 300, 2, 41)
    positions = sample_positions(shape, per_index=8)
    for n, idx in enumerate(positions):
        assert idx.shape == (8 * 300,)
        assert np.bincount(idx, minlength=shape[n]).min() >= 8


def test_sampled_scales_keep_the_headroom_where_the_sample_misses_the_maxima():
    """Heavy tails: the sample underestimates slice maxima by ~2^11, X̃ comes out larger
    than planned, and R_n give up the difference so the headroom rule still holds."""
    rng = np.random.default_rng(21)
    x = np.exp(3 * rng.standard_normal((24, 20, 64)))
    mats = [np.linalg.qr(rng.standard_normal((s, 6)))[0].T for s in x.shape]
    prec = PRECISIONS["fp16"]
    ops = CpuTTMcOps()
    positions = sample_positions(x.shape)
    sampled = sample_maxima(ops.gather(x, positions), positions, x.shape)
    x_exp, planned = kronecker_x_exponents(sampled, prec, SAMPLE_MARGIN)
    xt, (sumsq, top, bad_in, bad_out) = ops.scale_scan(x, x_exp, np.float16)
    assert bad_in == bad_out == 0 and sumsq == pytest.approx(np.sum(x * x))
    measured = int(ceil_log2(np.array([top]))[0])
    assert measured > planned + SAMPLE_MARGIN + 2  # the sample missed: X̃ took more than its share
    half_growth = sum(int(ceil_log2(np.array([float(i)]))[0]) // 2 for i in x.shape)
    assert measured + half_growth > prec.exp_budget  # … so R_n must give way
    scales = kronecker_u_scales(x_exp, measured, mats, prec)
    assert np.abs(xt.astype(np.float64)).max() <= scales.x_bound
    bound = scales.x_bound
    for m in range(x.ndim):
        bound *= scales.row_growth[m] * (1 + step_theta(x.shape[m], prec))
        assert bound < 2.0**15
    sampled = ttmc(x, mats, precision="fp16", backend="cpu")
    exact = ttmc(x, mats, precision="fp16", backend="cpu", maxima="exact")
    y64 = reference(x, mats)
    assert sampled.report.maxima_from == "sample" and exact.report.maxima_from == "exact"
    for result in (sampled, exact):
        assert not result.report.overflow
        assert np.linalg.norm(result.y - y64) <= result.report.bound
        assert np.linalg.norm(result.y - y64) / np.linalg.norm(y64) < 2e-3


def test_a_maximum_the_sample_misses_by_more_than_fp16_holds_falls_back_to_exact_maxima():
    rng = np.random.default_rng(22)
    x = rng.standard_normal((6, 5, 40))
    positions = sample_positions(x.shape)
    hit = np.zeros(x.shape, bool)
    hit[tuple(positions)] = True
    spot = tuple(int(i[0]) for i in np.nonzero(~hit))
    x[spot] = 1e30  # no sampled entry shares all three of its slices' magnitudes
    mats = [rng.standard_normal((3, s)) / math.sqrt(s) for s in x.shape]
    result = ttmc(x, mats, precision="fp16", backend="cpu")
    names = [name for name, _ in result.report.times]
    # X is read by the first product (scaling in its loads), then the stats and scaling passes.
    assert result.report.maxima_from == "exact" and names[:4] == ["sample", "scale+ttm1", "norms", "rescale"]
    assert not result.report.overflow
    y64 = reference(x, mats)
    assert np.linalg.norm(result.y - y64) <= result.report.bound


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_power_of_two_scaling_is_exact_bit_for_bit(dtype):
    rng = np.random.default_rng(14)
    x = (rng.standard_normal((7, 6, 5, 4)) * np.exp(rng.uniform(-20, 20, (7, 6, 5, 4)))).astype(dtype)
    exps = [rng.integers(-60, 60, s) for s in x.shape]
    ops = CpuTTMcOps()
    scaled, _ = ops.kron_scale(x, exps, np.float64)
    back, _ = ops.kron_scale(scaled, [-e for e in exps], dtype)
    assert back.tobytes() == x.tobytes()
    fibers, s, _ = ops.fiber_scale(x.astype(np.float64), 2, 5, np.float64)
    undone = ops.fiber_unscale(fibers, 2, np.zeros(x.shape[2], np.int64), s, np.float64)
    assert undone.tobytes() == x.astype(np.float64).tobytes()


def test_ceil_log2_is_exact_at_powers_of_two():
    values = np.array([1.0, 2.0, 3.0, 0.5, 0.75, 2.0**-30, 2.0**40 + 1, 0.0])
    np.testing.assert_array_equal(ceil_log2(values), [0, 1, 2, -1, 0, -30, 41, 0])


def test_onesided_split_keeps_inner_products_below_fp16_range():
    prec = PRECISIONS["fp16"]
    for inner in (1, 7, 64, 256, 2048, 5000):
        p, q = onesided_split(inner, prec)
        assert inner * 2.0 ** (p + q) * (1 + step_theta(inner, prec)) < prec.max_finite


def test_bound_coefficient_is_the_corrected_poster_sum():
    thetas = [1e-3, 2e-3, 5e-4]
    # Σ_i θ_i ∏_{j<i}(1+θ_j) = ∏(1+θ) − 1, independent of the order.
    expected = math.prod(1 + t for t in thetas) - 1
    for perm in itertools.permutations(thetas):
        assert rounding_coefficient(list(perm), 0.0) == pytest.approx(expected, rel=1e-12)
    # The literal formula of the poster is dominated by γ_{I_1} and misses later GEMMs.
    u = PRECISIONS["fp32"].u_store
    literal = poster_literal_coefficient([8, 4096, 4096], u)
    ours = rounding_coefficient([step_theta(i, PRECISIONS["fp32"]) for i in (8, 4096, 4096)], 0.0)
    assert literal < gamma(8, u) * 1.01 < ours
    # With FP16's u the literal γ_{2048} is infinite; FP32 accumulation keeps ours finite.
    assert math.isinf(poster_literal_coefficient([2048], PRECISIONS["fp16"].u_store))
    assert step_theta(2048, PRECISIONS["fp16"]) < 1e-3


def test_orders():
    shape, out = (256, 256, 2048), (64, 64, 64)
    assert choose_order(shape, out, "given") == (0, 1, 2)
    assert choose_order(shape, out, "ssf")[-1] == 2
    assert choose_order((5, 3, 9, 4), (2, 2, 2, 2), "ssf") == (1, 3, 0, 2)
    # Smallest-shared-first minimises the poster's literal sum of prefix products.
    dims = (50, 3, 700, 20)
    u = PRECISIONS["fp32"].u_store
    ssf = choose_order(dims, (2, 2, 2, 2), "ssf")
    best_literal = min(
        itertools.permutations(range(4)), key=lambda o: poster_literal_coefficient([dims[m] for m in o], u)
    )
    assert ssf == best_literal
    # ``best`` with equal bounds picks the cheapest order by flops.
    best = choose_order((40, 6, 30), (2, 5, 3), "best", lambda order: 1.0)
    flops = {o: chain_flops((40, 6, 30), (2, 5, 3), o) for o in itertools.permutations(range(3))}
    assert flops[best] == min(flops.values())
    with pytest.raises(ValueError):
        choose_order((2,) * 6, (1,) * 6, "best", lambda o: 1.0)


def test_best_order_never_has_a_larger_bound_than_ssf():
    rng = np.random.default_rng(15)
    for _ in range(10):
        x, mats = random_case(rng)
        best = ttmc(x, mats, precision="fp16", order="best", backend="cpu").report
        ssf = ttmc(x, mats, precision="fp16", order="ssf", backend="cpu").report
        assert best.bound <= ssf.bound * (1 + 1e-3)


def test_report_contents():
    rng = np.random.default_rng(16)
    x, mats = random_case(rng)
    report = ttmc(x, mats, precision="fp16", scaling="kronecker", backend="cpu").report
    names = [name for name, _ in report.times]
    # The first product reads X, scaling it on the way (fused on the GPU, two steps here).
    assert names[:2] == ["sample", f"scale+ttm{report.order[0]}"] and names[-1] == "recover"
    assert report.maxima_from == "sample"
    assert [n for n in names if n.startswith("ttm")] == [f"ttm{m}" for m in report.order[1:]]
    assert report.norm_x == pytest.approx(np.linalg.norm(x))
    assert report.bound == pytest.approx(report.bound_rounding + report.bound_underflow)
    d = report.as_dict()
    assert d["total_time"] >= 0 and set(d["times"]) == set(names)


def test_input_validation():
    x = np.ones((3, 4, 5))
    with pytest.raises(ValueError, match="matrix 1"):
        ttmc(x, [np.ones((2, 3)), np.ones((2, 5)), np.ones((2, 5))], backend="cpu")
    with pytest.raises(ValueError, match="non-finite"):
        bad = x.copy()
        bad[0, 0, 0] = np.nan
        ttmc(bad, [np.ones((2, 3)), np.ones((2, 4)), np.ones((2, 5))], backend="cpu")
    with pytest.raises(ValueError, match="scaling"):
        ttmc(x, [np.ones((2, 3)), np.ones((2, 4)), np.ones((2, 5))], scaling="two-sided", backend="cpu")


def test_poster_literal_formula_is_exceeded_where_ours_holds():
    """Three scalar FP16 products whose roundings add up: the literal Σ∏γ is too small."""
    x = np.full((1, 1, 1), 1.615234375, dtype=np.float16)
    mats = [np.full((1, 1), v, dtype=np.float16) for v in (1.3837890625, 1.9970703125, 1.98046875)]
    exact = float(x[0, 0, 0]) * np.prod([float(u[0, 0]) for u in mats])
    result = ttmc(x, mats, precision="fp16", scaling="none", backend="cpu")
    err = abs(float(result.y.ravel()[0]) - exact)
    assert result.report.bound_poster_literal < err <= result.report.bound
