"""The CUDA kernels (numba's simulator) against the CPU backend, voxel by voxel: the same
iteration counts and, per voxel, a relative L2 difference of at most 1e-10 (the kernel
keeps the inverse of the CPU's factor and sums some terms in another order); voxels the
kernel leaves to the CPU; the MSMT-CSD kernel's inverse factor against the Gram matrix."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, float64, int32, uint64
from scipy.optimize import nnls

from gpu.fod import backend_cpu, backend_cuda, kernel_layout
from gpu.fod import kernels_cuda as kc
from gpu.fod.csd_problem import csd_problem
from gpu.fod.kernel_layout import REDO
from gpu.fod.msmt_problem import msmt_problem
from gpu.fod.phantom import dwi_phantom, shell_scheme
from tests.gpu.fod.test_solvers import CSF, GM, WM, nonnegative_problem


def _assert_matches_cpu(ours: tuple[np.ndarray, np.ndarray], cpu: tuple[np.ndarray, np.ndarray]) -> None:
    (x, niter), (x_cpu, niter_cpu) = ours, cpu
    np.testing.assert_array_equal(niter, niter_cpu)
    finite = np.isfinite(x_cpu).all(axis=1)
    np.testing.assert_array_equal(x[~finite], x_cpu[~finite])
    scale = np.linalg.norm(x_cpu[finite], axis=1)
    error = np.linalg.norm(x[finite] - x_cpu[finite], axis=1)
    assert (error <= 1e-10 * scale).all(), error / scale


@pytest.fixture(scope="module")
def tiny():
    """Two voxels of a two-shell phantom and a third with a NaN, lmax 2: small enough for the simulator."""
    bvals, bvecs = shell_scheme(2, ((1000, 12), (2500, 15)), seed=1)
    phantom = dwi_phantom((2, 1, 1), bvals, bvecs, snr=30.0, seed=4)
    signals = phantom["dwi"].reshape(-1, bvals.size).astype(np.float64)
    broken = signals[0].copy()
    broken[3] = np.nan
    return bvals, bvecs, np.vstack([signals, broken])


@pytest.mark.parametrize("tissues", [(WM, GM, CSF), (WM, CSF)], ids=["three tissues", "WM and CSF"])
def test_cuda_msmt_matches_cpu(tiny, tissues):
    bvals, bvecs, signals = tiny
    problem = msmt_problem(bvals, bvecs, list(tissues), lmax=[2] + [0] * (len(tissues) - 1))
    cpu = backend_cpu.msmt_csd_cpu(problem, signals)
    ours = backend_cuda.msmt_csd_cuda(problem, signals)
    # WM and CSF leave one voxel's unconstrained solution feasible (no iteration): the other works
    assert (cpu[1][:2] > 5).sum() >= len(tissues) - 1 and np.isnan(cpu[0][2]).all()
    _assert_matches_cpu(ours, cpu)
    # chunks of two voxels share one scratch for B y_u: the second chunk's voxel must not see the first's
    _assert_matches_cpu(backend_cuda.msmt_csd_cuda(problem, signals[::-1].copy(), chunk_voxels=2),
                        backend_cpu.msmt_csd_cpu(problem, signals[::-1].copy()))


def test_cuda_kernels_read_float32_signals_as_their_float64_values(tiny):
    """A DWI read as float32 goes to the GPU as float32 (half the copy): the kernels widen each
    value exactly, so the results are those of the same values in float64, bit for bit."""
    bvals, bvecs, signals = tiny
    narrow = signals.astype(np.float32)
    problem = msmt_problem(bvals, bvecs, [WM, GM, CSF], lmax=[2, 0, 0])
    wide = backend_cuda.msmt_csd_cuda(problem, narrow.astype(np.float64))
    for ours, theirs in zip(backend_cuda.msmt_csd_cuda(problem, narrow), wide):
        np.testing.assert_array_equal(ours, theirs)
    csd = csd_problem(bvals, bvecs, WM[-1], lmax=2)
    wide = backend_cuda.csd_cuda(csd, narrow[:, csd.volumes].astype(np.float64))
    for ours, theirs in zip(backend_cuda.csd_cuda(csd, narrow[:, csd.volumes]), wide):
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("stored, backend, sent", [(np.float32, "cuda", np.float32), (np.int16, "cuda", np.float32),
                                                   (np.float64, "cuda", np.float64), (np.float32, "cpu", np.float64)])
def test_signals_go_to_the_gpu_as_float32_only_where_that_holds_the_dwi_exactly(stored, backend, sent):
    from gpu.fod.deconvolution import _voxels

    dwi = (np.arange(2 * 3 * 2 * 5).reshape(2, 3, 2, 5) * 7 + 1).astype(stored)
    mask = np.zeros((2, 3, 2), bool)
    mask[1, 2, 0] = mask[0, 1, 1] = True
    index, signals, order = _voxels(np.asfortranarray(dwi), 5, mask, backend)
    assert signals.dtype == sent and order == "F"
    np.testing.assert_array_equal(signals, dwi.reshape(-1, 5, order="F")[index])


def test_cuda_icls_with_removals_matches_cpu_and_nnls():
    """Non-negative least squares (A = I) with correlated columns: constraints join and leave
    the active set (a row joins each iteration but the last, so the rows that left are the
    iterations less one less those active at the end)."""
    rng = np.random.default_rng(2)
    H = rng.standard_normal((40, 12))
    H[:, 6:] = H[:, :6] + 0.3 * rng.standard_normal((40, 6))
    signals = rng.standard_normal((4, 40)) * 3 + H @ rng.uniform(-1, 1, 12)
    problem = nonnegative_problem(H)
    cpu = backend_cpu.msmt_csd_cpu(problem, signals)
    active = (np.abs(cpu[0]) < 1e-12).sum(axis=1)
    assert (cpu[1] - 1 - active).tolist() == [0, 1, 0, 2]
    np.testing.assert_allclose(cpu[0], [nnls(H, s)[0] for s in signals], atol=1e-10)
    _assert_matches_cpu(backend_cuda.msmt_csd_cuda(problem, signals), cpu)


def test_cuda_msmt_voxel_beyond_the_active_set_cap_is_solved_on_the_cpu(monkeypatch):
    rng = np.random.default_rng(1)
    H = rng.standard_normal((30, 8))
    truth = rng.uniform(0.5, 2.0, (2, 8))
    truth[1, :5] = -1.0
    signals = truth @ H.T
    problem = nonnegative_problem(H)
    cpu = backend_cpu.msmt_csd_cpu(problem, signals)
    given = []

    def spy(problem, signals):
        given.append(signals.copy())
        return cpu_solver(problem, signals)

    cpu_solver = backend_cpu.msmt_csd_cpu
    monkeypatch.setattr(backend_cpu, "msmt_csd_cpu", spy)
    ours = backend_cuda.msmt_csd_cuda(problem, signals, k_max=3)
    # no constraint active in voxel 0; at least four at voxel 1's solution, beyond the cap of 3
    assert cpu[1][0] == 0 and (np.abs(cpu[0][1]) < 1e-12).sum() >= 4
    assert len(given) == 1
    np.testing.assert_array_equal(given[0], signals[1:])
    _assert_matches_cpu(ours, cpu)
    assert REDO not in ours[1]


def test_cuda_csd_matches_cpu_in_chunks(tiny):
    bvals, bvecs, signals = tiny
    problem = csd_problem(bvals, bvecs, WM[2], lmax=4)
    signals = signals[:, problem.volumes]
    signals[1, :3] = -5.0  # clamped to 0
    signals[2, 0] = np.inf
    cpu = backend_cpu.csd_cpu(problem, signals)
    ours = backend_cuda.csd_cuda(problem, signals, chunk_voxels=2)
    assert cpu[1][2] == -1 and (cpu[1][:2] > 1).all()
    _assert_matches_cpu(ours, cpu)


def test_cuda_problem_beyond_shared_memory_is_refused(tiny, monkeypatch):
    bvals, bvecs, signals = tiny
    problem = msmt_problem(bvals, bvecs, [WM, GM, CSF], lmax=[2, 0, 0])
    needed = kernel_layout.msmt_shared_bytes(problem.H.shape[1], backend_cuda.K_MAX)
    monkeypatch.setattr(kernel_layout, "MAX_SHARED_BYTES", needed - 8)
    with pytest.raises(ValueError, match="shared memory .* use the CPU backend"):
        backend_cuda.msmt_csd_cuda(problem, signals)


_JOINS = 6
_PACKED = _JOINS * (_JOINS + 3) // 2


@cuda.jit
def _inverse_factor_kernel(G, c_u, order, p, lam, li_out, u_out, l_out, rows_out):
    """The rows of ``order`` join the MSMT-CSD kernel's inverse factor one by one, then
    position p leaves; writes L⁻¹ (full), u, the multipliers and the rows."""
    t = uint64(cuda.threadIdx.x)
    li = cuda.shared.array(_PACKED, float64)
    lp = cuda.shared.array(_JOINS, float64)
    cua = cuda.shared.array(_JOINS, float64)
    u = cuda.shared.array(_JOINS, float64)
    work = cuda.shared.array(32, float64)
    aux = cuda.shared.array(64, float64)
    rows = cuda.shared.array(_JOINS, int32)
    tmp = cuda.shared.array(32, int32)
    off0 = kc._off(t)
    off1 = kc._off(t + uint64(32))
    k = uint64(0)
    while k < uint64(order.shape[0]):
        r = uint64(order[k])
        kc._append_row(G, rows, lp, cua, u, li, aux, work, work, k, r, c_u[r], lam, t, off0, off1)
        k += uint64(1)
        if t < k:
            lp[t] = work[t]
        cuda.syncthreads()
    kc._remove_row(rows, lp, cua, u, work, li, aux, work, aux, tmp, k, uint64(p), t, off0, off1)
    k -= uint64(1)
    if t < k:
        u_out[t] = u[t]
        l_out[t] = work[t]
        rows_out[t] = rows[t]
        i = uint64(0)
        while i <= t:
            li_out[t, i] = li[off0 + i]
            i += uint64(1)


@pytest.mark.parametrize("p", range(_JOINS))
def test_inverse_factor_after_a_row_leaves_matches_the_gram_matrix(p):
    """Rows joining and one leaving at any position (the last too, which the phantoms rarely
    take): L⁻¹ is the inverse of a Cholesky factor of the remaining rows' G + λI (up to the
    signs of its rows), u = L⁻¹ c_u and the multipliers −(G + λI)⁻¹ c_u."""
    rng = np.random.default_rng(p)
    B = rng.standard_normal((10, 7))
    B /= np.linalg.norm(B, axis=1, keepdims=True)
    mp = kernel_layout.padded_rows(10)
    G = np.zeros((10, mp))
    G[:, :10] = B @ B.T
    c_u = rng.standard_normal(10)
    order = np.array([3, 7, 1, 9, 5, 0], np.int32)
    lam = 1e-10
    k = _JOINS - 1
    li, u, l, rows = np.zeros((k, k)), np.zeros(k), np.zeros(k), np.zeros(k, np.int32)
    _inverse_factor_kernel[1, 32](G, c_u, order, p, lam, li, u, l, rows)
    kept = np.delete(order, p)
    np.testing.assert_array_equal(rows, kept)
    gram = G[np.ix_(kept, kept)] + lam * np.eye(k)
    np.testing.assert_allclose(li.T @ li, np.linalg.inv(gram), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(li @ gram @ li.T, np.eye(k), atol=1e-10)
    np.testing.assert_allclose(u, li @ c_u[kept], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(l, -np.linalg.solve(gram, c_u[kept]), rtol=1e-9, atol=1e-10)
