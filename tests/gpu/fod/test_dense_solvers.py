"""The dense solvers against scipy's (float64): triangular and Cholesky solves, and NNLS on
random problems, degenerate ones included."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.optimize

from gpu.fod.dense_solvers import nonnegative_least_squares, solve_positive_definite, solve_triangular


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("columns", [None, 1, 7])
def test_solve_triangular_equals_scipy(lower, columns):
    rng = np.random.default_rng(3)
    for n in (1, 2, 6, 40):
        # a unit-ish diagonal keeps the solve well conditioned; the other triangle is noise it must not read
        matrix = rng.standard_normal((n, n)) / np.sqrt(n) + np.diag(rng.uniform(1, 2, n) * rng.choice([-1, 1], n))
        rhs = rng.standard_normal(n if columns is None else (n, columns))
        ours = solve_triangular(matrix, rhs, lower=lower)
        assert ours.shape == rhs.shape
        np.testing.assert_allclose(ours, scipy.linalg.solve_triangular(matrix, rhs, lower=lower), rtol=1e-12,
                                   atol=1e-13)


def test_solve_triangular_refuses_a_singular_matrix():
    with pytest.raises(np.linalg.LinAlgError, match="diagonal entry 1"):
        solve_triangular(np.array([[1.0, 0], [2, 0]]), np.ones(2), lower=True)
    with pytest.raises(ValueError, match="square matrix"):
        solve_triangular(np.ones((2, 3)), np.ones(2), lower=True)


@pytest.mark.parametrize("columns", [None, 3])
def test_solve_positive_definite_equals_scipy_cho_solve(columns):
    rng = np.random.default_rng(4)
    for n in (1, 3, 6, 20):
        a = rng.standard_normal((3 * n, n))
        normal = a.T @ a
        rhs = rng.standard_normal(n if columns is None else (n, columns))
        theirs = scipy.linalg.cho_solve(scipy.linalg.cho_factor(normal), rhs)
        np.testing.assert_allclose(solve_positive_definite(normal, rhs), theirs, rtol=1e-11, atol=1e-12)
    with pytest.raises(np.linalg.LinAlgError):
        solve_positive_definite(np.array([[1.0, 2], [2, 1]]), np.ones(2))


def _problems():
    """(A, b) pairs: over- and underdetermined, with and without binding constraints, and
    degenerate ones (b = 0, b in the negative cone, zero, duplicate and dependent columns)."""
    rng = np.random.default_rng(5)
    for m, n in [(10, 4), (30, 12), (6, 6), (5, 12), (7, 182), (40, 40)]:
        for _ in range(5):
            a = rng.standard_normal((m, n))
            yield a, rng.standard_normal(m)
            yield a, a @ np.where(rng.random(n) < 0.5, rng.uniform(0.1, 2, n), 0.0) + 0.01 * rng.standard_normal(m)
    a = rng.standard_normal((12, 5))
    yield a, np.zeros(12)
    yield a, -a @ rng.uniform(0.5, 1, 5)  # every coefficient at its bound
    with_zero = a.copy()
    with_zero[:, 2] = 0.0
    yield with_zero, rng.standard_normal(12)
    duplicated = np.hstack([a, a[:, :2]])
    yield duplicated, duplicated @ rng.uniform(0.5, 1, 7)
    dependent = np.hstack([a, a[:, :3] @ rng.uniform(0.2, 1, (3, 2))])
    yield dependent, dependent @ rng.uniform(0.5, 1, 7) + 0.01 * rng.standard_normal(12)
    yield np.abs(a), np.abs(a) @ np.ones(5)  # all coefficients free
    yield np.ones((4, 3)), np.array([1.0, 2, 3, 4])


PROBLEMS = list(_problems())


@pytest.mark.parametrize("index", range(len(PROBLEMS)))
def test_nonnegative_least_squares_equals_scipy_nnls(index):
    a, b = PROBLEMS[index]
    theirs, _ = scipy.optimize.nnls(a, b, maxiter=50 * a.shape[1])
    ours = nonnegative_least_squares(a, b, maxiter=50 * a.shape[1])
    assert np.all(ours >= 0)
    scale = max(1.0, np.abs(theirs).max())
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(np.linalg.norm(a @ ours - b), np.linalg.norm(a @ theirs - b), rtol=1e-12, atol=1e-13)
    _assert_optimal(a, b, ours)


def _assert_optimal(a, b, x):
    """The Kuhn-Tucker conditions of NNLS (Lawson & Hanson 1974, ch. 23): the dual w = Aᵀ(b − Ax)
    is 0 where x > 0 and ≤ 0 where x = 0."""
    dual = a.T @ (b - a @ x)
    tolerance = 1e-10 * max(1.0, np.abs(a).max() * np.abs(b).max())
    assert np.all(x >= 0) and np.all(dual <= tolerance)
    assert np.all(np.abs(dual[x > 0]) <= tolerance)


def test_nonnegative_least_squares_is_optimal_on_rank_deficient_problems():
    """Rank 14 of 31 columns, where the independence test decides: the optimality conditions
    hold and the residual is scipy's bounded-variable least squares' (BVLS)."""
    for seed in range(20):
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((20, 14)) @ rng.standard_normal((14, 31))
        b = rng.standard_normal(20)
        ours = nonnegative_least_squares(a, b, maxiter=50 * 31)
        _assert_optimal(a, b, ours)
        bounded = scipy.optimize.lsq_linear(a, b, bounds=(0, np.inf), method="bvls", tol=1e-14)
        np.testing.assert_allclose(np.linalg.norm(a @ ours - b), np.linalg.norm(a @ bounded.x - b), rtol=1e-10)


def test_nonnegative_least_squares_counts_iterations_as_scipy():
    """maxiter limits the inner loop's passes: both give up (RuntimeError) below the same count."""
    rng = np.random.default_rng(6)
    a = rng.standard_normal((30, 20))
    b = rng.standard_normal(30)
    outcomes = []
    for maxiter in range(1, 40):
        results = []
        for solve in (scipy.optimize.nnls, nonnegative_least_squares):
            try:
                solve(a, b, maxiter=maxiter)
                results.append(True)
            except RuntimeError:
                results.append(False)
        outcomes.append(results)
    assert all(ours == theirs for theirs, ours in outcomes)
    assert [theirs for theirs, _ in outcomes].count(False) > 1  # the limit was reached at low counts
    # the default limit, 3n, as scipy's
    np.testing.assert_allclose(nonnegative_least_squares(a, b), scipy.optimize.nnls(a, b)[0], atol=1e-10)


def test_nonnegative_least_squares_refuses_bad_input():
    with pytest.raises(ValueError, match="right-hand side"):
        nonnegative_least_squares(np.ones((3, 2)), np.ones(2))
    with pytest.raises(ValueError, match="finite"):
        nonnegative_least_squares(np.array([[np.nan, 1.0]]), np.ones(1))
