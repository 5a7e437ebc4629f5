"""The range-coded integer streams: exact round trips, near the order-0 entropy."""

from __future__ import annotations

import numpy as np
import pytest

from gpu.compress.entropy_coding import MAX_RADIUS, decode_integers, encode_integers


def entropy_bytes(codes: np.ndarray) -> float:
    _, counts = np.unique(codes, return_counts=True)
    p = counts / counts.sum()
    return float(-(counts * np.log2(p)).sum() / 8)


def test_gaussian_codes_round_trip_near_their_entropy():
    rng = np.random.default_rng(0)
    codes = np.rint(rng.normal(0, 2.0, 200_000)).astype(np.int64)
    codes[:3] = [10**6, -(10**5), 3 * MAX_RADIUS]  # escapes
    stream = encode_integers(codes)
    np.testing.assert_array_equal(decode_integers(stream), codes)
    assert len(stream) <= 1.01 * entropy_bytes(codes) + 200


@pytest.mark.parametrize("codes", [np.zeros(0, int), np.zeros(17, int), np.array([-5]),
                                   np.arange(-3000, 3000) * 7, np.full(5, 2**31 - 1)])
def test_edge_cases_round_trip(codes):
    np.testing.assert_array_equal(decode_integers(encode_integers(codes)), codes)


def test_a_damaged_stream_is_refused():
    stream = bytearray(encode_integers(np.arange(-20, 20)))
    stream[4:8] = (999).to_bytes(4, "little")  # the radius no longer matches the histogram
    with pytest.raises(ValueError, match="damaged"):
        decode_integers(bytes(stream))
