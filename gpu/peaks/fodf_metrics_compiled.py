"""The fODF metrics of :mod:`gpu.peaks.fodf_metrics` as two compiled passes over rows of
voxels, float32 throughout; :mod:`gpu.peaks.fodf_metrics` runs them over blocks on threads.

The passes release the interpreter lock from start to end (numpy's two dozen passes over the
volume would each take it back), so that the other output writers of a job run meanwhile
(their ahead-of-time builds, :mod:`gpu.ahead_of_time`, hold it: a fresh process's small job
gains more from not loading numba).
Every output is written for every voxel: the maps do not depend on what memory held before.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

import gpu.numba_cache  # noqa: F401 - numba's cache shared safely by processes

__all__: list[str] = []  # the passes are private: gpu.peaks.fodf_metrics runs them

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
