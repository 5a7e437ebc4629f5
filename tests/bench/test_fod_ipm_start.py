"""bench/fod_ipm_start.py's reference: its dual active-set method takes the CPU backend's
iterations to its FODs, and from the interior point's start it ends at the same FODs in a
few iterations."""

import numpy as np

from bench.fod_ipm_start import dual_active_set, interior_point, start_rows
from gpu.fod import dwi_phantom, shell_scheme, tissue_responses
from gpu.fod.backend_cpu import msmt_csd_cpu
from gpu.fod.msmt_problem import constraint_gram, msmt_problem


def test_the_interior_points_start_ends_where_the_cold_start_does():
    bvals, bvecs = shell_scheme(3, ((1000, 30), (2000, 30)))
    signals = dwi_phantom((9, 6, 2), bvals, bvecs, snr=20.0, seed=4)["dwi"].reshape(-1, bvals.size)
    signals = signals[::4].astype(np.float64)  # 27 voxels: WM of 1–3 fibres, GM, CSF
    problem = msmt_problem(bvals, bvecs, tissue_responses([0, 1000, 2000]))
    B, lam = problem.B, problem.constraint_norm_lambda
    G = constraint_gram(B)
    x, niter = msmt_csd_cpu(problem, signals)
    y_u = signals @ problem.project.T
    s, z = interior_point(B, y_u, 14)
    warm_iterations = []
    for v in range(len(signals)):
        c_u = B @ y_u[v]
        rows, l, iterations = dual_active_set(c_u, G, lam, [], problem.max_iterations)
        assert iterations == niter[v]
        cold = np.linalg.solve(problem.L.T, y_u[v] + B[rows].T @ l)
        np.testing.assert_allclose(cold, x[v], rtol=0, atol=1e-7 * np.linalg.norm(x[v]))
        rows, l, iterations = dual_active_set(c_u, G, lam, start_rows(s[v], z[v], B.shape[1] - 1),
                                              problem.max_iterations)
        warm = np.linalg.solve(problem.L.T, y_u[v] + B[rows].T @ l)
        np.testing.assert_allclose(warm, x[v], rtol=0, atol=1e-5 * np.linalg.norm(x[v]))
        warm_iterations.append(iterations)
    assert np.mean(warm_iterations) < 0.1 * np.mean(niter)
