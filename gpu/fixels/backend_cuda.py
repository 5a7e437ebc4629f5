"""CUDA backend of FMLS segmentation: the kernels of :mod:`gpu.fixels.kernels_cuda` (grow
the lobes, refine each lobe's peak, write the fixels) over chunks of voxels, each chunk
queued on its workspace's stream so that the host finishes one while the device runs the
next.

On a GPU the arrays, copies, streams and launches go through :mod:`gpu.cuda.device_arrays`
and each kernel runs from its cubin (:mod:`gpu.cuda.family_kernels`), so a fresh process
imports numba only where a kernel has no cubin yet (it then runs through numba once, and
its cubin is saved) or a voxel is redone on the CPU (:mod:`gpu.fixels.segment`). Under the
CUDA simulator numba runs everything.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

from gpu.cuda.family_kernels import KernelFamily
from gpu.fixels.fmls_tables import FmlsTables, fmls_tables
from gpu.fixels.kernel_layout import MAX_LOBES, N_DIRS, SAMPLE_VOXELS, SPLIT_BLOCK, VOXELS, WARP

__all__ = ["KERNELS", "fmls_kernels", "segment_voxels_cuda", "start_segment_cuda", "launch_fmls", "lobe_scratch",
           "device_tables", "FmlsWorkspace"]


def _dispatcher(name: str):
    """numba's dispatcher of kernel ``name`` (imports numba and compiles or loads it)."""
    from gpu.fixels import kernels_cuda

    return getattr(kernels_cuda, name)


#: The FMLS kernels, their cubins keyed by this package's sources.
KERNELS = KernelFamily(Path(__file__).parent.glob("*.py"), _dispatcher)


def fmls_kernels():
    """The FMLS kernels and the arrays they take (:meth:`gpu.cuda.family_kernels.KernelFamily.kernels`)."""
    return KERNELS.kernels(lambda: ("the FMLS CUDA kernels", None))


@lru_cache(maxsize=4)
def device_tables(api, lmax: int) -> tuple:
    """The tables the kernels read for SH degree ``lmax``, on the device through ``api``
    (kept for the process)."""
    tables = fmls_tables(lmax)
    return tuple(api.to_device(np.ascontiguousarray(a)) for a in
                 (tables.unit, tables.neighbours, tables.weights, tables.sh_to_amp.T, tables.legendre,
                  tables.derivative_factors))


def lobe_scratch(api, n_voxels: int) -> tuple:
    """Device arrays the split kernels pass lobes through, for ``n_voxels`` voxels of up to
    MAX_LOBES lobes: lobe counts, work list and its length, the list of lobes still climbing
    after the first Newton steps and its length, labels, the samples (float64) and each
    voxel's largest and most negative, then the lobes' peak values, integrals, mean sums,
    heads, seeds, next peaks and refined directions."""
    n, lobes = n_voxels, MAX_LOBES
    return (api.device_array(n, np.int32), api.device_array(n * lobes, np.int32), api.device_array(1, np.int32),
            api.device_array(n * lobes, np.int32), api.device_array(1, np.int32),
            api.device_array((n, N_DIRS), np.int8), api.device_array((n, N_DIRS), np.float64),
            api.device_array((n, 2), np.float64), api.device_array((n, lobes), np.float64),
            api.device_array((n, lobes), np.float64), api.device_array((n, lobes, 3), np.float64),
            api.device_array((n, lobes), np.int16), api.device_array((n, lobes), np.int16),
            api.device_array((n, lobes), np.int16), api.device_array((n, lobes, 3), np.float64))


