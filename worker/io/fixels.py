"""MRtrix3 fixel directories: written from per-voxel peaks (:func:`write_fixel_directory`) or
from fixel arrays as FMLS segmentation gives them (:func:`write_fixel_images`).

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

import math
import os
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from numba import njit

from gpu.cpu_blocks import leaf_pool
from worker.errors import InputError
from worker.io.images import write_image

__all__ = ["FIXEL_FORMATS", "NIFTI1_MAX_FIXELS", "write_fixel_directory", "write_fixel_images"]

FIXEL_FORMATS = ("mif", "mif.gz", "nii", "nii.gz")
#: NIfTI-1 stores each dimension as an int16: no more fixels fit its fixel data files.
NIFTI1_MAX_FIXELS = 32767


@njit(nogil=True, cache=True)
def _gather_fixels(count, directions, amplitudes, fraction, index, unit, peak_amp, peak_fraction,
                   fixel):  # pragma: no cover - compiled
    """Fixels voxel by voxel with x fastest (MRtrix3's loop over the index image), peaks in
    order within each, numbered from ``fixel``, in one pass that releases the GIL: ``index``
    (X, Y, Z, 2) gets each voxel's count and first fixel, ``unit``, ``peak_amp`` and (unless
    it is empty) ``peak_fraction`` the fixels' rows. False if a counted peak's direction is
    not finite."""
    nx, ny, nz = count.shape
    finite = True
    for z in range(nz):
        for y in range(ny):
            for x in range(nx):
                n = count[x, y, z]
                index[x, y, z, 0] = n
                index[x, y, z, 1] = fixel
                for p in range(n):
                    for i in range(3):
                        unit[fixel, i] = directions[x, y, z, p, i]
                        finite &= math.isfinite(directions[x, y, z, p, i])
                    peak_amp[fixel] = amplitudes[x, y, z, p]
                    if peak_fraction.shape[0]:
                        peak_fraction[fixel] = fraction[x, y, z, p]
                    fixel += 1
    return finite


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

    n_fixels = int(count.sum())
    if n_fixels == 0:
        raise InputError(
            "No fixels",
            "no voxel has a peak, and a fixel directory cannot be empty; check the mask and the "
            "peak thresholds, or choose another output format",
        )
    index = np.empty((*grid, 2), np.uint32)
    unit = np.empty((n_fixels, 3), np.float32)
    peak_amp = np.empty(n_fixels, np.float32)
    fraction = np.empty(n_fixels if peak_fraction is not None else 0, np.float32)
    given_fraction = np.zeros((*grid, 0), np.float32) if peak_fraction is None else np.asarray(peak_fraction)
    # Slabs of z on threads: x runs fastest in the fixel order and slowest in the arrays, so
    # one pass is bound by address translation, and each slab's fixels are one range.
    firsts = np.concatenate([[0], np.cumsum(count.sum(axis=(0, 1), dtype=np.int64))])
    slabs = np.linspace(0, grid[2], min(grid[2], len(os.sched_getaffinity(0))) + 1).astype(int)
    passes = [leaf_pool().submit(_gather_fixels, *(a[:, :, z0:z1] for a in (count, directions, amplitudes,
                                                                             given_fraction, index)),
                                 unit, peak_amp, fraction, firsts[z0]) for z0, z1 in zip(slabs, slabs[1:])]
    finite = [done.result() for done in passes]
    if not all(finite):
        raise ValueError("a counted peak has a non-finite direction; count must cover only the valid peaks")
    quantities = {"peak_amp": peak_amp}
    if peak_fraction is not None:
        quantities["peak_fraction"] = fraction
    return write_fixel_images(folder, index, unit, quantities, affine, fmt=fmt)


def write_fixel_images(folder: Path, index: np.ndarray, directions: np.ndarray, quantities: dict[str, np.ndarray],
                       affine: np.ndarray, *, fmt: str = "mif") -> Path:
    """Write a fixel directory from its arrays, atomically (the folder appears whole or not
    at all; it must not exist or be empty).

    Parameters
    ----------
    index : ndarray, shape (X, Y, Z, 2), uint32
        Per voxel its number of fixels and its first fixel.
    directions : ndarray, shape (N, 3), float32
    quantities : dict of name → ndarray, shape (N,)
        One fixel data file each, ``name.fmt``.
    affine : ndarray, shape (4, 4)
        Voxel → scanner mm of the grid, given to ``index``.
    fmt : {"mif", "mif.gz", "nii", "nii.gz"}
    """
    if fmt not in FIXEL_FORMATS:
        raise ValueError(f"fixel format {fmt!r}: choose one of {', '.join(FIXEL_FORMATS)}")
    n_fixels = directions.shape[0]
    if n_fixels == 0:
        raise InputError("No fixels", "no voxel has a fixel, and a fixel directory cannot be empty; check the mask "
                         "and the thresholds")
    if int(index[..., 0].sum()) != n_fixels or any(np.shape(q) != (n_fixels,) for q in quantities.values()):
        raise ValueError(f"index counts {int(index[..., 0].sum())} fixels, directions {n_fixels}, quantities "
                         f"{ {name: np.shape(q) for name, q in quantities.items()} }")
    # Fixel data files are N×M×1 images on an identity transform (Fixel::data_header_from_index).
    files = {
        "index": (index, affine, {"nfixels": str(n_fixels)}),
        "directions": (directions[:, :, None], np.eye(4), None),
        **{name: (values[:, None, None], np.eye(4), None) for name, values in quantities.items()},
    }
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
