"""The arrays a peaks job's outputs are made from, beside the engine's results: the
``sh2peaks`` image, the fODF metric maps, and the rotation into the image axes."""

from __future__ import annotations

import math
from dataclasses import fields
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from gpu.peaks.fodf_metrics import FodfMetrics
    from gpu.peaks.search import PeaksResult

__all__ = ["SLAB_VOXELS", "peaks_image", "fodf_metrics_of", "scanner_to_image_axes", "peaks_frame_rotation"]

#: Voxels of a slab of the peaks image (:func:`peaks_image`): its results and image stay in
#: the cache.
SLAB_VOXELS = 1 << 16


def peaks_image(directions: np.ndarray, amplitudes: np.ndarray, rotation: np.ndarray | None = None) -> np.ndarray:
    """The ``sh2peaks`` image (..., 3K) float32 of unit ``directions`` (..., K, 3) and
    ``amplitudes`` (..., K): volume 3k + i is amplitude_k × (rotation · direction_k)[i]
    (``rotation`` (3, 3), None: the identity), a slab at a time. Made in the order
    NIfTI and our MRtrix writer store it (first axis fastest, volumes last), so that they take
    it without copying it into that order: a volume at a time, in slabs of the last spatial
    axis of about :data:`SLAB_VOXELS` voxels, so that results with each voxel's peaks
    together (the engine's) are read 3K times from the cache rather than from memory."""
    spatial, k = amplitudes.shape[:-1], amplitudes.shape[-1]
    image = np.empty((*spatial, 3 * k), np.float32, order="F")
    slabs = [()]
    if spatial:
        step = max(1, SLAB_VOXELS // max(1, math.prod(spatial[:-1])))
        slabs = [(slice(None),) * (len(spatial) - 1) + (slice(start, start + step),)
                 for start in range(0, spatial[-1], step)]
    for slab in slabs:
        slab_directions, slab_amplitudes, slab_image = directions[slab], amplitudes[slab], image[slab]
        if rotation is not None:
            slab_directions = slab_directions @ rotation.T
        for peak in range(k):
            for axis in range(3):
                np.multiply(slab_directions[..., peak, axis], slab_amplitudes[..., peak],
                            out=slab_image[..., 3 * peak + axis])
    return image


def fodf_metrics_of(sh: np.ndarray, result: "PeaksResult") -> "FodfMetrics":
    """:func:`gpu.peaks.fodf_metrics.fodf_metrics` of a run, computed with the spatial axes in
    the order in which the engine's voxels lie in memory (reversed for a NIfTI volume, whose
    first axis is fastest), so that its compiled pass reads the arrays without first copying
    them into C order; the maps come back as views on the input's axes, the 3D ones in
    NIfTI's order (written without a copy)."""
    from gpu.peaks.fodf_metrics import FodfMetrics, fodf_metrics

    arrays = (sh, result.directions, result.amplitudes, result.count)
    d = result.count.ndim
    flip = not result.count.flags.c_contiguous and result.count.T.flags.c_contiguous

    def flipped(a: np.ndarray) -> np.ndarray:  # its own inverse
        return a.transpose(*range(d - 1, -1, -1), *range(d, a.ndim)) if flip else a

    maps = fodf_metrics(*map(flipped, arrays))
    return FodfMetrics(**{f.name: flipped(getattr(maps, f.name)) for f in fields(maps)})


def scanner_to_image_axes(affine: np.ndarray) -> np.ndarray:
    """The rotation taking scanner-frame vectors to the image axes: the orthogonal factor
    R of the affine's 3×3 part M = R·P (polar decomposition; R = U·Vᵀ from M's SVD), so
    that a direction d in scanner space has components Rᵀd along the (mm-scaled) axes."""
    u, _, vt = np.linalg.svd(np.asarray(affine, np.float64)[:3, :3])
    return u @ vt


def peaks_frame_rotation(basis: str, frame: str, affine: np.ndarray) -> np.ndarray | None:
    """The rotation taking the directions of an FOD in SH ``basis`` to the peaks image's
    ``frame`` ("scanner" or "voxel"), None where they are in it already: MRtrix3's SH are in
    scanner space, DIPY's along the image axes (the frame of its gradient table). With R from
    :func:`scanner_to_image_axes`, a voxel-frame direction v is R·v in scanner space."""
    in_scanner = basis == "mrtrix"
    if in_scanner == (frame == "scanner"):
        return None
    rotation = scanner_to_image_axes(affine)
    return rotation if frame == "scanner" else rotation.T
