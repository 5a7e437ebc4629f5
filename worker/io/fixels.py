"""MRtrix3 fixel directories, written from fixel arrays as FMLS segmentation
(:func:`gpu.fixels.segment.segment_fods`) gives them.

The format (MRtrix3 documentation, "Fixel data file format"; ``core/fixel/helpers.h``): a
folder holding ``index`` (X, Y, Z, 2; uint32: volume 0 the number of fixels in the voxel,
volume 1 the position of its first fixel), ``directions`` (N, 3, 1; unit vectors in scanner
space, as ``sh2peaks`` writes peaks) and one (N, 1, 1) file per fixel quantity, all in one
image format. ``fixel2peaks`` turns it back into a peaks image, ``fixel2voxel ... count``
into the number of fibre orientations per voxel (NuFO).

``fod2fixel``'s quantities (:data:`FMLS_QUANTITIES`): ``afd``, the integral of the FOD over
the lobe, ``peak_amp``, the FOD amplitude at the lobe's largest peak, and ``disp``, their ratio.
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

__all__ = ["FIXEL_FORMATS", "FMLS_QUANTITIES", "NIFTI1_MAX_FIXELS", "write_fixel_images"]

FIXEL_FORMATS = ("mif", "mif.gz", "nii", "nii.gz")
#: NIfTI-1 stores each dimension as an int16: no more fixels fit its fixel data files.
NIFTI1_MAX_FIXELS = 32767
#: ``fod2fixel -afd -peak_amp -disp``'s fixel data files, in that order.
FMLS_QUANTITIES = ("afd", "peak_amp", "disp")


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
