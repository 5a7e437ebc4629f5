"""CUDA backend of FMLS segmentation, as three kernels (docs/decisions/fixels-fmls-phases.md).

:func:`fmls_grow_cuda`, a warp per voxel, VOXELS voxels a block: the block samples its voxels'
FODs on the 1281 directions together (each row of the SH → amplitude matrix read once for all
of them); each warp gathers its voxel's positive samples and sorts them (a bitonic sort on the
indices, largest amplitude first, equal amplitudes by index: the sweep's order); its lane 0
grows the lobes (:func:`gpu.fixels.fmls_math.grow_lobes`, sequential) and writes them to
global memory with a work list of them. :func:`fmls_refine_cuda`, a thread per lobe of any
voxel (full warps), runs the Newton peak search (:func:`gpu.fixels.fmls_math.refine_lobe`,
most of the work); :func:`fmls_write_cuda`, a thread per voxel, writes the fixels. Every
reduction is sequential within a thread, so the output does not depend on scheduling (the
work list's order does, each lobe's result does not). A voxel that seeds more than MAX_LOBES
lobes answers LOBE_OVERFLOW and is redone on the CPU.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numba import cuda, float64, int8, int16, int32
from numba.extending import register_jitable

from gpu.fixels import fmls_math as fm
from gpu.fixels.fmls_tables import MAX_NEIGHBOURS, FmlsTables, fmls_tables

__all__ = ["fmls_grow_cuda", "fmls_refine_cuda", "fmls_write_cuda", "segment_voxels_cuda", "launch_fmls",
           "lobe_scratch", "device_tables", "MAX_LOBES", "VOXELS"]

#: Lobe scratch in shared memory; a voxel seeding more is redone on the CPU (≤ 126: labels
#: are int8, a pending sample's −2 − lobe included).
MAX_LOBES = 64
#: Voxels of a block, a warp each: two fit the 48 KB of static shared memory a block may have.
VOXELS = 2
_WARP = 32
_MAX_COEFFS = 91  # lmax 12
_MAX_LEGENDRE = 49  # (12/2 + 1)²
_N_DIRS = 1281
_SORT_SLOTS = 2048  # the power of two ≥ _N_DIRS
_SPLIT_BLOCK = 128  # threads a block of the lobe and voxel kernels


@register_jitable
def _sweeps_first(amp, a, b):
    """Does sample a come before sample b in the sweep: larger amplitude, or equal and lower
    index; indices ≥ _N_DIRS pad the sort and come last."""
    if a >= _N_DIRS or b >= _N_DIRS:
        return a < b
    return amp[a] > amp[b] or (amp[a] == amp[b] and a < b)


@cuda.jit(device=True)
def _grow_block(coeffs, unit, neighbours, weights, amp_from_sh, merge_ratio, counts, sh, amp, order, label,
                peak_value, integral, mean, head, tail, seed, next_peak, state):
    """Everything up to the lobes of the block's voxels (shared arrays as :func:`fmls_grow_cuda`
    declares them): counts[v] is 0, or LOBE_OVERFLOW; state[w] says whether voxel w has lobes
    (state[w, 0] = 1) and how many (state[w, 2])."""
    t = cuda.threadIdx.x
    w = t // _WARP
    lane = t % _WARP
    v = cuda.blockIdx.x * VOXELS + w
    n_voxels = coeffs.shape[0]
    n_coeffs = coeffs.shape[1]
    if lane == 0:
        ok = v < n_voxels
        if ok:
            ok = coeffs[v, 0] > 0.0
            for c in range(n_coeffs):
                ok = ok and math.isfinite(coeffs[v, c])
        state[w, 0] = 1 if ok else 0
        state[w, 1] = 0
        state[w, 2] = 0
        if v < n_voxels:
            counts[v] = 0
    for i in range(t, VOXELS * n_coeffs, cuda.blockDim.x):
        u = i // n_coeffs
        c = i % n_coeffs
        sh[u, c] = coeffs[cuda.blockIdx.x * VOXELS + u, c] if cuda.blockIdx.x * VOXELS + u < n_voxels else 0.0
    cuda.syncthreads()

    # sampling, each matrix row read once for the block's voxels, summed in coefficient order
    total = cuda.local.array(VOXELS, float64)
    for d in range(t, _N_DIRS, cuda.blockDim.x):
        for u in range(VOXELS):
            total[u] = 0.0
        for c in range(n_coeffs):
            m = amp_from_sh[c, d]
            for u in range(VOXELS):
                total[u] += m * sh[u, c]
        for u in range(VOXELS):
            amp[u, d] = total[u]
    cuda.syncthreads()

    # the positive samples, gathered in any order (the sort fixes it)
    if state[w, 0] == 1:
        for d in range(lane, _N_DIRS, _WARP):
            if amp[w, d] > 0.0:
                order[w, cuda.atomic.add(state, (w, 1), 1)] = d
    cuda.syncthreads()
    largest = 1
    for u in range(VOXELS):
        if state[u, 1] > largest:
            largest = state[u, 1]
    size = 1
    while size < largest:
        size *= 2
    for i in range(state[w, 1] + lane, size, _WARP):
        order[w, i] = _N_DIRS + i
    cuda.syncthreads()
    # bitonic sort of order[w, :size], the same steps in every warp
    block = 2
    while block <= size:
        stride = block // 2
        while stride > 0:
            for i in range(lane, size // 2, _WARP):
                lo = 2 * i - (i & (stride - 1))
                hi = lo + stride
                a = order[w, lo]
                b = order[w, hi]
                if _sweeps_first(amp[w], b, a) == ((lo & block) == 0):
                    order[w, lo] = b
                    order[w, hi] = a
            cuda.syncthreads()
            stride //= 2
        block *= 2

    # MRtrix3 sweeps by |amplitude|: a negative sample before the first positive one finds no lobe
    if state[w, 0] == 1:
        if state[w, 1] == 0:
            state[w, 0] = 0
        else:
            top = order[w, 0]
            for d in range(lane, _N_DIRS, _WARP):
                a = amp[w, d]
                if a <= 0.0 and (-a > amp[w, top] or (-a == amp[w, top] and d < top)):
                    state[w, 0] = 0
    cuda.syncthreads()

    if lane == 0 and state[w, 0] == 1:
        adjacent = cuda.local.array(MAX_NEIGHBOURS, int32)
        n_lobes = fm.grow_lobes(amp[w], order[w], state[w, 1], unit, neighbours, weights, merge_ratio, label[w],
                                adjacent, peak_value[w], mean[w], integral[w], head[w], tail[w], seed[w],
                                next_peak[w])
        if n_lobes < 0:
            counts[v] = n_lobes
            state[w, 0] = 0
        else:
            state[w, 2] = n_lobes
    cuda.syncthreads()


@cuda.jit(cache=True)
def fmls_grow_cuda(coeffs, unit, neighbours, weights, amp_from_sh, merge_ratio, counts, lobes, work, n_work, g_label,
                   g_peak_value, g_integral, g_mean, g_head, g_seed, g_next_peak):
    """The lobes of voxels VOXELS·blockIdx.x + warp, launched with VOXELS·32 threads a block: lobes[v]
    receives their number (0: none, counts[v] then final), the g_ arrays (V, MAX_LOBES[, 3])
    and g_label (V, D) what :func:`fmls_refine_cuda` and :func:`fmls_write_cuda` read, and
    work[n_work[0]…] voxel·MAX_LOBES + lobe for each lobe (voxels in any order)."""
    t = cuda.threadIdx.x
    w = t // _WARP
    lane = t % _WARP
    v = cuda.blockIdx.x * VOXELS + w
    sh = cuda.shared.array((VOXELS, _MAX_COEFFS), float64)
    amp = cuda.shared.array((VOXELS, _N_DIRS), float64)
    order = cuda.shared.array((VOXELS, _SORT_SLOTS), int16)
    label = cuda.shared.array((VOXELS, _N_DIRS), int8)
    peak_value = cuda.shared.array((VOXELS, MAX_LOBES), float64)
    integral = cuda.shared.array((VOXELS, MAX_LOBES), float64)
    mean = cuda.shared.array((VOXELS, MAX_LOBES, 3), float64)
    head = cuda.shared.array((VOXELS, MAX_LOBES), int16)
    tail = cuda.shared.array((VOXELS, MAX_LOBES), int16)
    seed = cuda.shared.array((VOXELS, MAX_LOBES), int16)
    next_peak = cuda.shared.array((VOXELS, MAX_LOBES), int16)
    state = cuda.shared.array((VOXELS, 3), int32)
    _grow_block(coeffs, unit, neighbours, weights, amp_from_sh, merge_ratio, counts, sh, amp, order, label,
                peak_value, integral, mean, head, tail, seed, next_peak, state)
    if v >= coeffs.shape[0]:
        return
    n = state[w, 2] if state[w, 0] == 1 else 0
    if lane == 0:
        lobes[v] = n
        if n > 0:
            first = cuda.atomic.add(n_work, 0, n)
            for lobe in range(n):
                work[first + lobe] = v * g_head.shape[1] + lobe
    if n == 0:
        return
    for lobe in range(lane, n, _WARP):
        g_peak_value[v, lobe] = peak_value[w, lobe]
        g_integral[v, lobe] = integral[w, lobe]
        for c in range(3):
            g_mean[v, lobe, c] = mean[w, lobe, c]
        g_head[v, lobe] = head[w, lobe]
        g_seed[v, lobe] = seed[w, lobe]
        g_next_peak[v, lobe] = next_peak[w, lobe]
    for d in range(lane, _N_DIRS, _WARP):
        g_label[v, d] = label[w, d]


@cuda.jit(cache=True)
def fmls_refine_cuda(coeffs, lmax, unit, neighbours, legendre, step, factors, integral_threshold, work, n_work,
                     label, peak_value, integral, head, seed, next_peak, peak_dir):
    """:func:`gpu.fixels.fmls_math.refine_lobe` of lobe work[i] (as :func:`fmls_grow_cuda`
    wrote it) on thread i, for i < n_work[0]: a thread a lobe of any voxel."""
    i = cuda.grid(1)
    if i >= n_work[0]:
        return
    v = work[i] // head.shape[1]
    lobe = work[i] % head.shape[1]
    al = cuda.local.array(_MAX_LEGENDRE, float64)
    fm.refine_lobe(lobe, coeffs[v], lmax, unit, neighbours, legendre, step, factors, integral_threshold, label[v],
                   al[:legendre.shape[1]], peak_value[v], integral[v], head[v], seed[v], next_peak[v], peak_dir[v])


@cuda.jit(cache=True)
def fmls_write_cuda(lobes, integral_threshold, peak_threshold, maxnum, dir_from_peak, peak_value, mean, integral, head,
                    peak_dir, counts, out_dir, out_afd, out_peak):
    """:func:`gpu.fixels.fmls_math.write_fixels` of voxel v on thread v, from the lobes
    :func:`fmls_refine_cuda` refined (voxels without lobes keep their count)."""
    v = cuda.grid(1)
    if v >= lobes.shape[0] or lobes[v] == 0:
        return
    counts[v] = fm.write_fixels(lobes[v], integral_threshold, peak_threshold, maxnum, dir_from_peak, peak_value[v],
                                mean[v], integral[v], head[v], peak_dir[v], out_dir[v], out_afd[v], out_peak[v])


@lru_cache(maxsize=4)
def device_tables(lmax: int) -> tuple:
    """The tables the kernels read for SH degree ``lmax``, on the device (kept for the
    process)."""
    tables = fmls_tables(lmax)
    return tuple(cuda.to_device(np.ascontiguousarray(a)) for a in
                 (tables.unit, tables.neighbours, tables.weights, tables.sh_to_amp.T, tables.legendre,
                  tables.derivative_factors))


def lobe_scratch(n_voxels: int) -> tuple:
    """Device arrays the split kernels pass lobes through, for ``n_voxels`` voxels of up to
    MAX_LOBES lobes: lobe counts, work list and its length, labels, then the lobes' peak
    values, integrals, mean sums, heads, seeds, next peaks and refined directions."""
    n, lobes = n_voxels, MAX_LOBES
    return (cuda.device_array(n, np.int32), cuda.device_array(n * lobes, np.int32), cuda.device_array(1, np.int32),
            cuda.device_array((n, _N_DIRS), np.int8), cuda.device_array((n, lobes), np.float64),
            cuda.device_array((n, lobes), np.float64), cuda.device_array((n, lobes, 3), np.float64),
            cuda.device_array((n, lobes), np.int16), cuda.device_array((n, lobes), np.int16),
            cuda.device_array((n, lobes), np.int16), cuda.device_array((n, lobes, 3), np.float64))


def launch_fmls(d_coeffs, tables: FmlsTables, integral_threshold: float, peak_threshold: float, merge_ratio: float,
                maxnum: int, dir_from_peak: bool, d_counts, d_dir, d_afd, d_peak, scratch: tuple) -> None:
    """The three kernels on device arrays: ``d_coeffs`` (V, n_coeffs) float64 in, the others
    out, shaped as :func:`segment_voxels_cuda` returns them; ``scratch`` a :func:`lobe_scratch`
    of V voxels."""
    n = d_coeffs.shape[0]
    d_unit, d_neighbours, d_weights, d_amp_from_sh, d_legendre, d_factors = device_tables(tables.lmax)
    grid = (n + VOXELS - 1) // VOXELS
    lobes, work, n_work, label, peak_value, integral, mean, head, seed, next_peak, peak_dir = scratch
    n_work.copy_to_device(np.zeros(1, np.int32))
    fmls_grow_cuda[grid, VOXELS * _WARP](d_coeffs, d_unit, d_neighbours, d_weights, d_amp_from_sh, float(merge_ratio),
                                         d_counts, lobes, work, n_work, label, peak_value, integral, mean, head, seed,
                                         next_peak)
    # as many threads as lobes could be; those past n_work[0] return at once
    fmls_refine_cuda[(work.shape[0] + _SPLIT_BLOCK - 1) // _SPLIT_BLOCK, _SPLIT_BLOCK](
        d_coeffs, tables.lmax, d_unit, d_neighbours, d_legendre, tables.legendre_step, d_factors,
        float(integral_threshold), work, n_work, label, peak_value, integral, head, seed, next_peak, peak_dir)
    fmls_write_cuda[(n + _SPLIT_BLOCK - 1) // _SPLIT_BLOCK, _SPLIT_BLOCK](
        lobes, float(integral_threshold), float(peak_threshold), int(maxnum), bool(dir_from_peak), peak_value, mean,
        integral, head, peak_dir, d_counts, d_dir, d_afd, d_peak)


def segment_voxels_cuda(coeffs: np.ndarray, tables: FmlsTables, integral_threshold: float, peak_threshold: float,
                        merge_ratio: float, maxnum: int, dir_from_peak: bool,
                        capacity: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`gpu.fixels.fmls.segment_voxels_cpu` on the GPU, its fixels rounded to float32
    (the fixel files' type) before they leave it; counts may also be LOBE_OVERFLOW."""
    n = coeffs.shape[0]
    if n == 0:
        return (np.zeros(0, np.int32), np.zeros((0, capacity, 3), np.float32), np.zeros((0, capacity), np.float32),
                np.zeros((0, capacity), np.float32))
    d_counts = cuda.device_array(n, np.int32)
    d_dir = cuda.device_array((n, capacity, 3), np.float32)
    d_afd = cuda.device_array((n, capacity), np.float32)
    d_peak = cuda.device_array((n, capacity), np.float32)
    launch_fmls(cuda.to_device(np.ascontiguousarray(coeffs, np.float64)), tables, integral_threshold, peak_threshold,
                merge_ratio, maxnum, dir_from_peak, d_counts, d_dir, d_afd, d_peak, lobe_scratch(n))
    return d_counts.copy_to_host(), d_dir.copy_to_host(), d_afd.copy_to_host(), d_peak.copy_to_host()
