"""Binary erosion and dilation of 3D masks by the 6-connected neighbourhood (a voxel and its
face neighbours), outside the volume counting as False: the morphology the response
algorithms select voxels with, on numpy (no scipy: docs/decisions/no-scipy.md)."""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["erode_6_connected", "dilate_6_connected"]


def _passes(mask: np.ndarray, iterations: int, combine: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """``iterations`` passes of ``combine`` over each voxel and its 6 face neighbours."""
    mask = np.asarray(mask, dtype=bool)
    if mask.ndim != 3:
        raise ValueError(f"the mask must be 3D, not of shape {mask.shape}")
    if iterations < 1:
        raise ValueError(f"the number of iterations must be at least 1, not {iterations}")
    centre = (slice(1, -1),) * 3
    for _ in range(iterations):
        padded = np.pad(mask, 1, constant_values=False)
        out = mask.copy()
        for axis in range(3):
            for shift in (slice(None, -2), slice(2, None)):
                neighbour = centre[:axis] + (shift,) + centre[axis + 1:]
                out = combine(out, padded[neighbour])
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