def launch_fmls(kernels, d_coeffs, tables: FmlsTables, integral_threshold: float, peak_threshold: float,
                merge_ratio: float, maxnum: int, dir_from_peak: bool, d_counts, d_dir, d_afd, d_peak, scratch: tuple,
                stream=0) -> None:
    """The FMLS kernels of ``kernels`` (:func:`fmls_kernels`: sample, grow, refine, write) on
    its device arrays, queued on ``stream``: ``d_coeffs`` (V, n_coeffs) float64 in, the others
    out, shaped as :func:`segment_voxels_cuda` returns them; ``scratch`` a :func:`lobe_scratch`
    of V voxels."""
    n = d_coeffs.shape[0]
    d_unit, d_neighbours, d_weights, d_amp_from_sh, d_legendre, d_factors = device_tables(kernels.api, tables.lmax)
    grid = (n + VOXELS - 1) // VOXELS
    lobes, work, n_work, more, n_more, label, samples, extremes, peak_value, integral, mean, head, seed, next_peak, \
        peak_dir = scratch
    # the work lists' lengths, which the grow and first Newton kernels count up atomically
    n_work.copy_to_device(np.zeros(1, np.int32), stream=stream)
    n_more.copy_to_device(np.zeros(1, np.int32), stream=stream)
    kernels["fmls_sample_cuda"][(n + SAMPLE_VOXELS - 1) // SAMPLE_VOXELS, SAMPLE_VOXELS * WARP // 4, stream](
        d_coeffs, d_amp_from_sh, samples, extremes)
    kernels["fmls_grow_cuda"][grid, VOXELS * WARP, stream](
        d_coeffs, d_unit, d_neighbours, d_weights, float(merge_ratio), d_counts, lobes, work, n_work, label, samples,
        extremes, peak_value, integral, mean, head, seed, next_peak)
    # as many threads as lobes could be; those past n_work[0] (n_more[0]) return at once
    lobe_grid = (work.shape[0] + SPLIT_BLOCK - 1) // SPLIT_BLOCK
    kernels["fmls_refine_cuda"][lobe_grid, SPLIT_BLOCK, stream](
        d_coeffs, tables.lmax, d_unit, d_neighbours, d_legendre, tables.legendre_step, d_factors,
        float(integral_threshold), work, n_work, more, n_more, label, peak_value, integral, head, seed, next_peak,
        peak_dir)
    kernels["fmls_refine_more_cuda"][lobe_grid, SPLIT_BLOCK, stream](
        d_coeffs, tables.lmax, d_unit, d_neighbours, d_legendre, tables.legendre_step, d_factors, more, n_more, label,
        peak_value, head, seed, next_peak, peak_dir)
    kernels["fmls_write_cuda"][(n + SPLIT_BLOCK - 1) // SPLIT_BLOCK, SPLIT_BLOCK, stream](
        lobes, float(integral_threshold), float(peak_threshold), int(maxnum), bool(dir_from_peak), peak_value, mean,
        integral, head, peak_dir, d_counts, d_dir, d_afd, d_peak)


class FmlsWorkspace:
    """What segmenting up to ``size`` voxels of ``n_coeffs`` coefficients at a time takes on
    the GPU, allocated once and reused chunk after chunk: the kernels (:func:`fmls_kernels`),
    a stream, the coefficients as the kernels read them (float64), the lobe scratch, room for
    ``capacity`` fixels a voxel, and page-locked host buffers the coefficients go up and the
    fixels come back through (copied by DMA, without blocking the host)."""

    def __init__(self, size: int, n_coeffs: int, capacity: int):
        self.kernels = fmls_kernels()
        api = self.kernels.api
        self.n_coeffs = n_coeffs
        self.stream = api.stream()
        self.rows = api.device_array((size, n_coeffs), np.float64)
        self.scratch = lobe_scratch(api, size)
        self.fixels = (api.device_array(size, np.int32), api.device_array((size, capacity, 3), np.float32),
                       api.device_array((size, capacity), np.float32), api.device_array((size, capacity), np.float32))
        self.host = tuple(api.pinned_array(a.shape, a.dtype) for a in self.fixels)
        # the coefficients on their way up, float64 (the widest an input has)
        self.upload = api.pinned_array(size * n_coeffs, np.float64)

    def scratch_of(self, n: int) -> tuple:
        """The lobe scratch of :func:`lobe_scratch` for the first ``n`` voxels."""
        lobes, work, n_work, more, n_more, *per_voxel = self.scratch
        return (lobes[:n], work[:n * MAX_LOBES], n_work, more[:n * MAX_LOBES], n_more, *(a[:n] for a in per_voxel))

    def staged(self, coeffs: np.ndarray) -> np.ndarray:
        """``coeffs`` (V, n_coeffs) copied into the page-locked upload buffer, in the memory
        order it has (coefficient-major when its rows are strided, as a NIfTI image's are)."""
        n = coeffs.shape[0]
        dtype = np.float32 if coeffs.dtype == np.float32 else np.float64
        flat = self.upload.view(dtype)[:n * self.n_coeffs]
        major = coeffs.strides[0] < coeffs.strides[1]
        stage = flat.reshape(self.n_coeffs, n).T if major else flat.reshape(n, self.n_coeffs)
        np.copyto(stage, coeffs, casting="same_kind")
        return stage


