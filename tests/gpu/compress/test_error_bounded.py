"""Error-bounded Tucker coding: every target mode is met on random, smooth and DWI-like
tensors, in [target/2, target] for the Frobenius targets, and the decoder reproduces the
encoder's measured errors (float64 reference metrics)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpu.compress.error_bounded import ErrorTarget, decode_tensor, encode_tensor, error_metrics


def random_tensor():
    return np.random.default_rng(0).standard_normal((9, 8, 7)).astype(np.float32)


def smooth_tensor():
    grid = np.meshgrid(*[np.linspace(0, 1, n) for n in (10, 9, 8)], indexing="ij")
    return (np.exp(-grid[0] ** 2 - 2 * grid[1]) * np.cos(3 * grid[2]) * 100).astype(np.float64)


def dwi_like_tensor():
    from bench.ttmc import dwi_like

    return dwi_like((8, 8, 6), n_dirs=12)


TENSORS = {"random": random_tensor, "smooth": smooth_tensor, "dwi": dwi_like_tensor}


@pytest.mark.parametrize("kind", TENSORS)
@pytest.mark.parametrize("mode", ["tol", "abs", "psnr"])
def test_round_trip_meets_the_target(kind, mode):
    x = TENSORS[kind]()
    metrics0 = {"tol": 0.02, "abs": 0.02 * float(np.ptp(x)), "psnr": 45.0}
    target = ErrorTarget(mode, metrics0[mode])
    encoded = encode_tensor(x, target, output_dtype=x.dtype, backend="cpu")
    y = decode_tensor(encoded, x.dtype)
    assert y.dtype == x.dtype and y.shape == x.shape
    measured = error_metrics(x, y)
    for key in ("relative_error", "max_error", "psnr"):
        assert measured[key] == pytest.approx(encoded.report[key], rel=1e-9)
    if mode == "tol":
        assert target.value / 2 <= measured["relative_error"] <= target.value
    elif mode == "abs":
        assert measured["max_error"] <= target.value
    else:
        assert target.value <= measured["psnr"] <= target.value + 20 * math.log10(2)
    assert encoded.nbytes < x.nbytes


def test_integer_volume_meets_abs_after_rounding():
    rng = np.random.default_rng(1)
    x = np.rint(smooth_tensor() * 10 + rng.normal(0, 3, (10, 9, 8))).astype(np.int16)
    encoded = encode_tensor(x, ErrorTarget("abs", 2.0), output_dtype=np.int16)
    y = decode_tensor(encoded, np.int16)
    assert y.dtype == np.int16 and np.abs(y.astype(int) - x).max() <= 2


def test_fixed_ranks_still_meet_the_target():
    x = smooth_tensor()
    encoded = encode_tensor(x, ErrorTarget("tol", 1e-3), ranks=(2, 2, 2))
    assert encoded.ranks == (2, 2, 2)
    assert 5e-4 <= error_metrics(x, decode_tensor(encoded))["relative_error"] <= 1e-3


def test_targets_that_cannot_be_met_are_refused():
    with pytest.raises(ValueError, match="constant"):
        encode_tensor(np.ones((4, 4, 4)), ErrorTarget("psnr", 40))
    with pytest.raises(ValueError, match="resolution"):
        encode_tensor(np.full((4, 4, 4), 1e6, np.float32), ErrorTarget("abs", 1e-6), output_dtype=np.float32)
    with pytest.raises(ValueError, match="mode"):
        ErrorTarget("rmse", 1.0)


@pytest.mark.parametrize("law", ["linear", "square root", "floor", "steps"])
@pytest.mark.parametrize("start", [1e-3, 0.9, 7.0])
def test_the_step_search_finds_the_largest_fitting_step_in_a_few_calls(law, start):
    """The largest step whose error meets the budget, to within the ratio asked, for errors
    that grow as a power of the step, level off on a floor, or rise in small jumps (a
    quantiser's error does each), from far below or above it."""
    from gpu.compress.error_bounded import _largest_fitting_step

    errors = {"linear": lambda s: 0.29 * s, "square root": lambda s: math.sqrt(s),
              "floor": lambda s: math.hypot(0.8, 0.1 * s), "steps": lambda s: 0.29 * math.ceil(s * 50) / 50}
    calls = []

    def error(step):
        calls.append(step)
        return errors[law](step)

    budget, ratio = 1.0, 1.002
    step = _largest_fitting_step(error, budget, start, ratio, 1e-6, 1e6)
    assert errors[law](step) <= budget < errors[law](step * ratio)
    assert len(calls) <= 12, calls


def test_the_step_search_says_when_nothing_fits_and_stops_at_its_highest_step():
    from gpu.compress.error_bounded import _largest_fitting_step

    assert _largest_fitting_step(lambda s: 2.0 + s, 1.0, 1.0, 1.002, 1e-6, 1e6) is None
    assert _largest_fitting_step(lambda s: 1e-3 * s, 1.0, 1.0, 1.002, 1e-6, 10.0) == 10.0
    assert _largest_fitting_step(lambda s: 0.0, 1.0, 1.0, 1.002, 1e-6, 10.0) == 10.0


@pytest.mark.parametrize("mode", ["tol", "abs"])
def test_cuda_decoder_equals_cpu_decoder(mode):
    """The CUDA backend's decoder gives the CPU decoder's values (here without CuPy: its
    passes on the host, the residual's dequantisation in the simulator)."""
    x = dwi_like_tensor()
    target = ErrorTarget(mode, 0.01 if mode == "tol" else 0.01 * float(np.ptp(x)))
    encoded = encode_tensor(x, target, output_dtype=x.dtype, backend="cpu")
    assert encoded.residual_step > 0
    np.testing.assert_array_equal(decode_tensor(encoded, x.dtype, backend="cuda"), decode_tensor(encoded, x.dtype))


def _cupy():
    try:
        import cupy
    except ImportError:
        return None
    return cupy


def _exact_entropy_bytes(codes: np.ndarray) -> float:
    counts = np.unique(codes, return_counts=True)[1]
    return float(-(counts * np.log2(counts / codes.size)).sum() / 8) + 16


@pytest.mark.parametrize("on_device", [False, True])
def test_search_entropy_is_exact_within_the_coders_bins_and_prices_far_codes_as_distinct(on_device):
    """The budget search's entropy comes from the coder's clipped histogram (±4,096), on the
    host or the device: exact within its bins, each code beyond them counted as a value of
    its own, so repeated far codes are priced above their entropy."""
    from gpu.compress.error_bounded import DEVICE_CODES, _entropy_bytes

    if on_device and _cupy() is None:
        pytest.skip("the device entropy takes CuPy arrays: a CUDA GPU with CuPy only")
    def where(codes):
        return (_cupy().asarray if on_device else np.asarray)(codes.astype(np.int32))

    rng = np.random.default_rng(3)
    near = rng.integers(-60, 61, DEVICE_CODES + 1000)
    far = (5000 + rng.permutation(10**6)[:500]) * np.where(rng.random(500) < 0.5, -1, 1)  # distinct, beyond ±4096
    for codes in (near, np.concatenate([near, far])):
        assert _entropy_bytes(where(codes)) == pytest.approx(_exact_entropy_bytes(codes), rel=1e-12)
    repeated = np.concatenate([near, np.full(500, 10**5)])
    assert _entropy_bytes(where(repeated)) > _exact_entropy_bytes(repeated) + 500 * 8 / 8


def test_a_candidate_too_fine_for_32_bit_codes_is_priced_infinite():
    """The search prices the quantiser's own codes: a core step whose codes would not fit in
    32 bits (which the coder refuses) makes the candidate infinitely large, not a clipped guess."""
    from gpu.compress.error_bounded import _candidate_size, _SampledFactors
    from gpu.compress.hosvd import mode_products

    rng = np.random.default_rng(0)
    core = rng.normal(size=(3, 3, 3)) * 1e6
    factors = [np.linalg.qr(rng.normal(size=(5, 3)))[0] for _ in range(3)]
    x = np.ascontiguousarray(mode_products(core, factors))
    grid = [np.arange(5)] * 3

    def size(core_step: float) -> float:
        return _candidate_size(x, core, _SampledFactors(factors, grid, np), (3, 3, 3), core_step, 2.0**-11, "abs",
                               None, 1.0, 1.0)[0]

    assert size(1e-6) == math.inf  # codes of about 1e12
    assert math.isfinite(size(1.0))


@pytest.mark.parametrize("target", [ErrorTarget("tol", 0.005), ErrorTarget("tol", 0.05), ErrorTarget("psnr", 50),
                                    ErrorTarget("abs", 20.0)])
def test_choices_priced_in_part_change_no_archive(monkeypatch, target):
    """The search skips a choice's residual once its core and factors alone exceed the best
    estimate so far, and prices the coarsest truncations first: the archive is the one that
    pricing every choice in full, in the usual order, gives, byte for byte."""
    import gpu.compress.error_bounded as eb
    from bench.ttmc import dwi_like

    x = dwi_like((24, 24, 12), 30).astype(np.float32)
    predictions = []
    products = eb.mode_products

    def counted(*args):
        predictions[-1] += 1
        return products(*args)

    monkeypatch.setattr(eb, "mode_products", counted)
    predictions.append(0)
    fast = encode_tensor(x, target, output_dtype=x.dtype)
    full_price = eb._candidate_size
    monkeypatch.setattr(eb, "_candidate_size", lambda *args: full_price(*args[:-1], math.inf))
    predictions.append(0)
    full = encode_tensor(x, target, output_dtype=x.dtype)
    assert predictions[0] < predictions[1]  # some choices went without their residual
    assert (fast.core_stream, fast.factor_streams, fast.residual_stream) == \
        (full.core_stream, full.factor_streams, full.residual_stream)
    assert (fast.core_step, fast.factor_step, fast.residual_step, fast.ranks) == \
        (full.core_step, full.factor_step, full.residual_step, full.ranks)
