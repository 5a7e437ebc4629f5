"""The per-voxel solvers against float64 references (scipy's NNLS, the unconstrained
least-squares solution); the CUDA kernels against them: test_kernels_cuda.py."""

from __future__ import annotations

import numpy as np
from scipy.optimize import nnls

from gpu.fod import backend_cpu
from gpu.fod.csd_problem import csd_problem
from gpu.fod.msmt_problem import MsmtProblem, msmt_problem
from gpu.fod.phantom import dwi_phantom, shell_scheme
from tests.gpu.fod.blas_threads import outputs_by_blas_threads

# Responses of a prolate-tensor fibre, grey matter and CSF (zonal SH per shell: b=0, 1000, 2500).
WM = np.array([[1000.0, 0, 0], [480, -210, 55], [240, -160, 70]])
GM = np.array([[1200.0], [520], [160]])
CSF = np.array([[2000.0], [110], [4]])


def nonnegative_problem(H: np.ndarray) -> MsmtProblem:
    """min ‖Hx − b‖ subject to x ≥ 0, built as :func:`gpu.fod.msmt_problem.msmt_problem` builds its own."""
    L = np.linalg.cholesky(H.T @ H)
    project = np.linalg.solve(L, H.T)
    Bt = np.linalg.solve(L, np.eye(H.shape[1]))
    B = Bt.T / np.linalg.norm(Bt, axis=0)[:, None]
    return MsmtProblem((0,) * H.shape[1], H, np.eye(H.shape[1]), project, np.ascontiguousarray(B), L, 0.0,
                       10 * H.shape[1])


def test_icls_solves_nonnegative_least_squares():
    """With A = I the problem is NNLS, which scipy solves by Lawson–Hanson."""
    rng = np.random.default_rng(0)
    H = rng.standard_normal((40, 12))
    signals = rng.standard_normal((50, 40)) * 3 + H @ rng.uniform(-1, 1, 12)
    x, niter = backend_cpu.msmt_csd_cpu(nonnegative_problem(H), signals)
    reference = np.array([nnls(H, s)[0] for s in signals])
    assert (niter <= 120).all() and (reference == 0).any()
    np.testing.assert_allclose(x, reference, atol=1e-10)


def test_icls_leaves_feasible_solutions_unconstrained():
    rng = np.random.default_rng(1)
    H = rng.standard_normal((30, 8))
    truth = rng.uniform(0.5, 2.0, (20, 8))
    x, niter = backend_cpu.msmt_csd_cpu(nonnegative_problem(H), truth @ H.T)
    assert (niter == 0).all()
    np.testing.assert_allclose(x, truth, rtol=1e-10)


def test_msmt_solution_is_feasible_and_recovers_tissue_fractions():
    bvals, bvecs = shell_scheme(3, ((1000, 30), (2500, 45)), seed=2)
    phantom = dwi_phantom((6, 3, 1), bvals, bvecs, snr=None, seed=3)
    problem = msmt_problem(bvals, bvecs, [WM, GM, CSF], lmax=[4, 0, 0])
    x, _ = backend_cpu.msmt_csd_cpu(problem, phantom["dwi"].reshape(-1, bvals.size))
    assert (x @ problem.A.T >= -1e-9 * np.abs(x).max()).all()


def test_csd_non_finite_voxels_are_zero_and_negative_values_clamp():
    bvals, bvecs = shell_scheme(2, ((2500, 45),), seed=4)
    problem = csd_problem(bvals, bvecs, WM[2], lmax=6)
    signals = dwi_phantom((3, 1, 1), bvals, bvecs, snr=None, seed=5)["dwi"].reshape(3, -1)[:, problem.volumes]
    signals = signals.astype(np.float64)
    signals[1, 3] = np.nan
    clamped = signals[2].copy()
    signals[2, :5] = -7.0
    clamped[:5] = 0.0
    f, niter = backend_cpu.csd_cpu(problem, signals)
    assert niter[1] == -1 and (f[1] == 0).all()
    np.testing.assert_array_equal(f[2], backend_cpu.csd_cpu(problem, clamped[None])[0][0])


def test_csd_without_iterations_is_the_filtered_linear_deconvolution():
    """``-niter 0``: the initial estimate alone (Tournier et al. 2007, Eq. 2 with its filter)."""
    bvals, bvecs = shell_scheme(2, ((2500, 45),), seed=6)
    problem = csd_problem(bvals, bvecs, WM[2], lmax=6, niter=0)
    signals = np.random.default_rng(7).uniform(100, 400, (4, problem.volumes.size))
    f, _ = backend_cpu.csd_cpu(problem, signals)
    expected = np.zeros_like(f)
    expected[:, : problem.init.shape[0]] = signals @ problem.init.T
    np.testing.assert_allclose(f, expected, rtol=1e-12)


def test_constraint_gram_is_the_same_bytes_whatever_blas_threads():
    """G = B Bᵀ enters every MSMT-CSD iteration: its bytes must not depend on the process
    (batch workers run numpy's BLAS on fewer threads, and a BLAS product's rounding follows
    its thread count)."""
    code = ("import hashlib, numpy as np; from gpu.fod.msmt_problem import constraint_gram; "
            "B = np.random.default_rng(0).standard_normal((302, 47)); "
            "G = constraint_gram(B); assert np.allclose(G, B @ B.T, rtol=0, atol=1e-12); "
            "print(hashlib.sha256(G.tobytes()).hexdigest())")
    assert len(outputs_by_blas_threads(code)) == 1


def test_most_violated_row_is_the_first_lowest_as_a_scan_finds_it():
    """The four interleaved scans of ``_lowest_row`` answer what one scan in order does,
    ties (−0 against 0 too), infinities and NaN included, for every length up to 40."""
    import math

    from numba import njit

    from gpu.fod.solver_math import _lowest_row

    lowest_row = njit(lambda c, m: _lowest_row(c, m))

    def scan(c, m):
        lowest, worst = c[0], 0
        for r in range(1, m):
            if c[r] < lowest:
                lowest, worst = c[r], r
        return lowest, worst

    rng = np.random.default_rng(5)
    for m in range(1, 41):
        for _ in range(60):
            c = rng.integers(-3, 3, m).astype(float)
            for value, chance in ((np.nan, 0.3), (np.inf, 0.2), (-np.inf, 0.05), (-0.0, 0.2)):
                if rng.random() < chance:
                    c[rng.integers(0, m)] = value
            ours, theirs = lowest_row(c, m), scan(c, m)
            assert ours[1] == theirs[1], (c, ours, theirs)
            assert ours[0] == theirs[0] or (math.isnan(ours[0]) and math.isnan(theirs[0]))