def start_segment_cuda(coeffs: np.ndarray, tables: FmlsTables, integral_threshold: float, peak_threshold: float,
                       merge_ratio: float, maxnum: int, dir_from_peak: bool,
                       workspace: FmlsWorkspace) -> Callable[[], tuple[np.ndarray, ...]]:
    """Queue :func:`segment_voxels_cuda` of ``coeffs`` on the workspace's stream and return at
    once a function that waits for it and returns its arrays (the workspace's host buffers,
    valid until the workspace's next use): the host can meanwhile work on another chunk."""
    n = coeffs.shape[0]
    kernels, stream = workspace.kernels, workspace.stream
    stage = workspace.staged(coeffs)
    # a device array's .T launches a transposing copy (compiled afresh each time): the
    # widening reads the coefficient-major block as it is instead
    major = not stage.flags.c_contiguous
    block = kernels.api.to_device(stage.T if major else stage, stream=stream)
    rows = workspace.rows[:n]
    kernels["widen_rows_cuda"][(rows.size + SPLIT_BLOCK - 1) // SPLIT_BLOCK, SPLIT_BLOCK, stream](block, major, rows)
    fixels = tuple(a[:n] for a in workspace.fixels)
    launch_fmls(kernels, rows, tables, integral_threshold, peak_threshold, merge_ratio, maxnum, dir_from_peak,
                *fixels, workspace.scratch_of(n), stream)
    host = tuple(a[:n] for a in workspace.host)
    for device, out in zip(fixels, host):
        device.copy_to_host(out, stream=stream)

    def finish(uploaded=block) -> tuple[np.ndarray, ...]:
        # ``uploaded`` holds the device copy of the chunk until its stream is done with it
        stream.synchronize()
        return host

    return finish


def segment_voxels_cuda(coeffs: np.ndarray, tables: FmlsTables, integral_threshold: float, peak_threshold: float,
                        merge_ratio: float, maxnum: int, dir_from_peak: bool,
                        capacity: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`gpu.fixels.fmls.segment_voxels_cpu` on the GPU, its fixels rounded to float32
    (the fixel files' type) before they leave it; counts may also be LOBE_OVERFLOW.
    ``coeffs`` (V, n_coeffs) may be float32 or float64, in either memory order (a view of
    the image's rows is read as it lies)."""
    n = coeffs.shape[0]
    if n == 0:
        return (np.zeros(0, np.int32), np.zeros((0, capacity, 3), np.float32), np.zeros((0, capacity), np.float32),
                np.zeros((0, capacity), np.float32))
    return start_segment_cuda(coeffs, tables, integral_threshold, peak_threshold, merge_ratio, maxnum, dir_from_peak,
                              FmlsWorkspace(n, coeffs.shape[1], capacity))()
