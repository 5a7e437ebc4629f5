"""bench/fod_ipm_gpu.py's interior point (its kernels in numba's simulator, numpy arrays)
against the numpy reference of bench/fod_ipm_start.py: the same iterates to rounding, the
same start sets."""

import numpy as np

from bench.fod_ipm_gpu import interior_point_gpu
from bench.fod_ipm_start import interior_point, start_rows
from gpu.fod import dwi_phantom, shell_scheme, tissue_responses
from gpu.fod.msmt_problem import msmt_problem


def test_the_gpu_steps_are_the_references():
    bvals, bvecs = shell_scheme(3, ((1000, 30), (2000, 30)))
    signals = dwi_phantom((3, 3, 1), bvals, bvecs, snr=20.0, seed=4)["dwi"].reshape(-1, bvals.size)[::3]
    problem = msmt_problem(bvals, bvecs, tissue_responses([0, 1000, 2000]))
    y_u = signals.astype(np.float64) @ problem.project.T
    s, z = interior_point_gpu(problem.B, y_u, 14, xp=np)
    s_ref, z_ref = interior_point(problem.B, y_u, 14)
    np.testing.assert_allclose(s, s_ref, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(z, z_ref, rtol=1e-6, atol=1e-12)
    n = problem.B.shape[1]
    assert [start_rows(s[v], z[v], n - 1) for v in range(len(s))] == [
        start_rows(s_ref[v], z_ref[v], n - 1) for v in range(len(s))]
