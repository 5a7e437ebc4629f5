"""Binary morphology of 3D masks on numpy (no scipy: docs/decisions/no-scipy.md): erosion and
dilation by the 6-connected neighbourhood (a voxel and its face neighbours, outside the
volume counting as False), which the response algorithms select voxels with; and the 3×3×3
median, the largest 6-connected component and hole filling, which ``dwi2mask`` cleans its
mask with (:mod:`gpu.fod.brain_mask`)."""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

__all__ = ["erode_6_connected", "dilate_6_connected", "median_3x3x3", "largest_6_connected", "fill_holes"]


def _face_neighbours(padded: np.ndarray) -> Iterator[np.ndarray]:
    """The 6 face neighbours of each voxel of a volume padded by one voxel on every side, as
    views the shape of the volume."""
    centre = (slice(1, -1),) * 3
    for axis in range(3):
        for shift in (slice(None, -2), slice(2, None)):
            yield padded[centre[:axis] + (shift,) + centre[axis + 1:]]


def _passes(mask: np.ndarray, iterations: int, combine: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """``iterations`` passes of ``combine`` over each voxel and its 6 face neighbours."""
    mask = np.asarray(mask, dtype=bool)
    if mask.ndim != 3:
        raise ValueError(f"the mask must be 3D, not of shape {mask.shape}")
    if iterations < 1:
        raise ValueError(f"the number of iterations must be at least 1, not {iterations}")
    for _ in range(iterations):
        out = mask.copy()
        for neighbour in _face_neighbours(np.pad(mask, 1, constant_values=False)):
            out = combine(out, neighbour)
        mask = out
    return mask


def erode_6_connected(mask: np.ndarray, iterations: int = 1) -> np.ndarray:
    """Voxels that are in the mask with their 6 face neighbours, ``iterations`` times; a voxel on
    the border erodes (as ``scipy.ndimage.binary_erosion`` with ``generate_binary_structure(3, 1)``
    and ``border_value=0``).

    Parameters
    ----------
    mask : (X, Y, Z) array
        Nonzero is in the mask.
    iterations : int ≥ 1
        Passes, each eroding the previous one's result.

    Returns
    -------
    (X, Y, Z) bool array
        The eroded mask.
    """
    return _passes(mask, iterations, np.logical_and)


def dilate_6_connected(mask: np.ndarray, iterations: int = 1) -> np.ndarray:
    """Voxels in the mask or face neighbours of one, ``iterations`` times (as
    ``scipy.ndimage.binary_dilation`` with ``generate_binary_structure(3, 1)`` and
    ``border_value=0``).

    Parameters
    ----------
    mask : (X, Y, Z) array
        Nonzero voxels are the seeds.
    iterations : int ≥ 1
        Passes: the result reaches voxels up to this many face steps from a seed.

    Returns
    -------
    (X, Y, Z) bool array
        The dilated mask.
    """
    return _passes(mask, iterations, np.logical_or)


def _box_3x3x3(values: np.ndarray) -> np.ndarray:
    """Sum of each voxel's 3×3×3 neighbourhood, the part inside the volume (separable)."""
    total = values.astype(np.int32)
    for axis in range(3):
        padded = np.pad(total, [(1, 1) if a == axis else (0, 0) for a in range(3)])
        size = total.shape[axis]
        total = sum(np.take(padded, range(k, k + size), axis=axis) for k in range(3))
    return total


def median_3x3x3(mask: np.ndarray) -> np.ndarray:
    """``maskfilter median`` (MRtrix3's ``Filter::Median``, extent 3) of a binary mask: a voxel
    is set where at least half its 3×3×3 neighbourhood (truncated at the volume's border) is,
    the median of n values being the mean of the middle two for even n.

    Parameters
    ----------
    mask : (X, Y, Z) array

    Returns
    -------
    (X, Y, Z) bool array
    """
    mask = np.asarray(mask, dtype=bool)
    count = _box_3x3x3(mask)
    size = _box_3x3x3(np.ones(mask.shape, bool))
    return 2 * count >= size + size % 2


def _components_6(mask: np.ndarray) -> np.ndarray:
    """A label per voxel of ``mask`` (the least flat index of its 6-connected component; the
    voxel count for voxels outside): each voxel takes its face neighbours' least label, then
    each label its own label's (pointer jumping), until nothing changes."""
    n = mask.size
    outside = n
    labels = np.where(mask.ravel(), np.arange(n), outside)
    table = np.append(labels, outside)
    while True:
        grid = table[:n].reshape(mask.shape)
        least = grid.copy()
        for neighbour in _face_neighbours(np.pad(grid, 1, constant_values=outside)):
            np.minimum(least, neighbour, out=least)
        least = np.where(mask, least, outside).ravel()
        while True:
            jumped = table[least]
            if np.array_equal(jumped, least):
                break
            least = jumped
        if np.array_equal(least, table[:n]):
            return least.reshape(mask.shape)
        table[:n] = least


def largest_6_connected(mask: np.ndarray) -> np.ndarray:
    """The largest 6-connected component of a mask (``maskfilter connect -largest``; of equal
    sizes, the one whose first voxel in memory order comes first); empty for an empty mask.

    Parameters
    ----------
    mask : (X, Y, Z) array

    Returns
    -------
    (X, Y, Z) bool array
    """
    mask = np.asarray(mask, dtype=bool)
    if not mask.any():
        return mask.copy()
    labels = _components_6(mask)
    counts = np.bincount(labels[mask], minlength=mask.size)
    return labels == int(np.argmax(counts))


def fill_holes(mask: np.ndarray) -> np.ndarray:
    """The mask with every part of its complement but the largest 6-connected one set: its
    holes filled, as ``dwi2mask`` fills them.

    Parameters
    ----------
    mask : (X, Y, Z) array

    Returns
    -------
    (X, Y, Z) bool array
    """
    return ~largest_6_connected(~np.asarray(mask, dtype=bool))
