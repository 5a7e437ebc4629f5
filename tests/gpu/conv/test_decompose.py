"""CP-ALS and Tucker-2 HOSVD of conv kernels."""

import numpy as np
import pytest

from gpu.conv.decompose import cp_als, tucker2_hosvd
from gpu.conv.direct import cp_kernel, tucker_kernel


def rel(a, b):
    return np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b)


@pytest.mark.parametrize("rank,shape", [(1, (5, 4, 3, 3)), (3, (6, 5, 3, 3)), (4, (16, 12, 5, 5)), (8, (32, 16, 3, 3))])
def test_cp_als_recovers_a_planted_low_rank_kernel(rank, shape):
    rng = np.random.default_rng(rank)
    t, c, kh, kw = shape
    k = cp_kernel(*(rng.standard_normal((d, rank)) for d in (c, kh, kw, t)))
    d = cp_als(k, rank)
    assert d.relative_error < 1e-6
    assert rel(cp_kernel(d.s, d.h, d.w, d.t), k) < 1e-6
    assert (d.s.shape, d.h.shape, d.w.shape, d.t.shape) == ((c, rank), (kh, rank), (kw, rank), (t, rank))
    assert d.s.dtype == np.float32


def test_cp_als_is_deterministic_for_a_seed_and_reports_its_error():
    k = np.random.default_rng(0).standard_normal((8, 6, 3, 3))
    a, b = cp_als(k, 4, max_iter=50, seed=3), cp_als(k, 4, max_iter=50, seed=3)
    assert np.array_equal(a.t, b.t) and a.relative_error == b.relative_error
    assert a.relative_error == pytest.approx(rel(cp_kernel(a.s, a.h, a.w, a.t), k), rel=1e-6)
    assert 0 < a.relative_error < 1


def test_cp_als_error_matches_tensorly_parafac():
    tl = pytest.importorskip("tensorly")
    from tensorly.decomposition import parafac

    rng = np.random.default_rng(4)
    k = cp_kernel(*(rng.standard_normal((d, 3)) for d in (6, 3, 3, 7))) + 1e-3 * rng.standard_normal((7, 6, 3, 3))
    ours = cp_als(k, 3).relative_error
    theirs = parafac(tl.tensor(k), 3, n_iter_max=1000, tol=1e-12, init="svd")
    assert ours <= rel(tl.cp_to_tensor(theirs), k) * 1.01 + 1e-9


def test_tucker2_is_exact_at_full_ranks_and_truncates_by_hosvd():
    rng = np.random.default_rng(1)
    k = rng.standard_normal((8, 6, 3, 3))
    full = tucker2_hosvd(k, (6, 8))
    assert full.relative_error < 1e-6
    assert rel(tucker_kernel(full.u_in, full.core, full.u_out), k) < 1e-6
    low = tucker2_hosvd(k, (3, 4))
    assert low.core.shape == (4, 3, 3, 3) and low.u_in.shape == (6, 3) and low.u_out.shape == (8, 4)
    # the factors are the leading singular vectors of the mode unfoldings
    u_out = np.linalg.svd(k.reshape(8, -1))[0][:, :4]
    assert np.allclose(np.abs(low.u_out.T @ u_out), np.eye(4), atol=1e-5)
    assert 0 < low.relative_error < 1


def test_bad_ranks_and_kernels_are_refused():
    k = np.ones((4, 3, 3, 3))
    with pytest.raises(ValueError, match="D1 must be between 1 and the 3 input"):
        tucker2_hosvd(k, (4, 2))
    with pytest.raises(ValueError, match="at least 1"):
        cp_als(k, 0)
    bad = k.copy()
    bad[0, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        cp_als(bad, 2)
    with pytest.raises(ValueError, match="4-D"):
        tucker2_hosvd(np.ones((3, 3, 3)), (1, 1))
