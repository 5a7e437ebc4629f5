"""gpu.peaks.sshopm_math.select_peaks: the peaks of the pairwise merge and rank it replaced
(a climb is kept when no better climb lies within the merge angle of it; the kept ones are
ranked against each other), on random climbs with tied amplitudes, antipodal and
near-duplicate directions, invalid climbs and thresholds that cut the list; climb_status."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gpu.peaks import sshopm_math as sm


def better(i, j, lam):
    """Climb j ranks above climb i: larger λ, ties broken by the lower index."""
    return lam[j] > lam[i] or (lam[j] == lam[i] and j < i)


def is_duplicate(i, n, cx, cy, cz, lam, valid, cos_merge):
    """Valid climb i lies within the merge angle of a better valid climb (antipodes included)."""
    return any(j != i and valid[j] and better(i, j, lam)
               and abs(cx[i] * cx[j] + cy[i] * cy[j] + cz[i] * cz[j]) >= cos_merge for j in range(n))


def unique_rank(i, n, lam, keep):
    """Rank of kept climb i among the kept climbs (0 = largest amplitude)."""
    return sum(1 for j in range(n) if j != i and keep[j] and better(i, j, lam))


def pairwise(cx, cy, cz, lam, valid, cos_merge, npeaks, threshold, rel_threshold):
    """The selection before select_peaks: every kept climb ranked against every other."""
    n = len(lam)
    keep = [1 if valid[i] and not is_duplicate(i, n, cx, cy, cz, lam, valid, cos_merge) else 0 for i in range(n)]
    rank = [unique_rank(i, n, lam, keep) if keep[i] else npeaks for i in range(n)]
    best = next((lam[i] for i in range(n) if rank[i] == 0), 0.0)
    dirs, amps = np.full((npeaks, 3), np.nan), np.full(npeaks, np.nan)
    for i in range(n):
        if rank[i] < npeaks and lam[i] >= threshold and lam[i] >= rel_threshold * best:
            dirs[rank[i]], amps[rank[i]] = (cx[i], cy[i], cz[i]), lam[i]
    return dirs, amps


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(0, 40), npeaks=st.integers(1, 6),
       levels=st.integers(1, 8), threshold=st.sampled_from([0.0, 0.3]), rel=st.sampled_from([0.0, 0.1, 0.6]))
def test_select_peaks_reports_what_the_pairwise_merge_did(seed, n, npeaks, levels, threshold, rel):
    rng = np.random.default_rng(seed)
    # few distinct directions and amplitudes: duplicates, antipodes and ties are common
    axes = rng.normal(size=(max(1, n // 3), 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    pick = rng.integers(0, len(axes), n)
    d = axes[pick] * rng.choice([-1.0, 1.0], (n, 1)) + rng.normal(scale=0.02, size=(n, 3))
    d /= np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)
    cx, cy, cz = (np.ascontiguousarray(d[:, k]) for k in range(3))
    lam = rng.integers(1, levels + 1, n) / levels
    valid = (rng.random(n) < 0.85).astype(np.int32)
    cos_merge = np.cos(np.radians(5.0))
    dirs, amps = np.full((npeaks, 3), np.nan), np.full(npeaks, np.nan)
    found = sm.select_peaks(n, cx, cy, cz, lam, valid, np.empty(n, np.int64), cos_merge, npeaks, threshold, rel, dirs, amps)
    want_dirs, want_amps = pairwise(cx, cy, cz, lam, valid, cos_merge, npeaks, threshold, rel)
    assert found == int(np.isfinite(want_amps).sum())
    np.testing.assert_array_equal(amps, want_amps)
    np.testing.assert_array_equal(dirs, want_dirs)


@pytest.mark.parametrize("npeaks", [1, 2, 3])
def test_select_peaks_example(npeaks):
    """Three climbs to one peak, one to its antipode, a lower peak, an invalid higher climb."""
    cx = np.array([1.0, 1.0, -1.0, 0.0, 0.0, 1.0])
    cy = np.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0])
    cz = np.array([0.0, 0.0, 0.0, 0.0, 1.0, 0.0])
    lam = np.array([2.0, 2.0, 2.0, 1.0, 0.5, 9.0])
    valid = np.array([1, 1, 1, 1, 1, 0], np.int32)
    dirs, amps = np.zeros((3, 3)), np.zeros(3)
    found = sm.select_peaks(6, cx, cy, cz, lam, valid, np.empty(6, np.int64), 0.99, npeaks, 0.0, 0.3, dirs, amps)
    # the peak at 0.5 is below 0.3 × 2.0 = 0.6
    assert found == min(npeaks, 2)
    np.testing.assert_array_equal(amps[:found], [2.0, 1.0][:found])
    np.testing.assert_array_equal(dirs[:found], [[1, 0, 0], [0, 1, 0]][:found])


def test_climb_status_stops_converged_then_capped():
    """A converged step is converged even on the last iteration; the cap only stops a climb
    still moving."""

    def status(lam, lam_prev, step, its, max_iter=30):
        return sm.climb_status(lam, lam_prev, step, its, max_iter, 1e-4, 1e-6)

    assert status(2.5, 2.5, 0.0, 3) == sm.STOPPED_CONVERGED
    assert status(1.5, 1.5, 0.0, 3) == sm.STOPPED_CONVERGED
    assert status(1.5, 1.5, 0.0, 30) == sm.STOPPED_CONVERGED
    assert status(1.5, 1.4, 0.0, 30) == sm.STOPPED_CAPPED  # λ still changing
    assert status(1.5, 1.5, 1e-3, 29) == sm.CLIMBING  # step above step_tol
    assert status(1.5, 1.5, 1e-3, 30) == sm.STOPPED_CAPPED
