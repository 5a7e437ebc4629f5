"""CUDA backend of CSD and MSMT-CSD: the kernels of :mod:`gpu.fod.kernels_cuda` (one voxel
per warp, float64, the CPU solvers' steps) over the voxels in chunks, so that device memory
stays bounded whatever the image; and of response estimation's tensor fit
(:mod:`gpu.fod.tensor_kernel_cuda`). Voxels a kernel leaves to the CPU (an active set beyond
its cap, non-finite values) are solved by :mod:`gpu.fod.backend_cpu`: every voxel's result
is the CPU solver's math.

On a GPU the arrays and launches go through :mod:`gpu.cuda.device_arrays` and each kernel
runs from its cubin (:mod:`gpu.cuda.family_kernels`), so a fresh process imports numba only
where a voxel is left to the CPU or a kernel has no cubin yet (it then runs through numba
once, and its cubin is saved). Under the CUDA simulator numba runs everything.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpu.cuda.family_kernels import KernelFamily
from gpu.fod import kernel_layout
from gpu.fod.csd_problem import CsdProblem
from gpu.fod.msmt_problem import MsmtProblem, constraint_gram

__all__ = ["msmt_csd_cuda", "csd_cuda", "tensor_fit_cuda", "K_MAX", "CHUNK_VOXELS", "KERNELS"]

#: Active constraints an MSMT-CSD voxel may hold on the GPU; one needing more is solved on
#: the CPU. Chosen from the active-set sizes measured (docs/decisions/fod-warp-per-voxel.md).
K_MAX = 48
#: Voxels per kernel launch: their signals, results and (MSMT-CSD) B y_u scratch are the device
#: memory that grows.
CHUNK_VOXELS = 1 << 16


def _dispatcher(name: str):
    """numba's dispatcher of kernel ``name`` (imports numba and compiles or loads it)."""
    if name == "tensor_kernel":
        from gpu.fod import tensor_kernel_cuda

        return tensor_kernel_cuda.tensor_kernel
    from gpu.fod import kernels_cuda

    return getattr(kernels_cuda, name)


#: The CSD, MSMT-CSD and tensor fit kernels, their cubins keyed by this package's sources.
KERNELS = KernelFamily(Path(__file__).parent.glob("*.py"), _dispatcher)


def _shared_bytes(needed: int, what: str) -> int:
    if needed > kernel_layout.MAX_SHARED_BYTES:
        raise ValueError(f"the {what} problem needs {needed} bytes of shared memory per voxel, more than the "
                         f"{kernel_layout.MAX_SHARED_BYTES} a CUDA block takes: lower lmax or use the CPU backend")
    return needed


def _solve_in_chunks(kernels, name: str, shared: int, signals: np.ndarray, n_out: int, constants: tuple,
                     chunk_voxels: int) -> tuple[np.ndarray, np.ndarray]:
    api, kernel = kernels.api, kernels[name]
    n_vox = signals.shape[0]
    # every row is a chunk's result; page-locked, so that the copies back are DMA
    out = api.pinned_array((n_vox, n_out), np.float64)
    niter = np.zeros(n_vox, np.int32)
    for start in range(0, n_vox, chunk_voxels):
        stop = min(n_vox, start + chunk_voxels)
        d_out = api.device_array((stop - start, n_out), np.float64)
        d_niter = api.device_array(stop - start, np.int32)
        kernel[stop - start, kernel_layout.THREADS, 0, shared](api.to_device(signals[start:stop]), *constants, d_out,
                                                               d_niter)
        d_out.copy_to_host(out[start:stop])
        d_niter.copy_to_host(niter[start:stop])
    return out, niter


def _kernels(what: str):
    """The family's kernels, a first compile announced as ``what``'s."""
    return KERNELS.kernels(lambda: (f"the {what} CUDA kernel", None))


def _signals(signals: np.ndarray) -> np.ndarray:
    """The signals as the kernels read them: float32 kept (they widen each value exactly),
    anything else as float64; C-contiguous."""
    return np.ascontiguousarray(signals, np.float32 if signals.dtype == np.float32 else np.float64)


