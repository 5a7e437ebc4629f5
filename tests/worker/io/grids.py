"""Test volumes on oblique grids, and the comparison of two volumes in scanner space."""

from __future__ import annotations

import nibabel as nib
import numpy as np
from scipy.spatial.transform import Rotation


def oblique_affine(permuted: bool = True) -> np.ndarray:
    """A grid no axis of which lies on a scanner axis (rotations of 10°, -20°, 30°), voxels of
    2 × 2.5 × 3 mm; ``permuted``: the image axes run roughly -z, -x, +y in scanner space, so
    MRtrix3 permutes and flips them when it realigns the transform."""
    rotation = Rotation.from_euler("xyz", [10, -20, 30], degrees=True).as_matrix()
    axes = np.array([[0, -1, 0], [0, 0, 1], [-1, 0, 0]]) if permuted else np.eye(3)
    affine = np.eye(4)
    affine[:3, :3] = rotation @ axes @ np.diag([2.0, 2.5, 3.0])
    affine[:3, 3] = [10.0, -20.0, 5.0]
    return affine


def save_nifti(data: np.ndarray, affine: np.ndarray, path) -> None:
    image = nib.Nifti1Image(data, affine, dtype=data.dtype)
    image.set_qform(affine, code=1)
    image.set_sform(affine, code=1)
    nib.save(image, path)


def in_world_order(data: np.ndarray, affine: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The volume with its axes permuted and flipped to run nearest to +x, +y, +z (nibabel's
    closest canonical orientation), and its affine: two arrays that hold the same values at the
    same scanner positions become equal."""
    ornt = nib.orientations.io_orientation(affine)
    return (nib.orientations.apply_orientation(data, ornt),
            affine @ nib.orientations.inv_ornt_aff(ornt, data.shape[:3]))
