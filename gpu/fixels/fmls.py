"""CPU backend of FMLS segmentation: one numba ``prange`` loop over voxels, each voxel
independent and its math (:mod:`gpu.fixels.fmls_math`) sequential, so the output does not
depend on the number of threads."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from gpu.cpu_parallel import run_parallel_loop
from gpu.fixels import fmls_math as fm
from gpu.fixels.fmls_tables import FmlsTables

__all__ = ["segment_voxels_cpu"]


@njit(parallel=True, cache=True)
def _segment_loop(coeffs, lmax, unit, neighbours, weights, sh_to_amp, legendre, step, integral_threshold,
                  peak_threshold, merge_ratio, maxnum, dir_from_peak, counts, out_dir, out_afd,
                  out_peak):  # pragma: no cover - compiled
    n_dirs = unit.shape[0]
    n_coeffs = coeffs.shape[1]
    for v in prange(coeffs.shape[0]):
        counts[v] = 0
        sh = np.empty(n_coeffs)
        finite = True
        for c in range(n_coeffs):
            sh[c] = coeffs[v, c]
            finite = finite and np.isfinite(sh[c])
        if not finite or sh[0] <= 0.0:
            continue
        amp = np.empty(n_dirs)
        for d in range(n_dirs):
            amp[d] = fm.sample_amplitude(sh_to_amp, sh, d)
        if fm.sweep_blocked(amp, n_dirs):
            continue
        # stable sort of −amp: largest first, equal amplitudes by index
        order = np.argsort(-amp, kind="mergesort").astype(np.int32)
        n_positive = 0
        while n_positive < n_dirs and amp[order[n_positive]] > 0.0:
            n_positive += 1
        label = np.empty(n_dirs, np.int32)
        retro_dir = np.empty(n_dirs, np.int32)
        retro_lobe = np.empty(n_dirs, np.int32)
        adjacent = np.empty(neighbours.shape[1], np.int32)
        al = np.empty(legendre.shape[1])
        peak_value = np.empty(n_positive)
        mean = np.empty((n_positive, 3))
        integral = np.empty(n_positive)
        head = np.empty(n_positive, np.int32)
        tail = np.empty(n_positive, np.int32)
        peak_dir = np.empty((n_positive, 3))
        next_peak = np.empty(n_positive, np.int32)
        counts[v] = fm.segment_voxel(sh, lmax, amp, order, n_positive, unit, neighbours, weights, legendre, step,
                                     integral_threshold, peak_threshold, merge_ratio, maxnum, dir_from_peak,
                                     label, retro_dir, retro_lobe, adjacent, al, peak_value, mean, integral,
                                     head, tail, peak_dir, next_peak, out_dir[v], out_afd[v], out_peak[v])


def segment_voxels_cpu(coeffs: np.ndarray, tables: FmlsTables, integral_threshold: float, peak_threshold: float,
                       merge_ratio: float, maxnum: int, dir_from_peak: bool,
                       capacity: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """FMLS fixels of each voxel (row) of SH ``coeffs`` (V, n_coeffs) on the CPU.

    Returns counts (V,) int32, directions (V, capacity, 3), afd (V, capacity) and
    peak_amp (V, capacity), float64: voxel v's first min(counts[v], capacity) fixels in lobe
    order. A voxel whose count exceeds ``capacity`` must be run again with more.
    """
    n = coeffs.shape[0]
    counts = np.zeros(n, np.int32)
    out_dir = np.zeros((n, capacity, 3))
    out_afd = np.zeros((n, capacity))
    out_peak = np.zeros((n, capacity))
    run_parallel_loop(_segment_loop, np.ascontiguousarray(coeffs, np.float64), tables.lmax, tables.unit,
                      tables.neighbours, tables.weights, tables.sh_to_amp, tables.legendre, tables.legendre_step,
                      float(integral_threshold), float(peak_threshold), float(merge_ratio), int(maxnum),
                      bool(dir_from_peak), counts, out_dir, out_afd, out_peak)
    return counts, out_dir, out_afd, out_peak
