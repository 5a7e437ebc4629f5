"""The interior-point Newton systems' kernel (bench/fod_newton.py) in the CUDA simulator
against float64 LAPACK."""

import numpy as np

from bench.fod_newton import (factor_kernel, newton_matrices, packed_products, shared_bytes, solve_kernel,
                              solve_newton_systems, triangle_places)
from gpu.fod.msmt_problem import msmt_problem
from gpu.fod.phantom import shell_scheme, tissue_responses


def test_newton_kernel_solves_the_msmt_newton_systems_as_lapack():
    bvals, bvecs = shell_scheme(3, ((1000, 30), (2000, 30)))
    # N = 47: rows past a warp's first 32 too
    B = msmt_problem(bvals, bvecs, tissue_responses([0, 1000, 2000]), lmax=(8, 0, 0)).B
    rng = np.random.default_rng(1)
    d = 10.0 ** rng.uniform(-4, 4, (3, B.shape[0]))
    packed = newton_matrices(d, packed_products(B))
    rhs = rng.standard_normal((3, 2, B.shape[1]))
    out = np.empty_like(rhs)
    solve_newton_systems(packed, rhs, out)
    for v in range(3):
        full = np.eye(B.shape[1]) + B.T @ (d[v][:, None] * B)
        np.testing.assert_allclose(out[v], np.linalg.solve(full, rhs[v].T).T, rtol=1e-9, atol=1e-12)


def test_a_kept_factor_solves_later_right_hand_sides_alike():
    """factor_kernel writes the factor newton_kernel uses; solve_kernel then gives its solutions."""
    rng = np.random.default_rng(2)
    n = 37
    m = rng.standard_normal((2, n, n))
    full = m @ m.transpose(0, 2, 1) + n * np.eye(n)
    rows, columns = np.tril_indices(n)
    packed = full[:, rows, columns].copy()
    rhs = rng.standard_normal((2, 3, n))
    expected = np.empty_like(rhs)
    solve_newton_systems(packed.copy(), rhs, expected)
    rdiags = np.empty((2, n + 3))
    factor_kernel[2, 32, 0, shared_bytes(n)](packed, rdiags, triangle_places(n))
    np.testing.assert_allclose(np.tril(_full(packed, n)) @ np.tril(_full(packed, n)).transpose(0, 2, 1), full,
                               rtol=1e-12)
    out = np.empty_like(rhs)
    solve_kernel[2, 32, 0, shared_bytes(n)](packed, rdiags, rhs, out)
    np.testing.assert_array_equal(out, expected)


def _full(packed, n):
    rows, columns = np.tril_indices(n)
    lower = np.zeros((packed.shape[0], n, n))
    lower[:, rows, columns] = packed
    return lower
