"""CUDA backend of SS-HOPM, in five launches per chunk of voxels.

0. ``sh_to_tensor_cuda`` (gpu.peaks.kernels_cuda): SH coefficients → unique tensor entries
   (gpu.peaks.symmetric_tensor.sh_to_tensor_matrix, its non-zero entries).
1. ``seed_cuda_m{order}`` (generated): a block per SEED_VOXELS voxels, one thread per start, the
   tensor's unique entries in shared memory (Ballard, Kolda & Plantenga 2011, Sec. III-D):
   every start evaluates A x^(m−1) and A x^m and the voxel's seeds are listed in start order.
2. ``climb_cuda_m{order}`` (generated): one thread per seed, the seeds of all voxels packed
   end to end; ``climb_owners`` (gpu.peaks.kernels_cuda) first lists each climb's voxel.
   Climbing in the voxel's block left most lanes of its one busy warp idle (a voxel has
   few seeds out of its starts), and the block's registers kept other voxels off the SM
   (docs/benchmarks.md, measured design choices).
3. ``select_cuda`` (gpu.peaks.kernels_cuda): one thread per voxel merges duplicate maxima, ranks them and
   applies the thresholds, exactly as the CPU backend does.
4. ``iteration_histogram`` (gpu.peaks.kernels_cuda): the climbs' iterations, counted into the
   histogram the CPU backend also reports.

Voxels go in chunks so long runs report progress and can be cancelled between chunks.

On a GPU the arrays, events and launches go through gpu.cuda.device_arrays and each kernel
runs from its cubin saved in gpu.cuda.cubin_cache (gpu.cuda.family_kernels), so a fresh
process needs no numba; a kernel with no cubin yet runs through numba once (compiling it or
loading numba's cache), and its cubin is saved then. There the result arrays are filled on
the device and come back into page-locked host memory, and an input in page-locked memory
(gpu.cuda.host_memory.pinned_empty) goes over by DMA without a staging copy. Under the CUDA simulator numba runs everything.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Callable

import numpy as np

from gpu.cuda.family_kernels import KernelFamily
from gpu.cuda.simulator import simulator_active
from gpu.peaks.sshopm_layout import CONVERT_VOXELS, CONVERT_WARPS, HIST_BINS, N_STATS, SEED_VOXELS
from gpu.peaks.sshopm_starts import neighbor_steps

__all__ = ["run_sshopm_cuda", "load_cuda_runtime", "KERNELS"]

SELECT_THREADS = 128
CLIMB_THREADS = 128
HIST_THREADS = 256
# enough blocks to fill an H100 several times over; each then loops over its share
HIST_BLOCKS = 1024
# Entries of the SH→tensor matrix below this fraction of its largest are rounding residue
# of exact zeros, orders of magnitude below the smallest true entry at every lmax.
SH2T_ZERO = 1e-9

# The CUDA kernels of an order compile in about this many times the CPU loop's seconds: what
# a first run is told to expect.
CUDA_COMPILE_FACTOR = 1.9


def _dispatcher(name: str):
    """numba's dispatcher of kernel ``name`` (imports numba and compiles or loads it)."""
    from gpu.peaks import kernels_cuda, sshopm_generated_cuda

    return getattr(kernels_cuda, name, None) or getattr(sshopm_generated_cuda, name)


#: The SS-HOPM kernels, their cubins keyed by this package's sources.
KERNELS = KernelFamily(Path(__file__).parent.glob("*.py"), _dispatcher)


def _compile_notice(order: int) -> tuple[str, float]:
    """What a first compile of the lmax-``order`` kernels is announced as, and its seconds."""
    from gpu.peaks.backend_cpu import COMPILE_SECONDS

    return f"the lmax-{order} SS-HOPM CUDA kernels", CUDA_COMPILE_FACTOR * COMPILE_SECONDS[order]


def load_cuda_runtime() -> None:
    """Create the CUDA context (the device's primary one, shared by every thread and by
    numba) ahead of the first launch."""
    if not simulator_active():
        from gpu.cuda.driver import driver

        driver.ensure_context()


