"""NIfTI reading and writing for jobs: header-only checks, memory estimates, atomic writes.

Checks read the header alone (a .nii.gz is decompressed only as far as its header), so a
service can reject a bad upload before queueing it, and a header that promises more data
than is allowed is refused before any of it is decompressed: sizes claimed by the header
are compared with the limits first, then the compressed stream is inflated once, in chunks,
to prove it is whole and no longer than its header says (a gzip bomb is never held).

.nii.gz files are (de)compressed with ISA-L (``isal``), which measured faster than zlib at
both (docs/benchmarks.md); the files are ordinary gzip.
"""

from __future__ import annotations

import gzip
import io
import math
import zlib
from dataclasses import dataclass
from pathlib import Path

import isal.igzip
import nibabel as nib
import numpy as np
from nibabel.arrayproxy import ArrayProxy

from worker.io.atomic import atomic_path, write_bytes_atomic
from worker.errors import InputError

__all__ = [
    "NiftiInfo", "read_nifti_header", "check_nifti_limits", "check_nifti_complete", "load_memory_bytes", "load_nifti_data",
    "save_nifti_atomic", "derived_image", "NIFTI_SUFFIXES",
]

NIFTI_SUFFIXES = (".nii", ".nii.gz")
# Bytes a compressed NIfTI may inflate to beyond what its header accounts for (padding).
_GZIP_SLACK = 1 << 20
_GZIP_CHUNK = 1 << 20


@dataclass(frozen=True)
class NiftiInfo:
    path: Path
    shape: tuple[int, ...]
    dtype: np.dtype
    affine: np.ndarray
    zooms: tuple[float, ...]
    #: byte offset of the data in the (inflated) file, and whether slope/intercept apply
    offset: int
    scaled: bool

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
        # the header object nibabel hands back has vox_offset and scaling reset; the proxy keeps them
        offset = int(image.dataobj.offset)
        scaled = (float(image.dataobj.slope), float(image.dataobj.inter)) != (1.0, 0.0)
    except Exception as exc:  # nibabel raises many types for corrupt or foreign files
        raise InputError(
            "Unreadable NIfTI file",
            f"the {role} file {path.name!r} could not be read as NIfTI ({exc}); "
            "check that it is a complete .nii or .nii.gz file",
        ) from None
    if not isinstance(image, (nib.Nifti1Image, nib.Nifti2Image)):
        raise InputError("Not a NIfTI file", f"the {role} file {path.name!r} is {type(image).__name__}, not NIfTI")
    _check_dims(shape, f"the {role} file {path.name!r}")
    if dtype.kind not in "fiu" or dtype.fields is not None:
        raise InputError(
            "Unsupported data type",
            f"the {role} file {path.name!r} stores {dtype}; use a float or integer NIfTI "
            "(e.g. mrconvert -datatype float32)",
        )
    if not np.isfinite(affine).all():
        raise InputError("Invalid affine", f"the {role} file {path.name!r} has a non-finite affine; fix its header")
    return NiftiInfo(path, shape, dtype, affine, zooms, offset, scaled)


class _ChunkedReader(io.RawIOBase):
    """A decompressing stream whose ``readinto`` fills the buffer in 1 MiB reads, so nibabel
    inflates a .nii.gz straight into the array's memory (a gzip stream's own ``readinto``
    reads everything into a temporary first)."""

    def __init__(self, stream):
        self.stream = stream

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.stream.seek(offset, whence)

    def tell(self) -> int:
        return self.stream.tell()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        filled = 0
        while filled < len(view):
            count = self.stream.readinto(view[filled : filled + _GZIP_CHUNK])
            if not count:
                break
            filled += count
        return filled


def check_nifti_limits(path: Path, role: str, *, max_input_bytes: int, max_voxels: int) -> int:
    """Refuse a NIfTI file whose header exceeds the limits; returns the bytes its header
    says the (inflated) file holds, for :func:`check_nifti_complete`. Reads the header only.

    ``role`` names the file in messages (an upload's field name, "FOD"). Raises
    :class:`InputError` titled "Not gzip-compressed", "Not a NIfTI file", "Invalid dimensions",
    "Too many voxels" or "Input too large".
    """
    path = Path(path)
    compressed = path.name.endswith(".gz")
    if compressed:
        with open(path, "rb") as handle:
            if handle.read(2) != b"\x1f\x8b":
                raise InputError("Not gzip-compressed", f"{role}: the file ends in .gz but is not gzip data; "
                                 "rename it to .nii if it is uncompressed, or compress it with gzip")
    try:
        image = nib.load(path)
        shape = tuple(int(n) for n in image.shape)
        itemsize = np.dtype(image.header.get_data_dtype()).itemsize
        # the header object nibabel hands back has vox_offset reset; the proxy keeps it
        offset = int(getattr(image.dataobj, "offset", 0))
    except Exception as exc:  # nibabel raises many types for corrupt or foreign files
        raise InputError(
            "Not a NIfTI file",
            f"{role}: the file is not a readable NIfTI-1/2 image ({exc}); upload a .nii or "
            ".nii.gz file (convert with mrconvert or nibabel)",
        ) from None
    _check_dims(shape, f"{role}: the file")
    voxels = math.prod(shape[:3]) if shape else 0
    if voxels > max_voxels:
        raise InputError(
            "Too many voxels",
            f"{role}: the image grid {'×'.join(map(str, shape[:3]))} has {voxels} voxels, more "
            f"than this server's limit of {max_voxels} (FIBERTENSOR_MAX_VOXELS); crop it",
        )
    data_bytes = math.prod(shape) * itemsize
    if data_bytes > max_input_bytes:
        raise InputError(
            "Input too large",
            f"{role}: the header declares {data_bytes} bytes of image data "
            f"({'×'.join(map(str, shape))} × {itemsize} bytes), more than this server's limit "
            f"of {max_input_bytes} (FIBERTENSOR_MAX_INPUT_BYTES); crop the volume",
        )
    return offset + data_bytes


