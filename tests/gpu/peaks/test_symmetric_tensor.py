"""Symmetric tensors by unique entries (Ballard et al. Table I) and the exact SH → tensor map."""

from __future__ import annotations

import itertools
from math import factorial

import numpy as np
import pytest

from gpu.sh_basis import SH_BASES, SUPPORTED_LMAX, n_coeffs, real_sh_matrix
from gpu.peaks.symmetric_tensor import (
    index_classes,
    monomial_exponents,
    multiplicities,
    sh_to_tensor,
    sh_to_tensor_matrix,
    sphere_points,
    tensor_to_sh,
    tensor_value,
)


def unit_vectors(count: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(count, 3))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_index_classes_order_three_by_hand():
    # The m = 3, n = 3 analogue of Ballard, Kolda & Plantenga 2011, Table I (1-based there).
    by_hand_index = [
        (1, 1, 1), (1, 1, 2), (1, 1, 3), (1, 2, 2), (1, 2, 3),
        (1, 3, 3), (2, 2, 2), (2, 2, 3), (2, 3, 3), (3, 3, 3),
    ]
    by_hand_monomial = [
        (3, 0, 0), (2, 1, 0), (2, 0, 1), (1, 2, 0), (1, 1, 1),
        (1, 0, 2), (0, 3, 0), (0, 2, 1), (0, 1, 2), (0, 0, 3),
    ]
    by_hand_sigma = [1, 3, 3, 3, 6, 3, 1, 3, 3, 1]
    np.testing.assert_array_equal(index_classes(3) + 1, by_hand_index)
    np.testing.assert_array_equal(monomial_exponents(3), by_hand_monomial)
    np.testing.assert_array_equal(multiplicities(3), by_hand_sigma)


def test_index_classes_order_four_by_hand():
    # Table I itself is m = 4, n = 3: 15 classes, [1111] … [3333].
    np.testing.assert_array_equal(
        index_classes(4) + 1,
        [(1, 1, 1, 1), (1, 1, 1, 2), (1, 1, 1, 3), (1, 1, 2, 2), (1, 1, 2, 3), (1, 1, 3, 3), (1, 2, 2, 2),
         (1, 2, 2, 3), (1, 2, 3, 3), (1, 3, 3, 3), (2, 2, 2, 2), (2, 2, 2, 3), (2, 2, 3, 3), (2, 3, 3, 3),
         (3, 3, 3, 3)],
    )
    np.testing.assert_array_equal(multiplicities(4), [1, 4, 4, 6, 12, 6, 4, 12, 12, 4, 1, 4, 6, 4, 1])