def _nonzero_rows(sh2t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The SH→tensor matrix (unique entries, SH coefficients) in compressed rows: (first,
    columns, values) such that row k's non-zero entries are values[first[k]:first[k + 1]]
    in columns columns[first[k]:first[k + 1]], ascending; entries below SH2T_ZERO of the
    largest count as zero."""
    keep = np.abs(sh2t) > SH2T_ZERO * np.abs(sh2t).max()
    first = np.zeros(sh2t.shape[0] + 1, np.int32)
    np.cumsum(keep.sum(axis=1), out=first[1:])
    rows, columns = np.nonzero(keep)
    return first, columns.astype(np.int32), np.asarray(sh2t, np.float32)[rows, columns]


def _climb_arrays(api, climbs: int) -> tuple:
    """Device arrays for ``climbs`` results: directions, λ, iterations, flags (CLIMB_*)."""
    size = max(climbs, 1)
    return (api.device_array((size, 3), np.float32), api.device_array(size, np.float32),
            api.device_array(size, np.int32), api.device_array(size, np.int32))


def run_sshopm_cuda(
    order: int,
    coeffs: np.ndarray,
    sh2t: np.ndarray,
    starts: np.ndarray,
    neighbors: np.ndarray,
    fparams: np.ndarray,
    iparams: np.ndarray,
    npeaks: int,
    chunk_voxels: int = 1 << 20,
    progress: Callable[[float], None] | None = None,
) -> dict:
    """Same contract as :func:`gpu.peaks.backend_cpu.run_sshopm_cpu`, computed in float32 on the GPU.

    ``kernel_seconds`` adds up CUDA-event times of the kernels (``kernel_seconds_by_phase``;
    transfers and the host's prefix sum between phases excluded); ``compute_seconds`` is the
    host wall time.
    """
    kernels = KERNELS.kernels(functools.partial(_compile_notice, order))
    api = kernels.api
    seed_kernel, climb_kernel = kernels[f"seed_cuda_m{order}"], kernels[f"climb_cuda_m{order}"]
    n = coeffs.shape[1]
    n_starts = starts.shape[0]
    n_unique = sh2t.shape[0]
    started = time.perf_counter()
    # (n_coeffs, voxels) in either layout: convert reads it with its strides, so each
    # voxel's coefficients together (an MRtrix image's usual layout) need no transpose here
    coeffs = coeffs.astype(np.float32, copy=False)
    d_coeffs = api.to_device(coeffs if coeffs.flags.f_contiguous else np.ascontiguousarray(coeffs))
    d_sh2t = tuple(api.to_device(part) for part in _nonzero_rows(sh2t))
    d_starts = api.to_device(np.ascontiguousarray(starts, np.float32))
    d_neighbors = api.to_device(np.ascontiguousarray(neighbors, np.int32))
    # made from the float32 starts, as the kernel once made them itself
    d_steps = api.to_device(neighbor_steps(np.ascontiguousarray(starts, np.float32), neighbors))
    d_fparams = api.to_device(np.ascontiguousarray(fparams, np.float32))
    d_iparams = api.to_device(np.ascontiguousarray(iparams, np.int32))
    d_directions = kernels.full((n, npeaks, 3), np.float32, np.nan)
    d_amplitudes = kernels.full((n, npeaks), np.float32, np.nan)
    d_count = kernels.full(n, np.int32, 0)
    d_stats = kernels.full((n, N_STATS), np.int32, 0)
    d_hist = kernels.full(HIST_BINS, np.int32, 0)
    chunk = min(chunk_voxels, max(n, 1))
    d_tensors = api.device_array((n_unique, chunk), np.float32)
    d_slots = api.device_array((chunk, n_starts), np.uint8)
    d_n_seeds = api.device_array(chunk, np.int32)
    phases = {"convert": 0.0, "seed": 0.0, "climb": 0.0, "select": 0.0}

    def timed(kernel, *args) -> float:
        # Views and launch configurations are made before the events: slicing a device
        # array is Python work, which would count as GPU time on an idle GPU.
        begin, end = api.event(), api.event()
        begin.record()
        kernel(*args)
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) / 1e3

    def part(array, lo, hi, columns=False):
        """Rows (or columns) lo:hi of array, or array itself when that is all of it."""
        if lo == 0 and hi == array.shape[1 if columns else 0]:
            return array
        return array[:, lo:hi] if columns else array[lo:hi]

    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        m = hi - lo
        tensors = part(d_tensors, 0, m, columns=True)
        slots = part(d_slots, 0, m)
        n_seeds_m = part(d_n_seeds, 0, m)
        convert = kernels["sh_to_tensor_cuda"][(m + CONVERT_VOXELS - 1) // CONVERT_VOXELS,
                                                 CONVERT_VOXELS * CONVERT_WARPS]
        phases["convert"] += timed(convert, part(d_coeffs, lo, hi, columns=True), *d_sh2t, tensors)
        seed = seed_kernel[(m + SEED_VOXELS - 1) // SEED_VOXELS, n_starts]
        phases["seed"] += timed(seed, tensors, d_starts, d_neighbors, d_steps, d_fparams, d_iparams, slots, n_seeds_m)
        # where each voxel's climbs start when all voxels' climbs are packed end to end
        n_seeds = n_seeds_m.copy_to_host()
        first = np.zeros(m, np.int32)
        np.cumsum(n_seeds[:-1], out=first[1:])
        climbs = int(first[-1] + n_seeds[-1])
        d_first = api.to_device(first)
        results = _climb_arrays(api, climbs)
        if climbs:
            owners = api.device_array(climbs, np.int32)
            fill = kernels["climb_owners"][(m + SELECT_THREADS - 1) // SELECT_THREADS, SELECT_THREADS]
            phases["climb"] += timed(fill, d_first, n_seeds_m, owners)
            climb = climb_kernel[(climbs + CLIMB_THREADS - 1) // CLIMB_THREADS, CLIMB_THREADS]
            phases["climb"] += timed(climb, tensors, d_starts, slots, d_first, owners, climbs, d_fparams, d_iparams,
                                     *results)
        select = kernels["select_cuda"][(m + SELECT_THREADS - 1) // SELECT_THREADS, SELECT_THREADS]
        phases["select"] += timed(select, d_first, n_seeds_m, *results, d_fparams, d_iparams, part(d_directions, lo, hi),
                                  part(d_amplitudes, lo, hi), part(d_count, lo, hi), part(d_stats, lo, hi))
        if climbs:
            blocks = min((climbs + HIST_THREADS - 1) // HIST_THREADS, HIST_BLOCKS)
            count_its = kernels["iteration_histogram"][blocks, HIST_THREADS]
            phases["climb"] += timed(count_its, results[2], climbs, d_hist)
        if progress is not None:
            progress(hi / n)
    result = {
        "directions": d_directions.copy_to_host(),
        "amplitudes": d_amplitudes.copy_to_host(),
        "count": d_count.copy_to_host(),
        "stats": d_stats.copy_to_host(),
        "hist": d_hist.copy_to_host().astype(np.int64),
        "kernel_seconds": sum(phases.values()),
        "kernel_seconds_by_phase": phases,
    }
    result["compute_seconds"] = time.perf_counter() - started
    return result
