"""How the CSD and MSMT-CSD kernels of :mod:`gpu.fod.kernels_cuda` are launched: threads a
block, the shared memory a block takes, and the ``niter`` of a voxel left to the CPU. Apart
from the kernels, so that a launch from cached cubins (:mod:`gpu.fod.backend_cuda`) needs no
numba."""

from __future__ import annotations

__all__ = ["THREADS", "REDO", "MAX_SHARED_BYTES", "ROWS_A_THREAD", "padded_rows", "msmt_shared_bytes",
           "csd_shared_bytes"]

#: Threads of a block: one warp, one voxel.
THREADS = 32
#: ``niter`` of a voxel the CUDA kernel leaves to the CPU backend.
REDO = -2
#: Dynamic shared memory a block may take without opting in to more.
MAX_SHARED_BYTES = 48 * 1024
#: MSMT-CSD constraint rows a thread evaluates in one pass over the unknowns.
ROWS_A_THREAD = 10


def padded_rows(m: int) -> int:
    """Columns of the MSMT-CSD kernel's Bᵀ and G = B Bᵀ for M constraint rows: whole passes
    of ``ROWS_A_THREAD`` rows a thread (the columns past M are zero)."""
    per_pass = ROWS_A_THREAD * THREADS
    return -(-m // per_pass) * per_pass


def _packed_size(k: int) -> int:
    return k * (k + 3) // 2


def msmt_shared_bytes(n: int, k_max: int) -> int:
    """Shared memory of :func:`gpu.fod.kernels_cuda.msmt_kernel` for N unknowns and ``k_max``
    active rows."""
    doubles = n + 3 * k_max + 2 * max(k_max, THREADS) + _packed_size(k_max)
    ints = k_max + max(k_max, THREADS)
    return 8 * doubles + 4 * ints


def csd_shared_bytes(n: int, nf: int, nk: int) -> int:
    """Shared memory of :func:`gpu.fod.kernels_cuda.csd_kernel` for n volumes, N coefficients,
    K constraint rows."""
    doubles = n + 4 * nf + nf * (nf + 1) // 2
    ints = 3 * nk + THREADS
    return 8 * doubles + 4 * ints
