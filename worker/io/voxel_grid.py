"""Whether a header's voxel grid can place the image in space: the check NIfTI and MRtrix
headers both pass before anything (orientation, QC picture, outputs) uses their affine."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["grid_problem"]

# Voxel sizes and the transform's linear part are millimetres: a kilometre is no voxel.
# Bounding them keeps the orientation's singular value decomposition within floating point.
_MAX_MM = 1e6
# The origin may lie far away (a NIfTI-2 header's default origin centres up to 2**63
# voxels), but not near overflow, where arithmetic on the affine turns it infinite.
_MAX_ORIGIN_MM = 1e30
# Smallest ratio of the voxel→scanner matrix's singular values: an image's voxel sizes
# differ by a few orders of magnitude at most, a collapsed axis by many more.
_MIN_CONDITION = 1e-8


def grid_problem(affine: np.ndarray, zooms: Sequence[float]) -> str | None:
    """What is wrong with a voxel→scanner ``affine`` (4×4) and the spatial voxel sizes
    ``zooms`` (first three used), as the end of a sentence ("has ..."); None when they
    describe a grid: finite, voxels within a kilometre, the origin short of overflow, the
    linear part of full rank."""
    spatial = [float(z) for z in zooms[:3]]
    if not all(math.isfinite(z) for z in spatial):
        return f"voxel sizes {spatial} that are not all numbers"
    affine = np.asarray(affine, np.float64)
    if not np.isfinite(affine).all():
        return "a non-finite voxel-to-scanner transform"
    if (np.abs(affine[:3, :3]) > _MAX_MM).any() or any(abs(z) > _MAX_MM for z in spatial):
        return f"a voxel-to-scanner transform or voxel sizes beyond {_MAX_MM:g} mm"
    if (np.abs(affine[:3, 3]) > _MAX_ORIGIN_MM).any():
        return f"an origin beyond {_MAX_ORIGIN_MM:g} mm"
    singular = np.linalg.svd(affine[:3, :3], compute_uv=False)
    if singular[0] == 0 or singular[-1] < _MIN_CONDITION * singular[0]:
        return "a voxel-to-scanner transform that collapses an axis (a zero or degenerate matrix)"
    return None
