"""CUDA backend of FMLS segmentation: one block per voxel.

The block's threads sample the FOD on the 1281 directions and rank the positive samples
(:func:`gpu.fixels.fmls_math.positive_order_rank`, a stable descending sort) in parallel, in
shared memory; then thread 0 grows, thresholds and refines the lobes with the same
sequential math as the CPU backend (:func:`gpu.fixels.fmls_math.segment_voxel`). A voxel
that seeds more than MAX_LOBES lobes answers LOBE_OVERFLOW and is redone on the CPU.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, float64, int32

from gpu.fixels import fmls_math as fm
from gpu.fixels.fmls_tables import MAX_NEIGHBOURS, FmlsTables

__all__ = ["fmls_cuda", "segment_voxels_cuda", "MAX_LOBES", "THREADS"]

#: Lobe scratch in shared memory; a voxel seeding more is redone on the CPU.
MAX_LOBES = 64
#: Threads of a block (one voxel).
THREADS = 128
_MAX_COEFFS = 91  # lmax 12
_MAX_LEGENDRE = 49  # (12/2 + 1)²
_N_DIRS = 1281


@cuda.jit(cache=True)
def fmls_cuda(coeffs, lmax, unit, neighbours, weights, sh_to_amp, legendre, step, integral_threshold,
              peak_threshold, merge_ratio, maxnum, dir_from_peak, counts, out_dir, out_afd, out_peak):
    """Fixels of voxel ``blockIdx.x`` (row of ``coeffs``); arguments as
    :func:`gpu.fixels.fmls.segment_voxels_cpu`."""
    v = cuda.blockIdx.x
    t = cuda.threadIdx.x
    n_coeffs = coeffs.shape[1]
    sh = cuda.shared.array(_MAX_COEFFS, float64)
    amp = cuda.shared.array(_N_DIRS, float64)
    order = cuda.shared.array(_N_DIRS, int32)
    label = cuda.shared.array(_N_DIRS, int32)
    retro_dir = cuda.shared.array(_N_DIRS, int32)
    retro_lobe = cuda.shared.array(_N_DIRS, int32)
    peak_value = cuda.shared.array(MAX_LOBES, float64)
    integral = cuda.shared.array(MAX_LOBES, float64)
    mean = cuda.shared.array((MAX_LOBES, 3), float64)
    peak_dir = cuda.shared.array((MAX_LOBES, 3), float64)
    head = cuda.shared.array(MAX_LOBES, int32)
    tail = cuda.shared.array(MAX_LOBES, int32)
    next_peak = cuda.shared.array(MAX_LOBES, int32)
    state = cuda.shared.array(2, int32)  # [0]: segment (1) or not; [1]: positive samples

    if t == 0:
        ok = coeffs[v, 0] > 0.0
        for c in range(n_coeffs):
            ok = ok and math.isfinite(coeffs[v, c])
        state[0] = 1 if ok else 0
        state[1] = 0
    cuda.syncthreads()
    if state[0] == 0:
        if t == 0:
            counts[v] = 0
        return
    for c in range(t, n_coeffs, cuda.blockDim.x):
        sh[c] = coeffs[v, c]
    cuda.syncthreads()
    sh_view = sh[:n_coeffs]
    for d in range(t, _N_DIRS, cuda.blockDim.x):
        amp[d] = fm.sample_amplitude(sh_to_amp, sh_view, d)
    cuda.syncthreads()
    for d in range(t, _N_DIRS, cuda.blockDim.x):
        if amp[d] > 0.0:
            order[fm.positive_order_rank(amp, _N_DIRS, d)] = d
            cuda.atomic.add(state, 1, 1)
    cuda.syncthreads()
    if t != 0:
        return
    if fm.sweep_blocked(amp, _N_DIRS):
        counts[v] = 0
        return
    adjacent = cuda.local.array(MAX_NEIGHBOURS, int32)
    al = cuda.local.array(_MAX_LEGENDRE, float64)
    counts[v] = fm.segment_voxel(sh_view, lmax, amp, order, state[1], unit, neighbours, weights, legendre, step,
                                 integral_threshold, peak_threshold, merge_ratio, maxnum, dir_from_peak,
                                 label, retro_dir, retro_lobe, adjacent, al[:legendre.shape[1]], peak_value, mean,
                                 integral, head, tail, peak_dir, next_peak, out_dir[v], out_afd[v], out_peak[v])


def segment_voxels_cuda(coeffs: np.ndarray, tables: FmlsTables, integral_threshold: float, peak_threshold: float,
                        merge_ratio: float, maxnum: int, dir_from_peak: bool,
                        capacity: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`gpu.fixels.fmls.segment_voxels_cpu` on the GPU; counts may also be
    LOBE_OVERFLOW."""
    n = coeffs.shape[0]
    counts = np.zeros(n, np.int32)
    out_dir = np.zeros((n, capacity, 3))
    out_afd = np.zeros((n, capacity))
    out_peak = np.zeros((n, capacity))
    if n == 0:
        return counts, out_dir, out_afd, out_peak
    d_counts, d_dir, d_afd, d_peak = (cuda.to_device(a) for a in (counts, out_dir, out_afd, out_peak))
    device_tables = (cuda.to_device(np.ascontiguousarray(a)) for a in
                     (tables.unit, tables.neighbours, tables.weights, tables.sh_to_amp, tables.legendre))
    d_unit, d_neighbours, d_weights, d_sh_to_amp, d_legendre = device_tables
    fmls_cuda[n, THREADS](cuda.to_device(np.ascontiguousarray(coeffs, np.float64)), tables.lmax, d_unit, d_neighbours,
                          d_weights, d_sh_to_amp, d_legendre, tables.legendre_step, float(integral_threshold),
                          float(peak_threshold), float(merge_ratio), int(maxnum), bool(dir_from_peak), d_counts,
                          d_dir, d_afd, d_peak)
    return d_counts.copy_to_host(), d_dir.copy_to_host(), d_afd.copy_to_host(), d_peak.copy_to_host()
