"""NIfTI reading and writing for jobs: header-only checks, atomic writes.

Checks read the header alone (a .nii.gz is decompressed only as far as its header), so a
service can reject a bad upload before queueing it, and a header that promises more data
than is allowed is refused before any of it is decompressed.

Whole .nii.gz files are (de)compressed with ISA-L (``isal``), which measured faster than
zlib at both (docs/benchmarks.md); the files are ordinary gzip.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import isal.igzip
import nibabel as nib
import numpy as np

from worker.io.atomic import atomic_path, write_bytes_atomic
from worker.errors import InputError

__all__ = ["NiftiInfo", "read_nifti_header", "load_nifti_data", "save_nifti_atomic", "derived_image", "NIFTI_SUFFIXES"]

NIFTI_SUFFIXES = (".nii", ".nii.gz")


@dataclass(frozen=True)
class NiftiInfo:
    path: Path
    shape: tuple[int, ...]
    dtype: np.dtype
    affine: np.ndarray
    zooms: tuple[float, ...]

    @property
    def n_voxels(self) -> int:
        return int(np.prod(self.shape[:3]))

    @property
    def data_bytes(self) -> int:
        return int(np.prod(self.shape)) * self.dtype.itemsize


def read_nifti_header(path: Path, role: str) -> NiftiInfo:
    """The header of NIfTI file ``path`` (``role`` names it in errors: "FOD", "mask")."""
    path = Path(path)
    if not path.name.endswith(NIFTI_SUFFIXES):
        raise InputError("Not a NIfTI file", f"the {role} file {path.name!r} must be NIfTI (.nii or .nii.gz)")
    try:
        image = nib.load(path)
        header = image.header
        shape = tuple(int(d) for d in image.shape)
        dtype = np.dtype(header.get_data_dtype())
        affine = np.asarray(image.affine, np.float64)
        zooms = tuple(float(z) for z in header.get_zooms())
    except Exception as exc:  # nibabel raises many types for corrupt or foreign files
        raise InputError(
            "Unreadable NIfTI file",
            f"the {role} file {path.name!r} could not be read as NIfTI ({exc}); "
            "check that it is a complete .nii or .nii.gz file",
        ) from None
    if not isinstance(image, (nib.Nifti1Image, nib.Nifti2Image)):
        raise InputError("Not a NIfTI file", f"the {role} file {path.name!r} is {type(image).__name__}, not NIfTI")
    if dtype.kind not in "fiu" or dtype.fields is not None:
        raise InputError(
            "Unsupported data type",
            f"the {role} file {path.name!r} stores {dtype}; use a float or integer NIfTI "
            "(e.g. mrconvert -datatype float32)",
        )
    if not np.isfinite(affine).all():
        raise InputError("Invalid affine", f"the {role} file {path.name!r} has a non-finite affine; fix its header")
    return NiftiInfo(path, shape, dtype, affine, zooms)


def _image_from_bytes(raw: bytes) -> nib.Nifti1Image:
    """A NIfTI-1 or NIfTI-2 image from the bytes of a whole .nii file."""
    klass = nib.Nifti2Image if int.from_bytes(raw[:4], "little") in (540, 540 << 24) else nib.Nifti1Image
    return klass.from_bytes(raw)


def load_nifti_data(info: NiftiInfo, dtype=np.float32) -> np.ndarray:
    """The data array of a checked file, scaled by its slope/intercept, as ``dtype``."""
    try:
        if info.path.name.endswith(".nii.gz"):
            image = _image_from_bytes(isal.igzip.decompress(info.path.read_bytes()))
        else:
            image = nib.load(info.path)
        return np.asarray(image.get_fdata(dtype=np.float32), dtype=dtype)
    except Exception as exc:
        raise InputError(
            "Unreadable NIfTI data",
            f"the data of {info.path.name!r} could not be read ({exc}); the file is probably truncated",
        ) from None


def derived_image(reference: NiftiInfo, data: np.ndarray) -> nib.Nifti1Image:
    """A NIfTI image of ``data`` on the reference's grid: same affine, qform/sform and zooms."""
    header = nib.load(reference.path).header.copy()
    image = nib.Nifti1Image(data, reference.affine, header=header)
    image.set_data_dtype(data.dtype)
    image.header.set_data_shape(data.shape)
    zooms = reference.zooms[:3] + (1.0,) * (data.ndim - 3)
    image.header.set_zooms(zooms[: data.ndim])
    image.header["scl_slope"] = np.nan
    image.header["scl_inter"] = np.nan
    image.header["intent_code"] = 0
    return image


def save_nifti_atomic(image: nib.Nifti1Image, path: Path) -> Path:
    """Write ``image`` to a temporary name beside ``path`` and rename it into place, so a
    reader never sees a half-written file."""
    path = Path(path)
    if path.name.endswith(".nii.gz"):
        return write_bytes_atomic(path, isal.igzip.compress(image.to_bytes(), compresslevel=1))
    with atomic_path(path) as temporary:
        nib.save(image, temporary)
    return path
