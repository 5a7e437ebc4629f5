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
from concurrent.futures import ThreadPoolExecutor
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

    # Fixels voxel by voxel with x fastest (MRtrix3's loop over the index image), peaks in
    # order within each: fixel f of the voxel whose first fixel is `first` is its peak
    # f - first, taken straight from the (X, Y, Z, K) arrays by flat index.
    n_fixels = int(count.sum())
    if n_fixels == 0:
        raise InputError(
            "No fixels",
            "no voxel has a peak, and a fixel directory cannot be empty; check the mask and the "
            "peak thresholds, or choose another output format",
        )
    per_voxel = count.ravel(order="F").astype(np.int64)
    first = np.cumsum(per_voxel) - per_voxel
    voxel = np.arange(per_voxel.size).reshape(grid).ravel(order="F")  # C-order number of each voxel
    peak = np.repeat(voxel * k - first, per_voxel) + np.arange(n_fixels)
    unit = np.take(directions.reshape(-1, 3), peak, axis=0)
    if not np.isfinite(unit).all():
        raise ValueError("a counted peak has a non-finite direction; count must cover only the valid peaks")
    index = np.stack([per_voxel, first], axis=-1).astype(np.uint32).reshape(*grid, 2, order="F")
    # Fixel data files are N×M×1 images on an identity transform (Fixel::data_header_from_index).
    files = {
        "index": (index, affine, {"nfixels": str(n_fixels)}),
        "directions": (unit.astype(np.float32, copy=False)[:, :, None], np.eye(4), None),
        "peak_amp": (np.take(amplitudes.reshape(-1), peak).astype(np.float32, copy=False)[:, None, None], np.eye(4), None),
    }
    if peak_fraction is not None:
        values = np.take(np.reshape(peak_fraction, -1), peak).astype(np.float32, copy=False)
        files["peak_fraction"] = (values[:, None, None], np.eye(4), None)

    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise FileExistsError(f"{folder} exists and is not an empty folder; remove it or choose another output")
    partial = folder.with_name(f".{folder.name}.{uuid.uuid4().hex}.partial")
    partial.mkdir(parents=True)
    try:
        # The files compress side by side (gzip releases the GIL).
        with ThreadPoolExecutor(max_workers=len(files)) as workers:
            writes = [workers.submit(write_image, partial / f"{name}.{fmt}", data, grid_affine, keyval=keyval)
                      for name, (data, grid_affine, keyval) in files.items()]
        for write in writes:
            write.result()
        os.replace(partial, folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return folder