@pytest.mark.parametrize("order", range(1, 13))
def test_index_classes_are_sorted_unique_and_complete(order):
    classes = index_classes(order)
    assert classes.shape == ((order + 1) * (order + 2) // 2, order)
    assert (np.diff(classes, axis=1) >= 0).all()
    as_tuples = [tuple(c) for c in classes]
    assert as_tuples == sorted(set(as_tuples))
    assert set(as_tuples) == {tuple(sorted(i)) for i in itertools.product(range(3), repeat=order)}
    # Lexicographic index order = decreasing monomial order.
    monomials = [tuple(k) for k in monomial_exponents(order)]
    assert monomials == sorted(monomials, reverse=True)
    assert (monomial_exponents(order).sum(axis=1) == order).all()


@pytest.mark.parametrize("order", range(1, 13))
def test_multiplicities_sum_to_three_to_the_m(order):
    sigma = multiplicities(order)
    assert int(sigma.sum()) == 3**order
    for (a, b, c), s in zip(monomial_exponents(order), sigma):
        assert s == factorial(order) // (factorial(a) * factorial(b) * factorial(c))


@pytest.mark.parametrize("basis", SH_BASES)
@pytest.mark.parametrize("lmax", SUPPORTED_LMAX)
def test_tensor_value_equals_sh_series(lmax, basis):
    rng = np.random.default_rng(lmax)
    d = unit_vectors(1000, 10 * lmax + len(basis))
    sh = real_sh_matrix(lmax, d, basis)
    for _ in range(3):
        coeffs = rng.normal(size=n_coeffs(lmax))
        expected = sh @ coeffs
        got = tensor_value(sh_to_tensor(coeffs, basis), d)
        relative = np.abs(got - expected).max() / np.abs(expected).max()
        assert relative < 1e-10, (lmax, basis, relative)


@pytest.mark.parametrize("basis", SH_BASES)
@pytest.mark.parametrize("lmax", SUPPORTED_LMAX)
def test_sh_to_tensor_matrix_equals_a_least_squares_fit(lmax, basis):
    """The closed form against the float64 least-squares fit of A x^L to the SH basis on
    well-spread points of the sphere (monomial rows σ(k)·x^k)."""
    points = sphere_points(8 * n_coeffs(lmax))
    monomials = np.prod(points[:, None, :] ** monomial_exponents(lmax)[None], axis=2) * multiplicities(lmax)
    fit, *_ = np.linalg.lstsq(monomials, real_sh_matrix(lmax, points, basis), rcond=None)
    matrix = sh_to_tensor_matrix(lmax, basis)
    np.testing.assert_allclose(matrix, fit, rtol=0, atol=1e-13 * np.abs(fit).max())
    assert np.count_nonzero(matrix) == np.count_nonzero(np.abs(fit) > 1e-12 * np.abs(fit).max())


@pytest.mark.parametrize("lmax", SUPPORTED_LMAX)
def test_tensor_value_equals_independent_monomial_sum(lmax):
    # Σ_k σ(k) a_k x^k written out here from the index classes, not through tensor_value.
    rng = np.random.default_rng(lmax)
    entries = rng.normal(size=n_coeffs(lmax))
    d = unit_vectors(50, lmax)
    expected = np.zeros(len(d))
    for cls, a in zip(index_classes(lmax), entries):
        sigma = factorial(lmax) / np.prod([factorial(int((cls == i).sum())) for i in range(3)])
        expected += sigma * a * np.prod(d[:, cls], axis=1)
    np.testing.assert_allclose(tensor_value(entries, d), expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


@pytest.mark.parametrize("lmax", [2, 4, 6])
def test_tensor_value_equals_full_tensor_contraction(lmax):
    rng = np.random.default_rng(lmax)
    entries = rng.normal(size=n_coeffs(lmax))
    lookup = {tuple(c): k for k, c in enumerate(index_classes(lmax))}
    full = np.empty((3,) * lmax)
    for index in itertools.product(range(3), repeat=lmax):
        full[index] = entries[lookup[tuple(sorted(index))]]
    for x in unit_vectors(20, lmax):
        value = full
        for _ in range(lmax):
            value = value @ x
        assert tensor_value(entries, x[None])[0] == pytest.approx(float(value), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("basis", SH_BASES)
@pytest.mark.parametrize("lmax", SUPPORTED_LMAX)
def test_tensor_to_sh_inverts_sh_to_tensor(lmax, basis):
    rng = np.random.default_rng(lmax)
    coeffs = rng.normal(size=(7, n_coeffs(lmax)))
    entries = sh_to_tensor(coeffs, basis)
    assert entries.shape == (7, n_coeffs(lmax)) and entries.dtype == np.float64
    np.testing.assert_allclose(tensor_to_sh(entries, basis), coeffs, rtol=0, atol=1e-10)
    back = sh_to_tensor(tensor_to_sh(entries, basis), basis)
    np.testing.assert_allclose(back, entries, rtol=0, atol=1e-10 * np.abs(entries).max())


@pytest.mark.parametrize("lmax", SUPPORTED_LMAX)
def test_sh_to_tensor_matrix_is_square_and_well_conditioned(lmax):
    matrix = sh_to_tensor_matrix(lmax, "mrtrix")
    assert matrix.shape == (n_coeffs(lmax), n_coeffs(lmax))
    assert not matrix.flags.writeable
    assert np.linalg.cond(matrix) < 1e8


def test_sh_to_tensor_keeps_shape_and_casts():
    coeffs = np.random.default_rng(0).normal(size=(2, 3, 4, 45)).astype(np.float32)
    entries = sh_to_tensor(coeffs, dtype=np.float32)
    assert entries.shape == (2, 3, 4, 45) and entries.dtype == np.float32
    np.testing.assert_allclose(entries, sh_to_tensor(coeffs.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_sh_to_tensor_rejects_invalid_counts():
    with pytest.raises(ValueError, match="has one of 6 \\(lmax 2\\)"):
        sh_to_tensor(np.zeros((3, 44)))


def test_sphere_points_are_unit_and_spread():
    points = sphere_points(500)
    np.testing.assert_allclose(np.linalg.norm(points, axis=1), 1.0, atol=1e-14)
    np.testing.assert_allclose(points.mean(axis=0), 0.0, atol=1e-2)
    # Nearest-neighbour angles of a Fibonacci lattice: all within a factor of ~2.
    cos = points @ points.T
    np.fill_diagonal(cos, -1)
    nearest = np.degrees(np.arccos(cos.max(axis=1)))
    assert nearest.max() < 2.0 * nearest.min()


@pytest.mark.parametrize("lmax", [2, 8, 12])
@pytest.mark.parametrize("basis", ["mrtrix", "dipy"])
def test_sh_to_tensor_rows_the_cuda_backend_keeps_are_the_matrix(lmax, basis):
    """The CUDA backend converts with the SH→tensor matrix's non-zero entries in compressed
    rows; what it drops is rounding residue of exact zeros, and what it keeps is the matrix."""
    from gpu.peaks.backend_cuda import _nonzero_rows

    sh2t = sh_to_tensor_matrix(lmax, basis)
    first, columns, values = _nonzero_rows(sh2t)
    rebuilt = np.zeros(sh2t.shape)
    for k in range(sh2t.shape[0]):
        assert np.all(np.diff(columns[first[k]:first[k + 1]]) > 0)
        rebuilt[k, columns[first[k]:first[k + 1]]] = values[first[k]:first[k + 1]]
    kept = rebuilt != 0
    np.testing.assert_array_equal(rebuilt[kept], sh2t.astype(np.float32)[kept])
    assert np.abs(sh2t[~kept]).max(initial=0) < 1e-13