def msmt_csd_cuda(problem: MsmtProblem, signals: np.ndarray, k_max: int = K_MAX,
                  chunk_voxels: int = CHUNK_VOXELS) -> tuple[np.ndarray, np.ndarray]:
    """:func:`gpu.fod.backend_cpu.msmt_csd_cpu` on the GPU: the same arrays in and out
    (float32 signals too, the same results as their float64 values').

    ``k_max`` caps the active set a voxel holds on the GPU (beyond it the CPU solves the
    voxel), at most 64 (a thread keeps two rows and two columns of the factor's inverse);
    ``chunk_voxels`` voxels go to the GPU at a time.
    """
    signals = _signals(signals)
    n, m = problem.H.shape[1], problem.B.shape[0]
    k_max = max(1, min(int(k_max), m, 2 * kernel_layout.THREADS))
    shared = _shared_bytes(kernel_layout.msmt_shared_bytes(n, k_max), "MSMT-CSD")
    kernels = _kernels("MSMT-CSD")
    api = kernels.api
    B = problem.B
    mp = kernel_layout.padded_rows(m)
    Bt = np.zeros((n, mp))
    Bt[:, :m] = B.T
    G = np.zeros((m, mp))
    G[:, :m] = constraint_gram(B)
    rows = max(1, min(chunk_voxels, signals.shape[0]))
    constants = (api.to_device(problem.project), api.to_device(B), api.to_device(Bt),
                 api.to_device(G), api.to_device(np.ascontiguousarray(problem.L)),
                 problem.constraint_norm_lambda, problem.max_iterations, k_max,
                 api.device_array((rows, mp), np.float64), api.device_array((rows, n), np.float64))
    x, niter = _solve_in_chunks(kernels, "msmt_kernel", shared, signals, n, constants, chunk_voxels)
    redo = np.flatnonzero(niter == kernel_layout.REDO)
    if redo.size:
        from gpu.fod.backend_cpu import msmt_csd_cpu

        x[redo], niter[redo] = msmt_csd_cpu(problem, signals[redo].astype(np.float64))
    return x, niter


def csd_cuda(problem: CsdProblem, signals: np.ndarray,
             chunk_voxels: int = CHUNK_VOXELS) -> tuple[np.ndarray, np.ndarray]:
    """:func:`gpu.fod.backend_cpu.csd_cpu` on the GPU: the same arrays in and out (float32
    signals too); ``chunk_voxels`` voxels go to the GPU at a time."""
    signals = _signals(signals)
    n, nf, nk = problem.Q.shape[0], problem.Q.shape[1], problem.P.shape[0]
    shared = _shared_bytes(kernel_layout.csd_shared_bytes(n, nf, nk), "CSD")
    kernels = _kernels("CSD")
    api = kernels.api
    constants = (api.to_device(problem.init), api.to_device(problem.Q), api.to_device(np.ascontiguousarray(problem.QtQ)),
                 api.to_device(problem.P), problem.threshold, problem.max_iterations)
    return _solve_in_chunks(kernels, "csd_kernel", shared, signals, nf, constants, chunk_voxels)


#: Voxels per tensor fit launch (a thread each), so that device memory stays bounded.
TENSOR_CHUNK_VOXELS = 1 << 18
_TENSOR_THREADS = 128


def tensor_fit_cuda(signals: np.ndarray, design: np.ndarray, products: np.ndarray,
                    iterations: int) -> np.ndarray:
    """The tensor fit's parameters (V, 7) of ``signals`` (V, n) on the GPU
    (:mod:`gpu.fod.tensor_kernel_cuda`): the CPU's :func:`gpu.fod.response_tensor._fit_block`
    to rounding, NaN where it gives non-finite ones. The kernel reads the signals a volume at
    a time: rows laid out so (F order, as a NIfTI's masked rows) go to the GPU as their
    transpose, voxel-major rows as they are, read through a transposed view on the device; the
    host transposes neither (docs/decisions/response-tensor-fit.md)."""
    signals = np.asarray(signals)
    by_volume = signals.flags.f_contiguous and not signals.flags.c_contiguous
    kernels = KERNELS.kernels(lambda: ("the tensor fit CUDA kernel", None))
    api, kernel = kernels.api, kernels["tensor_kernel"]
    constants = (api.to_device(np.ascontiguousarray(design, np.float64)),
                 api.to_device(np.ascontiguousarray(products, np.float64)), int(iterations))
    params = api.pinned_array((signals.shape[0], design.shape[1]), np.float64)
    for start in range(0, signals.shape[0], TENSOR_CHUNK_VOXELS):
        stop = min(signals.shape[0], start + TENSOR_CHUNK_VOXELS)
        chunk = signals[start:stop]
        volumes = api.to_device(_signals(chunk.T)) if by_volume else api.to_device(_signals(chunk)).T
        d_params = api.device_array((stop - start, design.shape[1]), np.float64)
        blocks = (stop - start + _TENSOR_THREADS - 1) // _TENSOR_THREADS
        kernel[blocks, _TENSOR_THREADS](volumes, *constants, d_params)
        d_params.copy_to_host(params[start:stop])
    return params
