"""MRtrix3 fixel directories written from per-voxel peaks.

The format (MRtrix3 documentation, "Fixel data file format"; ``core/fixel/helpers.h``): a
folder holding ``index`` (X, Y, Z, 2; uint32: volume 0 the number of fixels in the voxel,
volume 1 the position of its first fixel), ``directions`` (N, 3, 1; unit vectors in scanner
space, as ``sh2peaks`` writes peaks) and one (N, 1, 1) file per fixel quantity, all in one
image format. ``fixel2peaks`` turns it back into a peaks image, ``fixel2voxel ... count``
into the number of fibre orientations per voxel (NuFO).

The amplitudes go to ``peak_amp``, ``fod2fixel``'s name for the FOD amplitude at a peak
(its ``afd`` is the integral of the FOD over the lobe, a different quantity).
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import numpy as np

from worker.errors import InputError
from worker.io.images import write_image

__all__ = ["FIXEL_FORMATS", "write_fixel_directory"]

FIXEL_FORMATS = ("mif", "mif.gz", "nii", "nii.gz")


def write_fixel_directory(
    folder: Path,
    directions: np.ndarray,
    amplitudes: np.ndarray,
    count: np.ndarray,
    affine: np.ndarray,
    *,
    peak_fraction: np.ndarray | None = None,
    fmt: str = "mif",
) -> Path:
    """Write peaks as an MRtrix3 fixel directory.

    Parameters
    ----------
    folder : Path
        The fixel directory; must not exist or be empty (as MRtrix3 requires of its outputs).
        It appears whole or not at all: the files are written into a folder beside it,
        which is then renamed.
    directions : ndarray, shape (X, Y, Z, K, 3)
        Unit peak directions in scanner space (the frame of ``sh2peaks``).
    amplitudes : ndarray, shape (X, Y, Z, K)
        FOD amplitude at each peak, written to ``peak_amp``.
    count : ndarray, shape (X, Y, Z)
        Number of peaks in each voxel: the first ``count`` of the K are its fixels.
    affine : ndarray, shape (4, 4)
        Voxel → scanner mm of the grid, given to ``index``.
    peak_fraction : ndarray, shape (X, Y, Z, K), optional
        Written to ``peak_fraction`` when given.
    fmt : {"mif", "mif.gz", "nii", "nii.gz"}
        Image format of every file in the directory.

    Fixels are numbered voxel by voxel with x fastest, and within a voxel in peak order.
    """
    if fmt not in FIXEL_FORMATS:
        raise ValueError(f"fixel format {fmt!r}: choose one of {', '.join(FIXEL_FORMATS)}")
    directions = np.asarray(directions)
    amplitudes = np.asarray(amplitudes)
    count = np.asarray(count)
    grid, k = amplitudes.shape[:3], amplitudes.shape[3]
    if directions.shape != (*grid, k, 3) or count.shape != grid:
        raise ValueError(
            f"shapes do not match: directions {directions.shape}, amplitudes {amplitudes.shape}, "
            f"count {count.shape}; expected (X, Y, Z, K, 3), (X, Y, Z, K), (X, Y, Z)"
        )
    if peak_fraction is not None and np.shape(peak_fraction) != amplitudes.shape:
        raise ValueError(f"peak_fraction has shape {np.shape(peak_fraction)}, amplitudes {amplitudes.shape}")
    if count.min(initial=0) < 0 or count.max(initial=0) > k:
        raise ValueError(f"count must lie in 0…{k}")

    # Voxels x fastest (MRtrix3's loop order over the index image), peaks in order within each.
    fixel = np.arange(k) < count[..., None]
    in_order = fixel.transpose(2, 1, 0, 3)
    n_fixels = int(fixel.sum())
    if n_fixels == 0:
        raise InputError(
            "No fixels",
            "no voxel has a peak, and a fixel directory cannot be empty; check the mask and the "
            "peak thresholds, or choose another output format",
        )
    unit = directions.transpose(2, 1, 0, 3, 4)[in_order]
    if not np.isfinite(unit).all():
        raise ValueError("a counted peak has a non-finite direction; count must cover only the valid peaks")
    index = np.zeros((*grid, 2), np.uint32)
    index[..., 0] = count
    index[..., 1] = (np.cumsum(count.ravel(order="F")) - count.ravel(order="F")).reshape(grid, order="F")

    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise FileExistsError(f"{folder} exists and is not an empty folder; remove it or choose another output")
    partial = folder.with_name(f".{folder.name}.{uuid.uuid4().hex}.partial")
    partial.mkdir(parents=True)
    try:
        # Fixel data files are N×M×1 images on an identity transform (Fixel::data_header_from_index).
        fixel_files = {
            "directions": unit.astype(np.float32)[:, :, None],
            "peak_amp": amplitudes.transpose(2, 1, 0, 3)[in_order].astype(np.float32)[:, None, None],
        }
        if peak_fraction is not None:
            values = np.asarray(peak_fraction).transpose(2, 1, 0, 3)[in_order]
            fixel_files["peak_fraction"] = values.astype(np.float32)[:, None, None]
        write_image(partial / f"index.{fmt}", index, affine, keyval={"nfixels": str(n_fixels)})
        for name, values in fixel_files.items():
            write_image(partial / f"{name}.{fmt}", values, np.eye(4))
        os.replace(partial, folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return folder
