"""The fODF metrics of :mod:`gpu.peaks.fodf_metrics` as two compiled passes over blocks of
voxels on threads, float32 throughout.

The passes release the interpreter lock from start to end (numpy's two dozen passes over the
volume would each take it back), so that the other output writers of a job run meanwhile.
Every output is written for every voxel: the maps do not depend on what memory held before.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

import gpu.numba_cache  # noqa: F401 - numba's cache shared safely by processes
from gpu.cpu_blocks import run_in_blocks

__all__ = ["voxel_metrics", "colour_rows"]

_SQRT_4PI = math.sqrt(4.0 * math.pi)


@njit(nogil=True, cache=True)
def _voxel_metrics(sh0, amplitudes, count, afd_max, afd_total, afd_sum, peak_fraction):  # pragma: no cover - compiled
    largest = np.float32(0.0)
    for v in range(count.shape[0]):
        n = count[v]
        total = np.float32(0.0)
        for p in range(amplitudes.shape[1]):
            value = np.float32(amplitudes[v, p]) if p < n else np.float32(0.0)
            peak_fraction[v, p] = value
            total += value
        afd_max[v] = peak_fraction[v, 0]
        afd_sum[v] = total
        inverse = np.float32(1.0) / total if total != 0 else np.float32(0.0)
        for p in range(amplitudes.shape[1]):
            peak_fraction[v, p] *= inverse
        afd_total[v] = np.float32(_SQRT_4PI) * np.float32(sh0[v])
        if n > 0 and afd_max[v] > largest:
            largest = afd_max[v]
    return largest


@njit(nogil=True, cache=True)
def _colour(directions, afd_max, count, colour, scale):  # pragma: no cover - compiled
    for v in range(count.shape[0]):
        weight = np.float32(afd_max[v]) * scale
        for axis in range(3):
            value = abs(directions[v, 0, axis]) * weight if count[v] != 0 else 0.0
            colour[v, axis] = np.uint8(min(max(value, 0.0), 255.0))


def voxel_metrics(sh0: np.ndarray, amplitudes: np.ndarray, count: np.ndarray, afd_max: np.ndarray,
                  afd_total: np.ndarray, afd_sum: np.ndarray, peak_fraction: np.ndarray) -> np.float32:
    """Fill rows of voxels' ``afd_max``, ``afd_total``, ``afd_sum`` (V,) and ``peak_fraction``
    (V, K) from the l = 0 coefficients ``sh0`` (V,), ``amplitudes`` (V, K) and ``count``
    (V,); returns the largest ``afd_max`` of the voxels with a peak (0 if none)."""
    # The pass reads each value as float32: contiguous float32 copies give it the same
    # numbers and one signature, whatever the backend's precision or the volume's layout (a
    # CPU run's float64 amplitudes compiled a second one after `fibertensor warmup`).
    sh0, amplitudes = (np.ascontiguousarray(a, np.float32) for a in (sh0, amplitudes))
    largest = run_in_blocks(_voxel_metrics, [sh0, amplitudes, count, afd_max, afd_total, afd_sum, peak_fraction])
    return np.float32(max(largest, default=0.0))


def colour_rows(directions: np.ndarray, afd_max: np.ndarray, count: np.ndarray, colour: np.ndarray,
                scale: np.float32) -> None:
    """Fill ``colour`` (V, 3) uint8 with ⌊|d_1| · a_1 · ``scale``⌋ clipped to 0…255, 0 where
    ``count`` (V,) is 0, from the first of ``directions`` (V, K, 3) and ``afd_max`` (V,)."""
    run_in_blocks(_colour, [directions, afd_max, count, colour], (scale,))
