"""NIfTI reading and writing for jobs: header-only checks, atomic writes.

Checks read the header alone (a .nii.gz is decompressed only as far as its header), so a
service can reject a bad upload before queueing it, and a header that promises more data
than is allowed is refused before any of it is decompressed.

.nii.gz files are (de)compressed with ISA-L (``isal``), which measured faster than zlib at
both (docs/benchmarks.md); the files are ordinary gzip.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import nibabel as nib
import numpy as np
from isal import igzip_threaded, isal_zlib
from nibabel.volumeutils import apply_read_scaling

from worker.io.atomic import atomic_path
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


# Compressed bytes read per call, and the most inflated bytes one call returns: pieces that
# stay in cache on their way into the array, and a bound on what a gzip bomb can inflate.
_INPUT_CHUNK = 1 << 18
_PIECE = 1 << 20
# Bytes a .nii.gz may inflate to past the end of its data (padding) before it is refused.
_TRAILING_SLACK = 1 << 20
# Blocks compressed independently (in parallel) when a .nii.gz is written.
_GZIP_BLOCK = 1 << 20


class _GzipInflater:
    """The inflated bytes of an open gzip file, member after member, handed out by
    ``readinto``: ISA-L inflates 256 KiB of input at a time into pieces of at most 1 MiB,
    each copied once into the caller's buffer (a gzip file object would hand out new
    ``bytes`` or read ahead into a temporary)."""

    def __init__(self, handle: BinaryIO):
        self._handle = handle
        self._input = b""
        self._inflater = None  # None between members
        self._piece = memoryview(b"")

    def readinto(self, view: memoryview) -> int:
        """Copy up to ``len(view)`` inflated bytes into ``view``; 0 at the end of the file."""
        if not self._piece:
            self._piece = memoryview(self._inflate_next())
        count = min(len(view), len(self._piece))
        view[:count] = self._piece[:count]
        self._piece = self._piece[count:]
        return count

    def _inflate_next(self) -> bytes:
        while True:
            if not self._input:
                self._input = self._handle.read(_INPUT_CHUNK)
                if not self._input:
                    if self._inflater is not None:
                        raise EOFError("the gzip stream ends before its end-of-stream marker")
                    return b""
            if self._inflater is None:
                # Zero padding may follow a member (Python's gzip module skips it too).
                self._input = self._input.lstrip(b"\0")
                if not self._input:
                    continue
                self._inflater = isal_zlib.decompressobj(wbits=31)
            piece = self._inflater.decompress(self._input, _PIECE)
            if self._inflater.eof:
                self._input = self._inflater.unused_data
                self._inflater = None
            else:
                self._input = self._inflater.unconsumed_tail
            if piece:
                return piece


def _fill(stream, view: memoryview) -> int:
    """Read from ``stream`` until ``view`` is full or the stream ends; the bytes read."""
    filled = 0
    while filled < len(view):
        count = stream.readinto(view[filled:])
        if not count:
            break
        filled += count
    return filled


def _read_exactly(stream, size: int, what: str) -> np.ndarray:
    """``size`` bytes of ``stream`` in a new aligned buffer; EOFError naming ``what`` if fewer."""
    buffer = np.empty(size, np.uint8)
    filled = _fill(stream, memoryview(buffer))
    if filled < size:
        raise EOFError(f"the file ends {size - filled} bytes into its {what}")
    return buffer


def _read_stored(stream) -> tuple[nib.Nifti1Header, np.ndarray]:
    """The header and the stored (unscaled) data array of a NIfTI-1/2 byte stream.

    The header is checked and fixed as ``nib.load`` does; the data is read once, straight
    into the array's buffer, and viewed in the header's dtype and byte order, x fastest.
    """
    first = _read_exactly(stream, 4, "header").tobytes()
    # sizeof_hdr, in either byte order: 540 for NIfTI-2, 348 for NIfTI-1
    nifti2 = 540 in (int.from_bytes(first, "little"), int.from_bytes(first, "big"))
    klass = nib.Nifti2Header if nifti2 else nib.Nifti1Header
    size = klass.template_dtype.itemsize
    header = klass(first + _read_exactly(stream, size - 4, "header").tobytes(), check=True)
    shape, dtype, offset = header.get_data_shape(), header.get_data_dtype(), header.get_data_offset()
    if offset < size:
        raise ValueError(f"the header puts the data at byte {offset}, inside the {size}-byte header")
    if offset > size:
        _read_exactly(stream, offset - size, "header extensions")
    stored = _read_exactly(stream, math.prod(shape) * dtype.itemsize, "data")
    return header, stored.view(dtype).reshape(shape, order="F")


def _check_trailing(inflater: _GzipInflater) -> None:
    """Inflate the rest of the file, so its CRC is checked; refuse more than padding."""
    scratch = memoryview(bytearray(_PIECE))
    extra = 0
    while count := inflater.readinto(scratch):
        extra += count
        if extra > _TRAILING_SLACK:
            raise ValueError("the file inflates to more data than its header declares")


def _scaled(stored: np.ndarray, header: nib.Nifti1Header, dtype: np.dtype) -> np.ndarray:
    """``stored`` scaled by the header's slope and intercept, as nibabel's array proxy does
    (``ArrayProxy.__array__``): the same casts in the same order, so the same bits; no copy
    when there is nothing to scale or convert."""
    slope, inter = header.get_slope_inter()
    slope = np.asanyarray(1.0 if slope is None else slope)
    inter = np.asanyarray(0.0 if inter is None else inter)
    if np.can_cast(slope, dtype):
        slope = slope.astype(dtype)
    if np.can_cast(inter, dtype):
        inter = inter.astype(dtype)
    scaled = apply_read_scaling(stored, slope, inter)
    return scaled.astype(np.promote_types(scaled.dtype, dtype), copy=False).astype(dtype, copy=False)


def load_nifti_data(info: NiftiInfo, dtype=np.float32) -> np.ndarray:
    """The data array of a checked file, shape ``info.shape``, x fastest (Fortran order).

    ``dtype`` given: the values nibabel's ``get_fdata(dtype=np.float32)`` gives (scaled by
    the header's slope and intercept), bit for bit, as ``dtype``. ``dtype=None``: the stored
    values, unscaled, in native byte order (nibabel's ``dataobj.get_unscaled()``).

    A .nii.gz is inflated by ISA-L in cache-sized pieces straight into the array (no whole
    compressed or inflated copy of the file is held), its CRC checked; unscaled native data
    is returned without a further copy, so the read costs little more than the inflate.
    """
    try:
        with open(info.path, "rb") as handle:
            if info.path.name.endswith(".gz"):
                stream = _GzipInflater(handle)
                header, stored = _read_stored(stream)
                _check_trailing(stream)
            else:
                header, stored = _read_stored(handle)
        if dtype is None:
            return stored.astype(stored.dtype.newbyteorder("="), copy=False)
        return _scaled(stored, header, np.dtype(np.float32)).astype(dtype, copy=False)
    except Exception as exc:
        raise InputError(
            "Unreadable NIfTI data",
            f"the data of {info.path.name!r} could not be read ({exc}); the file is probably truncated or damaged",
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


def save_nifti_atomic(image: nib.Nifti1Image, path: Path, threads: int | None = None) -> Path:
    """Write ``image`` to a temporary name beside ``path`` and rename it into place, so a
    reader never sees a half-written file.

    A .nii.gz is compressed by ISA-L at level 1 in 1 MiB blocks, each primed with the 32 KiB
    before it (pigz's scheme, ``isal.igzip_threaded``), on ``threads`` threads (default: one
    per MiB, at most 4 and no more than this process's cores). The file's bytes depend on
    the image alone, not on the thread count or the time (gzip mtime 0).
    """
    path = Path(path)
    if not path.name.endswith(".nii.gz"):
        with atomic_path(path) as temporary:
            nib.save(image, temporary)
        return path
    raw = image.to_bytes()
    if threads is None:
        threads = max(1, min(4, len(os.sched_getaffinity(0)), len(raw) // _GZIP_BLOCK))
    with atomic_path(path) as temporary:
        with igzip_threaded.open(temporary, "wb", compresslevel=1, threads=threads, block_size=_GZIP_BLOCK) as stream:
            # one write: the blocks are cut at the same places whatever the thread count
            stream.write(raw)
    return path
