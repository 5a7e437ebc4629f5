"""The CSD and MSMT-CSD CPU loops: numba ``prange`` loops over voxels around the per-voxel
solvers of :mod:`gpu.fod.solver_math`.

Each voxel's arithmetic is sequential and independent of the thread that runs it, so a
result is the same bytes on every run, any number of cores and in the loops' ahead-of-time
build, which runs them on one thread (:mod:`gpu.fod.backend_cpu` picks one or the other).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from gpu.fod.solver_math import csd_voxel, icls_voxel

__all__ = ["msmt_loop", "csd_loop"]

# Voxels per work item: each item allocates its work arrays once.
_BATCH = 32


# nogil (both loops): their ahead-of-time builds run on several host threads
# (gpu.ahead_of_time.run_on_threads)
@njit(parallel=True, cache=True, nogil=True)
def msmt_loop(signals, project, B, Bt, G, L, lambda_min_norm, max_iterations, out, niter):
    """Solve each voxel's MSMT-CSD problem (:func:`gpu.fod.solver_math.icls_voxel`) into
    ``out`` (n_voxels, N) and its iterations into ``niter`` (n_voxels,)."""
    n_vox = signals.shape[0]
    n = project.shape[0]
    m = B.shape[0]
    n_batches = (n_vox + _BATCH - 1) // _BATCH
    for batch in prange(n_batches):
        y_u = np.empty(n)
        c_u = np.empty(m)
        c = np.empty(m)
        l = np.empty(m)
        lp = np.empty(m)
        u = np.empty(m)
        scratch = np.empty(2 * m)  # L⁻¹'s leaving column and its sums, or w as a row joins
        active = np.empty(m, np.int32)
        rows = np.empty(m, np.int32)
        li = np.empty((m, m + 2))
        for v in range(batch * _BATCH, min(n_vox, (batch + 1) * _BATCH)):
            niter[v] = icls_voxel(signals[v], project, B, Bt, G, L, lambda_min_norm, max_iterations, out[v],
                                  y_u, c_u, c, l, lp, u, scratch, active, rows, li)


@njit(parallel=True, cache=True, nogil=True)
def csd_loop(signals, init, Q, QtQ, P, Pt, threshold, max_iterations, out, niter):
    """Solve each voxel's CSD problem (:func:`gpu.fod.solver_math.csd_voxel`) into ``out``
    (n_voxels, N) and its iterations into ``niter`` (n_voxels,)."""
    n_vox = signals.shape[0]
    n = Q.shape[0]
    nf = Q.shape[1]
    nk = P.shape[0]
    n_batches = (n_vox + _BATCH - 1) // _BATCH
    for batch in prange(n_batches):
        data = np.empty(n)
        qtb = np.empty(nf)
        negative = np.empty(nk, np.int32)
        was_negative = np.empty(nk, np.int32)  # reset by csd_voxel
        amplitudes = np.empty(nk)
        normal = np.empty((nf, nf))
        work = np.empty((nf, nf))
        for v in range(batch * _BATCH, min(n_vox, (batch + 1) * _BATCH)):
            niter[v] = csd_voxel(signals[v], init, Q, QtQ, P, Pt, threshold, max_iterations, out[v],
                                 data, qtb, negative, was_negative, amplitudes, normal, work)
