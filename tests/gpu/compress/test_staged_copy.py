"""Arrays larger than a piece go to and from the device through the staged copy's
page-locked buffers intact, in pieces that do not divide them evenly (on a GPU with CuPy)."""

from __future__ import annotations

import numpy as np
import pytest

from gpu.cuda.device import cuda_available


def _cupy():
    try:
        import cupy
    except ImportError:
        return None
    return cupy


needs_gpu = pytest.mark.skipif(not cuda_available() or _cupy() is None,
                               reason="the staged copy moves CuPy arrays: a CUDA GPU with CuPy only")


@needs_gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16])
def test_round_trip_through_pieces(monkeypatch, dtype):
    from gpu.compress import staged_copy

    monkeypatch.setattr(staged_copy, "PIECE_BYTES", 1 << 16)  # many pieces, the last one short
    x = (np.random.default_rng(1).standard_normal((37, 29, 23)) * 1000).astype(dtype)
    d = staged_copy.copy_to_device(x)
    np.testing.assert_array_equal(d.get(), x)
    np.testing.assert_array_equal(staged_copy.copy_to_host(d * 2), x * 2)
    assert staged_copy.copy_to_device(x[:, ::2]).get().tolist() == x[:, ::2].tolist()
