"""CUDA backend of CSD and MSMT-CSD: one thread per voxel (a grid-stride loop) running the
per-voxel solvers of :mod:`gpu.fod.solver_math`, the CPU backend's code, in float64.

Each thread's work arrays are slices of device arrays sized for the launched threads, not
for the voxels (the active constraints' Cholesky factor alone is (M, M) float64), with the
thread index last, so that neighbouring threads touching the same entry of their own
arrays touch neighbouring addresses (coalesced loads).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from gpu.fod.csd_problem import CsdProblem
from gpu.fod.msmt_problem import MsmtProblem
from gpu.fod.solver_math import csd_voxel, icls_voxel

__all__ = ["msmt_csd_cuda", "csd_cuda"]

THREADS_PER_BLOCK = 64
# Threads launched at most: their work arrays (MSMT: about (M + 8) M float64 each) stay
# within a few GiB.
MAX_THREADS = 4096


@cuda.jit(cache=True)
def _msmt_kernel(signals, project, B, L, lambda_min_norm, max_iterations, out, niter,
                 y_u, c_u, c, lam_prev, l, active, rows, low):
    t = cuda.grid(1)
    v = t
    while v < signals.shape[0]:
        niter[v] = icls_voxel(signals[v], project, B, L, lambda_min_norm, max_iterations, out[v],
                              y_u[:, t], c_u[:, t], c[:, t], lam_prev[:, t], active[:, t], rows[:, t], l[:, t],
                              low[:, :, t])
        v += cuda.gridsize(1)


@cuda.jit(cache=True)
def _csd_kernel(signals, init, Q, QtQ, P, threshold, max_iterations, out, niter,
                data, qtb, negative, was_negative, work):
    t = cuda.grid(1)
    v = t
    while v < signals.shape[0]:
        niter[v] = csd_voxel(signals[v], init, Q, QtQ, P, threshold, max_iterations, out[v],
                             data[:, t], qtb[:, t], negative[:, t], was_negative[:, t], work[:, :, t])
        v += cuda.gridsize(1)


def _launch_shape(n_voxels: int, threads_per_block: int, max_threads: int) -> tuple[int, int]:
    threads = max(1, min(n_voxels, max_threads))
    blocks = -(-threads // threads_per_block)
    return blocks, blocks * threads_per_block


def msmt_csd_cuda(problem: MsmtProblem, signals: np.ndarray, threads_per_block: int = THREADS_PER_BLOCK,
                  max_threads: int = MAX_THREADS) -> tuple[np.ndarray, np.ndarray]:
    """:func:`gpu.fod.backend_cpu.msmt_csd_cpu` on the GPU: the same arrays in and out."""
    signals = np.ascontiguousarray(signals, np.float64)
    n_vox = signals.shape[0]
    n, m = problem.H.shape[1], problem.B.shape[0]
    blocks, threads = _launch_shape(n_vox, threads_per_block, max_threads)
    out = cuda.device_array((n_vox, n))
    niter = cuda.device_array(n_vox, np.int32)
    work = [cuda.device_array((n, threads))] + [cuda.device_array((m, threads)) for _ in range(4)]
    work += [cuda.device_array((m, threads), np.int32) for _ in range(2)] + [cuda.device_array((m, m, threads))]
    _msmt_kernel[blocks, threads_per_block](
        cuda.to_device(signals), cuda.to_device(problem.project), cuda.to_device(problem.B),
        cuda.to_device(np.ascontiguousarray(problem.L)), problem.constraint_norm_lambda, problem.max_iterations,
        out, niter, *work)
    return out.copy_to_host(), niter.copy_to_host()


def csd_cuda(problem: CsdProblem, signals: np.ndarray, threads_per_block: int = THREADS_PER_BLOCK,
             max_threads: int = MAX_THREADS) -> tuple[np.ndarray, np.ndarray]:
    """:func:`gpu.fod.backend_cpu.csd_cpu` on the GPU: the same arrays in and out."""
    signals = np.ascontiguousarray(signals, np.float64)
    n_vox = signals.shape[0]
    n, nf, nk = problem.Q.shape[0], problem.Q.shape[1], problem.P.shape[0]
    blocks, threads = _launch_shape(n_vox, threads_per_block, max_threads)
    out = cuda.device_array((n_vox, nf))
    niter = cuda.device_array(n_vox, np.int32)
    work = [cuda.device_array((n, threads)), cuda.device_array((nf, threads)),
            cuda.device_array((nk, threads), np.int32), cuda.to_device(np.zeros((nk, threads), np.int32)),
            cuda.device_array((nf, nf, threads))]
    _csd_kernel[blocks, threads_per_block](
        cuda.to_device(signals), cuda.to_device(problem.init), cuda.to_device(problem.Q),
        cuda.to_device(np.ascontiguousarray(problem.QtQ)), cuda.to_device(problem.P), problem.threshold,
        problem.max_iterations, out, niter, *work)
    return out.copy_to_host(), niter.copy_to_host()
