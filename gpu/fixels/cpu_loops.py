"""The FMLS segmentation CPU loop: a numba ``prange`` loop over blocks of voxels around the
per-voxel math of :mod:`gpu.fixels.fmls_math`, and the sort of a voxel's positive samples it
runs first.

Each voxel is independent and its math sequential, so a result is the same bytes on every
run, any number of threads and in the loop's ahead-of-time build, which runs it on one
thread (:mod:`gpu.fixels.fmls` picks one or the other).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from gpu.fixels import fmls_math as fm

__all__ = ["segment_loop", "sort_positive"]

# voxels per prange iteration, which allocates its scratch once
_BLOCK = 64
# prange splits its range into one contiguous share per thread, and voxels cost from nothing
# (background) to many lobes: the shares interleave this many stripes of the volume
_STRIPES = 64
# runs sorted by insertion before merging
_RUN = 16


@njit(cache=True)
def sort_positive(amp, order, scratch):  # pragma: no cover - compiled
    """The indices of the positive entries of ``amp`` (D,) into ``order``, largest first, equal
    values by index (a stable sort), by insertion into short runs and bottom-up merges;
    ``scratch`` (D,) int. Returns their number."""
    n = 0
    for d in range(amp.shape[0]):
        if amp[d] > 0.0:
            order[n] = d
            n += 1
    for start in range(0, n, _RUN):
        stop = min(start + _RUN, n)
        for i in range(start + 1, stop):
            d = order[i]
            value = amp[d]
            j = i
            while j > start and amp[order[j - 1]] < value:
                order[j] = order[j - 1]
                j -= 1
            order[j] = d
    src, dst = order, scratch
    in_scratch = False
    width = _RUN
    while width < n:
        for left in range(0, n, 2 * width):
            mid = min(left + width, n)
            right = min(left + 2 * width, n)
            i, j, k = left, mid, left
            while i < mid and j < right:
                # ties keep the left run's (lower) index first
                if amp[src[j]] > amp[src[i]]:
                    dst[k] = src[j]
                    j += 1
                else:
                    dst[k] = src[i]
                    i += 1
                k += 1
            while i < mid:
                dst[k] = src[i]
                i += 1
                k += 1
            while j < right:
                dst[k] = src[j]
                j += 1
                k += 1
        src, dst = dst, src
        in_scratch = not in_scratch
        width *= 2
    if in_scratch:
        order[:n] = scratch[:n]
    return n


# nogil: its ahead-of-time build runs on several host threads (gpu.ahead_of_time.run_on_threads)
@njit(parallel=True, cache=True, nogil=True)
def segment_loop(coeffs, lmax, unit, neighbours, weights, amp_from_sh, legendre, step, factors, integral_threshold,
                 peak_threshold, merge_ratio, maxnum, dir_from_peak, counts, out_dir, out_afd,
                 out_peak):  # pragma: no cover - compiled
    """FMLS fixels of each voxel (row) of SH ``coeffs`` (V, n_coeffs) with the sampling tables
    of :class:`gpu.fixels.fmls_tables.FmlsTables`: its count into ``counts`` (V,) and its
    first fixels, in lobe order, into ``out_dir`` (V, capacity, 3), ``out_afd`` and
    ``out_peak`` (V, capacity) (:func:`gpu.fixels.fmls_math.segment_voxel`)."""
    n_dirs = unit.shape[0]
    n_coeffs = coeffs.shape[1]
    n_voxels = coeffs.shape[0]
    n_blocks = (n_voxels + _BLOCK - 1) // _BLOCK
    per_stripe = (n_blocks + _STRIPES - 1) // _STRIPES
    for i in prange(per_stripe * _STRIPES):
        # each thread's contiguous share of i takes blocks from every stripe of the volume
        block = (i % _STRIPES) * per_stripe + i // _STRIPES
        if block >= n_blocks:
            continue
        sh = np.empty(n_coeffs)
        amp = np.empty(n_dirs)
        order = np.empty(n_dirs, np.int32)
        scratch = np.empty(n_dirs, np.int32)
        label = np.empty(n_dirs, np.int32)
        adjacent = np.empty(neighbours.shape[1], np.int32)
        al = np.empty(legendre.shape[1])
        # a lobe per positive sample at most
        peak_value = np.empty(n_dirs)
        mean = np.empty((n_dirs, 3))
        integral = np.empty(n_dirs)
        head = np.empty(n_dirs, np.int32)
        tail = np.empty(n_dirs, np.int32)
        seed = np.empty(n_dirs, np.int32)
        next_peak = np.empty(n_dirs, np.int32)
        peak_dir = np.empty((n_dirs, 3))
        for v in range(block * _BLOCK, min(block * _BLOCK + _BLOCK, n_voxels)):
            counts[v] = 0
            finite = True
            for c in range(n_coeffs):
                sh[c] = coeffs[v, c]
                finite = finite and np.isfinite(sh[c])
            if not finite or sh[0] <= 0.0:
                continue
            fm.sample_amplitudes(amp_from_sh, sh, amp)
            if fm.sweep_blocked(amp, n_dirs):
                continue
            n_positive = sort_positive(amp, order, scratch)
            counts[v] = fm.segment_voxel(sh, lmax, amp, order, n_positive, unit, neighbours, weights, legendre, step,
                                         factors, integral_threshold, peak_threshold, merge_ratio, maxnum,
                                         dir_from_peak, label, adjacent, al, peak_value, mean, integral, head, tail,
                                         seed, next_peak, peak_dir, out_dir[v], out_afd[v], out_peak[v])
