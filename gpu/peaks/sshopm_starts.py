"""Start vectors for SS-HOPM and their neighbourhoods.

An even-order SH series is antipodally symmetric (f(−x) = f(x)), so the starts cover one
hemisphere; neighbourhoods are taken on the projective plane (x ~ −x).
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["hemisphere_starts", "start_neighbors", "neighbor_steps", "N_NEIGHBORS"]

N_NEIGHBORS = 6


@functools.cache
def hemisphere_starts(count: int) -> np.ndarray:
    """``count`` well-spread unit vectors with z > 0: a Fibonacci lattice on the upper
    hemisphere (equal-area rings z_i = 1 − (i + ½)/count, azimuth stepped by the golden angle)."""
    if count < 1:
        raise ValueError("the number of starts must be at least 1")
    i = np.arange(count) + 0.5
    z = 1.0 - i / count
    r = np.sqrt(1.0 - z * z)
    azimuth = np.pi * (3.0 - np.sqrt(5.0)) * i
    starts = np.stack([r * np.cos(azimuth), r * np.sin(azimuth), z], axis=1)
    starts.setflags(write=False)
    return starts


@functools.cache
def start_neighbors(count: int, k: int = N_NEIGHBORS) -> np.ndarray:
    """Indices (count, k) of each start's k nearest other starts, antipodes identified.

    A start seeds an SS-HOPM climb only where the FOD there is at least its neighbours'
    values (a discrete local maximum), so the climbs that would only rediscover the same
    maximum from its flanks are skipped.
    """
    starts = hemisphere_starts(count)
    k = min(k, count - 1)
    similarity = np.abs(starts @ starts.T)
    np.fill_diagonal(similarity, -1.0)
    neighbors = np.argsort(-similarity, axis=1, kind="stable")[:, :k].astype(np.int64)
    neighbors.setflags(write=False)
    return neighbors


def neighbor_steps(starts: np.ndarray, neighbors: np.ndarray) -> np.ndarray:
    """(S, Q, 4): for start t and its neighbour j = neighbors[t, q], the step from x_t to x_j
    (to −x_j when that is the nearer, antipodal copy on the hemisphere) and its length, in the
    starts' dtype, each value from the same operations :func:`gpu.peaks.sshopm_math.is_seed` once did per voxel."""
    x, y, z = (starts[:, k:k + 1] for k in range(3))
    dx, dy, dz = (starts[neighbors, k] for k in range(3))
    flip = dx * x + dy * y + dz * z < 0
    dx, dy, dz = (np.where(flip, -d, d) for d in (dx, dy, dz))
    dx, dy, dz = dx - x, dy - y, dz - z
    return np.ascontiguousarray(np.stack([dx, dy, dz, np.sqrt(dx * dx + dy * dy + dz * dz)], axis=-1))
