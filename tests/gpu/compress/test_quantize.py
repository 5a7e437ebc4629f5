"""Uniform quantisation: the numba.cuda kernels equal the CPU passes (codes bit for bit; values
bit for bit in the simulator, to the last bit on a GPU, whose compiler fuses the multiply and
add of dequantisation into one rounding), and the error stays within half a step (float64
reference)."""

from __future__ import annotations

import numpy as np
import pytest

from gpu.compress.quantize import dequantize, quantize
from gpu.cuda.simulator import simulator_active


@pytest.mark.parametrize("with_reference", [False, True])
def test_cuda_kernels_equal_cpu(with_reference):
    rng = np.random.default_rng(4)
    x = rng.normal(0, 30, (3, 4, 5))
    ref = rng.normal(0, 30, x.shape) if with_reference else None
    step = 0.7
    cpu = quantize(x, step, ref, backend="cpu")
    gpu = quantize(x, step, ref, backend="cuda")
    assert gpu.dtype == np.int32 and np.array_equal(cpu, gpu)
    back_cpu = dequantize(cpu, step, ref, backend="cpu")
    back_gpu = dequantize(gpu, step, ref, backend="cuda")
    if simulator_active():
        np.testing.assert_array_equal(back_cpu, back_gpu)
    else:
        # one rounding of the product's size apart at most
        size = np.abs(cpu * step).max() + (0.0 if ref is None else np.abs(ref).max())
        np.testing.assert_allclose(back_gpu, back_cpu, rtol=0, atol=2 * np.finfo(np.float64).eps * size)
    assert np.max(np.abs(back_cpu - x)) <= step / 2 * (1 + 1e-12)


def test_codes_are_the_nearest_grid_points():
    x = np.array([-1.26, -0.74, -0.25, 0.0, 0.24, 0.76, 1.24, 100.0])
    assert quantize(x, 0.5).tolist() == [-3, -1, 0, 0, 0, 2, 2, 200]
    with pytest.raises(ValueError, match="positive"):
        quantize(x, 0.0)


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_a_step_too_fine_for_32_bit_codes_is_refused_on_both_backends(backend):
    x = np.array([[1.0, -3.0e6], [2.0, 0.5]])
    assert quantize(x, 0.01, backend=backend).tolist() == [[100, -300_000_000], [200, 50]]
    with pytest.raises(ValueError, match=r"too fine for 32-bit codes of values up to 3e\+06"):
        quantize(x, 1e-3, backend=backend)


@pytest.mark.parametrize("with_reference", [False, True])
@pytest.mark.parametrize("keep_codes", [False, True])
def test_codes_counted_in_the_quantisers_pass_are_the_coders_histogram(with_reference, keep_codes):
    """quantize_histogram on the device (CUDA kernel; the simulator in CI) gives the CPU's
    codes and the rANS coder's clipped histogram of them, heavy tails clipped included."""
    from numba import cuda

    from gpu.compress.chunked_rans import MAX_RADIUS, clipped_histogram
    from gpu.compress.quantize import quantize_histogram

    rng = np.random.default_rng(8)
    x = rng.standard_t(1.5, (5, 7, 11)) * 40
    x[0, 0, :3] = [5e5, -5e5, 0.5]
    ref = rng.normal(0, 3, x.shape) if with_reference else None
    step = 0.9
    codes = quantize(x, step, ref)
    assert np.abs(codes).max() > MAX_RADIUS  # some codes beyond the clipped bins
    device_ref = None if ref is None else cuda.to_device(ref)
    gpu_codes, hist = quantize_histogram(cuda.to_device(x), step, device_ref, backend="cuda", keep_codes=keep_codes)
    np.testing.assert_array_equal(hist, clipped_histogram(codes))
    if keep_codes:
        np.testing.assert_array_equal(gpu_codes.copy_to_host(), codes)
    else:
        assert gpu_codes is None
    cpu_codes, cpu_hist = quantize_histogram(x, step, ref, keep_codes=keep_codes)
    np.testing.assert_array_equal(cpu_hist, hist)
    with pytest.raises(ValueError, match="too fine for 32-bit codes"):
        quantize_histogram(cuda.to_device(x), 1e-6, device_ref, backend="cuda")


def test_short_arrays_quantised_by_numpy_are_the_loops_codes():
    """Arrays below the parallel loop's size are quantised by numpy in the caller's thread:
    the loop's codes for the same entries (a prefix of a long array's), ties included."""
    from gpu.compress.quantize import LOOP_ENTRIES

    rng = np.random.default_rng(12)
    step = 0.3
    x = rng.normal(0, 50, LOOP_ENTRIES + 5)
    x[:400] = (np.arange(400) - 200 + 0.5) * step  # values on the half steps
    ref = rng.normal(0, 2, x.size)
    for reference in (None, ref):
        long = quantize(x, step, reference)
        short = quantize(x[:5000], step, None if reference is None else reference[:5000])
        np.testing.assert_array_equal(short, long[:5000])
    with pytest.raises(ValueError, match="too fine for 32-bit codes"):
        quantize(x[:10], 1e-9)
