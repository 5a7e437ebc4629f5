"""CPU backend of CSD and MSMT-CSD: numba ``prange`` loops over voxels around the per-voxel
solvers of :mod:`gpu.fod.solver_math`.

Each voxel's arithmetic is sequential and independent of the thread that runs it, so a
result is the same bytes on every run and any number of cores. The loops run through
:func:`gpu.cpu_parallel.run_parallel_loop`.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from gpu.cuda.compile_notice import announce_compile, is_compiled
from gpu.cpu_parallel import run_parallel_loop
from gpu.fod.csd_problem import CsdProblem
from gpu.fod.msmt_problem import MsmtProblem
from gpu.fod.solver_math import csd_voxel, icls_voxel

__all__ = ["msmt_csd_cpu", "csd_cpu"]

# Voxels per work item: each item allocates its work arrays once.
_BATCH = 32


@njit(parallel=True, cache=True)
def _msmt_loop(signals, project, B, Bt, L, lambda_min_norm, max_iterations, out, niter):
    n_vox = signals.shape[0]
    n = project.shape[0]
    m = B.shape[0]
    n_batches = (n_vox + _BATCH - 1) // _BATCH
    for batch in prange(n_batches):
        y_u = np.empty(n)
        c_u = np.empty(m)
        c = np.empty(m)
        lam_prev = np.empty(m)
        l = np.empty(m)
        active = np.empty(m, np.int32)
        rows = np.empty(m, np.int32)
        low = np.empty((m, m))
        for v in range(batch * _BATCH, min(n_vox, (batch + 1) * _BATCH)):
            niter[v] = icls_voxel(signals[v], project, B, Bt, L, lambda_min_norm, max_iterations, out[v],
                                  y_u, c_u, c, lam_prev, active, rows, l, low)


@njit(parallel=True, cache=True)
def _csd_loop(signals, init, Q, QtQ, P, Pt, threshold, max_iterations, out, niter):
    n_vox = signals.shape[0]
    n = Q.shape[0]
    nf = Q.shape[1]
    nk = P.shape[0]
    n_batches = (n_vox + _BATCH - 1) // _BATCH
    for batch in prange(n_batches):
        data = np.empty(n)
        qtb = np.empty(nf)
        negative = np.empty(nk, np.int32)
        was_negative = np.zeros(nk, np.int32)
        amplitudes = np.empty(nk)
        work = np.empty((nf, nf))
        for v in range(batch * _BATCH, min(n_vox, (batch + 1) * _BATCH)):
            niter[v] = csd_voxel(signals[v], init, Q, QtQ, P, Pt, threshold, max_iterations, out[v],
                                 data, qtb, negative, was_negative, amplitudes, work)


def _run(what: str, loop, signals: np.ndarray, n_coeffs: int, *args) -> tuple[np.ndarray, np.ndarray]:
    signals = np.ascontiguousarray(signals, np.float64)
    out = np.empty((signals.shape[0], n_coeffs))
    niter = np.empty(signals.shape[0], np.int32)
    args = (signals, *args, out, niter)
    if not is_compiled(loop, args):
        announce_compile(f"the {what} CPU loop", None)
    run_parallel_loop(loop, *args)
    return out, niter


def msmt_csd_cpu(problem: MsmtProblem, signals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Solve every voxel's MSMT-CSD problem.

    Parameters
    ----------
    problem : MsmtProblem
    signals : ndarray, shape (n_voxels, n_volumes)

    Returns
    -------
    x : ndarray, shape (n_voxels, N), float64
        The tissues' SH coefficients side by side.
    niter : ndarray, shape (n_voxels,), int32
    """
    return _run("MSMT-CSD", _msmt_loop, signals, problem.H.shape[1], problem.project, problem.B,
                np.ascontiguousarray(problem.B.T), np.ascontiguousarray(problem.L), problem.constraint_norm_lambda,
                problem.max_iterations)


def csd_cpu(problem: CsdProblem, signals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Solve every voxel's CSD problem.

    Parameters
    ----------
    problem : CsdProblem
    signals : ndarray, shape (n_voxels, n)
        The values of ``problem.volumes``.

    Returns
    -------
    f : ndarray, shape (n_voxels, N), float64
    niter : ndarray, shape (n_voxels,), int32
    """
    return _run("CSD", _csd_loop, signals, problem.Q.shape[1], problem.init, problem.Q, np.ascontiguousarray(problem.QtQ),
                problem.P, np.ascontiguousarray(problem.P.T), problem.threshold, problem.max_iterations)
