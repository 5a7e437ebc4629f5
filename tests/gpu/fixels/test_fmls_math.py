"""The pieces the backends add to MRtrix3's FMLS: the CPU backend's sort of the positive
samples against NumPy's stable sort, and the adjacency walk to the nearest sampling
direction against a scan of all 1281."""

from __future__ import annotations

import numpy as np

from gpu.fixels import fmls_math as fm
from gpu.fixels.cpu_loops import sort_positive
from gpu.fixels.fmls_tables import direction_neighbours, sampling_directions


def test_sort_positive_is_a_stable_descending_sort():
    rng = np.random.default_rng(0)
    for n in (1, 15, 16, 17, 100, 1281):
        for rounding in (None, 1):
            amp = rng.normal(size=n)
            if rounding is not None:
                amp = np.round(amp, rounding)  # many equal amplitudes: ties go by index
            order, scratch = np.empty(n, np.int32), np.empty(n, np.int32)
            count = sort_positive(amp, order, scratch)
            positive = np.flatnonzero(amp > 0)
            expected = positive[np.argsort(-amp[positive], kind="stable")]
            assert count == positive.size
            np.testing.assert_array_equal(order[:count], expected)


def test_walk_finds_the_nearest_direction():
    unit, neighbours = sampling_directions(), direction_neighbours()
    rng = np.random.default_rng(1)
    targets = rng.normal(size=(2000, 3))
    targets /= np.linalg.norm(targets, axis=1, keepdims=True)
    starts = rng.integers(0, len(unit), size=len(targets))
    for (x, y, z), start in zip(targets, starts):
        found = fm.nearest_direction_from(unit, neighbours, int(start), x, y, z)
        assert found == int(np.argmax(np.abs(unit @ np.array([x, y, z]))))