def _check_dims(shape: tuple[int, ...], what: str) -> None:
    # a damaged NIfTI-2 header can hold negative 64-bit dims, which nibabel passes through
    if any(n < 0 for n in shape):
        raise InputError(
            "Invalid dimensions",
            f"{what} declares the image size {'×'.join(map(str, shape))}, with a negative "
            "dimension; the header is damaged, write the file again",
        )


def check_nifti_complete(path: Path, role: str, expected: int) -> None:
    """Refuse a NIfTI file holding fewer than ``expected`` bytes (its header's offset and
    data), or, compressed, inflating to more than that plus padding; a .nii.gz is inflated
    once, a chunk at a time. Raises :class:`InputError` titled "Truncated file",
    "Truncated or damaged file" or "Input larger than its header"."""
    path = Path(path)
    if path.name.endswith(".gz"):
        inflated = _gunzip_size(path, limit=expected + _GZIP_SLACK, role=role)
    else:
        inflated = path.stat().st_size
    if inflated < expected:
        offset = int(getattr(nib.load(path).dataobj, "offset", 0))
        raise InputError(
            "Truncated file",
            f"{role}: the header declares {expected - offset} bytes of image data but the file "
            f"holds only {max(0, inflated - offset)}; the upload or the file is incomplete, send it again",
        )


def _gunzip_size(path: Path, *, limit: int, role: str) -> int:
    """Inflate a gzip file once, in chunks, counting bytes; stop past ``limit``."""
    total = 0
    try:
        with gzip.open(path, "rb") as stream:
            while chunk := stream.read(_GZIP_CHUNK):
                total += len(chunk)
                if total > limit:
                    raise InputError(
                        "Input larger than its header",
                        f"{role}: the compressed data inflates to more than its header declares; "
                        "the file is damaged, write it again",
                    )
    except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
        raise InputError(
            "Truncated or damaged file",
            f"{role}: the gzip stream is incomplete or corrupt ({exc}); the upload or the file "
            "was cut short, send it again",
        ) from None
    return total


def load_memory_bytes(info: NiftiInfo, dtype=np.float32) -> int:
    """Most bytes :func:`load_nifti_data` holds at once for a checked file: the stored
    values (inflated, or mapped from an uncompressed file), two float64 arrays while
    slope and intercept are applied, the float32 array and, for another ``dtype``, its copy;
    plus one read chunk."""
    values = math.prod(info.shape)
    scaling = 2 * values * 8 if info.scaled else 0
    converted = values * (4 + (np.dtype(dtype).itemsize if np.dtype(dtype) != np.float32 else 0))
    return values * info.dtype.itemsize + scaling + converted + _GZIP_CHUNK


def load_nifti_data(info: NiftiInfo, dtype=np.float32) -> np.ndarray:
    """The data array of a checked file, scaled by its slope/intercept, as ``dtype``: the
    values nibabel's ``get_fdata(dtype=np.float32)`` gives, in at most
    :func:`load_memory_bytes` of memory (a .nii.gz is inflated into the array, never held
    whole, and only as far as its header says)."""
    try:
        image = nib.load(info.path)
        if info.path.name.endswith(".nii.gz"):
            with isal.igzip.open(info.path, "rb") as stream:
                stored = image.dataobj
                spec = (stored.shape, stored.dtype, stored.offset, stored.slope, stored.inter)
                proxy = ArrayProxy(_ChunkedReader(stream), spec, mmap=False)
                data = np.asanyarray(proxy, dtype=np.float32)
        else:
            data = image.get_fdata(dtype=np.float32)
        return np.asarray(data, dtype=dtype)
    except MemoryError:
        raise InputError(
            "Out of memory",
            f"reading {info.path.name!r} needs about {load_memory_bytes(info, dtype)} bytes of memory, "
            "more than this machine has free; crop or mask the volume, or split it into slabs",
        ) from None
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
