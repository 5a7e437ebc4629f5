"""The fused step-error pass equals the decoder's volume measured by numpy (float64
reference: quantize, dequantize and the output cast, then the norm and the maximum), on the
CPU and in the CUDA simulator, for every output cast."""

from __future__ import annotations

import numpy as np
import pytest

from gpu.compress.error_bounded import cast_output
from gpu.compress.quantize import dequantize, quantize
from gpu.compress.step_error import BLOCK, step_error


def reference(x, p, step, dtype):
    y = cast_output(dequantize(quantize(x, step, p), step, p), dtype).astype(np.float64)
    d = y - x
    return float(np.linalg.norm(d)), float(np.abs(d).max())


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int16, np.uint8])
@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_step_error_equals_the_decoded_volume(dtype, backend):
    rng = np.random.default_rng(3)
    n = BLOCK + 1000 if backend == "cpu" else 700  # a partial last block; the simulator is slow
    x = rng.normal(100, 40, n)
    if np.issubdtype(dtype, np.integer):
        x = np.clip(np.rint(x), np.iinfo(dtype).min, np.iinfo(dtype).max)
    p = x + rng.normal(0, 3, n)
    for step in (0.37, 2.5, 9.0):
        norm, largest = step_error(x, p, step, dtype, backend)
        ref_norm, ref_max = reference(x, p, step, dtype)
        assert norm == pytest.approx(ref_norm, rel=1e-12)
        assert largest == ref_max


def test_integer_cast_rounds_half_to_even_and_clips():
    x = np.array([0.0, 0.0, 0.0, 0.0, 250.0, -3.0])
    p = np.array([0.5, 1.5, 2.5, -0.5, 300.0, -3.0])
    # a step so coarse that every code is 0: the decoded values are the predictions, cast
    norm, largest = step_error(x, p, 1e9, np.uint8)
    y = np.array([0.0, 2.0, 2.0, 0.0, 255.0, 0.0])  # np.rint, then clipped to uint8
    assert norm == pytest.approx(float(np.linalg.norm(y - x)), rel=1e-15)
    assert largest == float(np.abs(y - x).max())


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_steps_in_one_pass_are_the_steps_one_at_a_time(backend):
    """step_errors measures several steps in one launch: for each, the numbers step_error
    gives alone, bit for bit (the same order of sums), and the reference's."""
    from gpu.compress.step_error import step_errors

    rng = np.random.default_rng(5)
    n = 2 * BLOCK + 77 if backend == "cpu" else 900
    x = rng.normal(100, 40, n)
    p = x + rng.normal(0, 3, n)
    steps = [0.0, 0.37, 1.0, 2.5, 9.0, 100.0]
    together = step_errors(x, p, steps, np.float32, backend)
    assert together == [step_error(x, p, s, np.float32, backend) for s in steps]
    for (norm, largest), s in zip(together[1:], steps[1:]):
        ref_norm, ref_max = reference(x, p, s, np.float32)
        assert norm == pytest.approx(ref_norm, rel=1e-12)
        assert largest == ref_max
    with pytest.raises(ValueError, match="one step or more"):
        step_errors(x, p, [], np.float64, backend)
