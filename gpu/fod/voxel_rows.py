"""The signals of a mask's voxels, ``volume[mask]``, gathered as fast as the volume's layout
allows: a DWI read from NIfTI lies a volume at a time (F order), where numpy's boolean
indexing visits every voxel's values far apart in memory."""

from __future__ import annotations

import numpy as np

__all__ = ["masked_rows", "rows_by_volume"]


def masked_rows(volume: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``volume[mask]``: the same rows in the same voxel order (C order of the mask).

    Parameters
    ----------
    volume : ndarray, shape (X, Y, Z, n)
    mask : ndarray of bool, shape (X, Y, Z)

    Returns
    -------
    ndarray, shape (V, n), V = mask.sum(), ``volume``'s dtype
        Laid out a column at a time (F order) where ``volume`` lies a volume at a time, each
        column then gathered along its volume's run; else as ``volume[mask]``.
    """
    volume, mask = np.asarray(volume), np.asarray(mask, dtype=bool)
    if mask.shape != volume.shape[:-1]:
        raise ValueError(f"the mask has shape {mask.shape} but the volume's voxels {volume.shape[:-1]}")
    if volume.ndim < 2 or not volume.flags.f_contiguous or volume.flags.c_contiguous:
        return volume[mask]
    return rows_by_volume(volume, np.ravel_multi_index(np.nonzero(mask), mask.shape, order="F"))


def rows_by_volume(volume: np.ndarray, index: np.ndarray) -> np.ndarray:
    """The rows of the voxels ``index`` (flat, x fastest) of ``volume`` (..., n) laid out a
    volume at a time (F order), each volume's values gathered along its run: (V, n), F order."""
    return np.take(volume.reshape(-1, volume.shape[-1], order="F").T, index, axis=1).T
