"""The hand-written SS-HOPM CUDA kernels (phases 0, 3 and 4 of :mod:`gpu.peaks.backend_cuda`,
and the climbs' owners of phase 2); the seed and climb kernels are generated per tensor order
in :mod:`gpu.peaks.sshopm_generated_cuda`.
"""

from __future__ import annotations

from numba import cuda, float32, int16, int32, uint8, uint64

from gpu.peaks import sshopm_math as sm
from gpu.peaks.limits import MAX_STARTS
from gpu.peaks.sshopm_generated_cuda import SEED_OPTIONS
from gpu.peaks.sshopm_layout import (
    CLIMB_CAPPED, CLIMB_PEAK, CONVERT_VOXELS, CONVERT_WARPS, HIST_BINS, P_COS_MERGE, P_NPEAKS, P_REL_THRESHOLD,
    P_THRESHOLD, S_CAPPED, S_ITERATIONS, S_MAX_ITERATIONS, S_SEEDS,
)

__all__ = ["sh_to_tensor_cuda", "climb_owners", "select_cuda", "iteration_histogram"]

#: SH coefficients at lmax 12, the highest order the generated kernels take.
MAX_COEFFS = 91


@cuda.jit(cache=True)
def sh_to_tensor_cuda(coeffs, sh2t_first, sh2t_cols, sh2t_values, tensors):
    """tensors[:, v] = sh2t @ coeffs[:, v] for CONVERT_VOXELS voxels a block. The block
    first copies their coefficients to shared memory, a contiguous row of 32 at a time, so
    each coefficient is read from memory once. Then warp w makes unique entries w, w + CONVERT_WARPS, …, lane j
    for the block's voxel j: entry k sums sh2t_values[q]·coeffs[sh2t_cols[q], v] over row k's
    non-zero entries, sh2t_first[k] ≤ q < sh2t_first[k + 1], in column order (a fifth of
    the matrix at lmax 8; each load of the row is the same for the whole warp)."""
    staged = cuda.shared.array((MAX_COEFFS, CONVERT_VOXELS), float32)
    # unsigned indices: numba adds a negative-index wraparound to every signed one
    lane = uint64(cuda.threadIdx.x % CONVERT_VOXELS)
    warp = uint64(cuda.threadIdx.x // CONVERT_VOXELS)
    v = uint64(cuda.blockIdx.x * CONVERT_VOXELS) + lane
    inside = v < uint64(coeffs.shape[1])
    j = warp
    while j < uint64(coeffs.shape[0]):
        if inside:
            staged[j, lane] = coeffs[j, v]
        j += uint64(CONVERT_WARPS)
    cuda.syncthreads()
    if inside:
        k = warp
        while k < uint64(tensors.shape[0]):
            total = float32(0)
            q = uint64(sh2t_first[k])
            while q < uint64(sh2t_first[k + uint64(1)]):
                total += sh2t_values[q] * staged[uint64(sh2t_cols[q]), lane]
                q += uint64(1)
            tensors[k, v] = total
            k += uint64(CONVERT_WARPS)


@cuda.jit(cache=True)
def climb_owners(first_climb, n_climbs, owners):
    """owners[first_climb[v] + i] = v for i < n_climbs[v], one thread per voxel: the voxel of
    each packed climb, which the climb kernel then reads in one load instead of a binary
    search of first_climb (docs/benchmarks.md, measured design choices)."""
    v = cuda.grid(1)
    if v >= n_climbs.shape[0]:
        return
    base = uint64(first_climb[v])
    for i in range(uint64(n_climbs[v])):
        owners[base + i] = v


@cuda.jit(**SEED_OPTIONS)
def select_cuda(first_climb, n_seeds, climb_dirs, climb_lams, climb_its, climb_flags, fparams, iparams, out_dirs,
                out_amps, out_count, out_stats):
    """Phase 3, one thread per voxel, the CPU backend's loop: drop the voxel's climbs that did
    not end at a strict local maximum, merge duplicates, rank by amplitude, threshold, write
    (gpu.peaks.sshopm_math.select_peaks). A warp per voxel kept few of its lanes busy (a voxel
    has a few climbs) and issued the instructions of all 32; indices are unsigned."""
    v = cuda.grid(1)
    if v >= n_seeds.shape[0]:
        return
    valid = cuda.local.array(MAX_STARTS, uint8)
    walked = cuda.local.array(MAX_STARTS, int16)
    base = uint64(first_climb[v])
    n = uint64(n_seeds[v])
    total = 0
    most = 0
    capped = 0
    for i in range(n):
        its = climb_its[base + i]
        flags = climb_flags[base + i]
        total += its
        most = max(most, its)
        if flags & CLIMB_CAPPED:
            capped += 1
        valid[i] = 1 if flags & CLIMB_PEAK else 0
    out_stats[v, S_ITERATIONS] = total
    out_stats[v, S_MAX_ITERATIONS] = most
    out_stats[v, S_SEEDS] = n
    out_stats[v, S_CAPPED] = capped
    # a signed count: select_peaks's candidate index starts at -1 (none yet)
    out_count[v] = sm.select_peaks(
        int16(n), climb_dirs[base:base + n, 0], climb_dirs[base:base + n, 1], climb_dirs[base:base + n, 2],
        climb_lams[base:base + n], valid, walked, fparams[P_COS_MERGE], iparams[P_NPEAKS], fparams[P_THRESHOLD],
        fparams[P_REL_THRESHOLD], out_dirs[v], out_amps[v])


@cuda.jit(cache=True)
def iteration_histogram(its, n, hist):
    """Phase 4: hist[min(its[i], HIST_BINS − 1)] += 1 for i < n, the climbs' iterations: each block
    counts its share in shared memory and adds its counts to ``hist`` once (one global
    atomic add a climb, inside the climb kernels, onto a few counters serialised them)."""
    counts = cuda.shared.array(HIST_BINS, int32)
    for b in range(cuda.threadIdx.x, HIST_BINS, cuda.blockDim.x):
        counts[b] = 0
    cuda.syncthreads()
    i = uint64(cuda.grid(1))
    while i < uint64(n):
        cuda.atomic.add(counts, min(its[i], HIST_BINS - 1), 1)
        i += uint64(cuda.gridsize(1))
    cuda.syncthreads()
    for b in range(cuda.threadIdx.x, HIST_BINS, cuda.blockDim.x):
        if counts[b] != 0:
            cuda.atomic.add(hist, b, counts[b])
