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
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import nibabel as nib
import numpy as np
from isal import igzip, igzip_threaded, isal_zlib
from isal.igzip_lib import IsalError
from nibabel.volumeutils import apply_read_scaling

from worker.io.atomic import atomic_path
from worker.errors import InputError, without_path

__all__ = [
    "NiftiInfo", "read_nifti_header", "check_nifti_limits", "check_nifti_complete", "inflated_size", "read_gzip_range",
    "load_memory_bytes",
    "load_nifti_data",
    "save_nifti_atomic", "derived_image", "NIFTI_SUFFIXES",
]

NIFTI_SUFFIXES = (".nii", ".nii.gz")
# Compressed bytes read per call, and the most inflated bytes one call returns (a bound on
# what a gzip bomb can inflate at once). Few, large calls: between two calls the reading
# thread must win the GIL back, which costs up to a switch interval while another thread
# runs Python (the kernels load in the background during the read).
_INPUT_CHUNK = 1 << 22
_PIECE = 1 << 23
# Bytes a size check inflates at a time (it keeps nothing).
_CHECK_CHUNK = 1 << 20
# Bytes a .nii.gz may inflate to past the end of its data (padding) before it is refused.
_TRAILING_SLACK = 1 << 20
# Blocks compressed independently (in parallel) when a .nii.gz is written.
_GZIP_BLOCK = 1 << 20
# Smaller files inflate on one thread: splitting them would cost more than it saves.
_PARALLEL_INFLATE_BYTES = 16 << 20


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
            f"the {role} file {path.name!r} could not be read as NIfTI ({without_path(exc, path)}); "
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
            f"{role}: the file is not a readable NIfTI-1/2 image ({without_path(exc, path)}); upload a .nii or "
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
    if not shape or 0 in shape:
        raise InputError(
            "Invalid dimensions",
            f"{what} declares the image size {'×'.join(map(str, shape)) or '(none)'}, which holds no "
            "voxel; write the volume with its real dimensions",
        )


def check_nifti_complete(path: Path, role: str, expected: int, *, read_through: bool = True) -> None:
    """Refuse a NIfTI file whose data starts inside its header, or that holds fewer than
    ``expected`` bytes (its header's offset and data), or, compressed, inflates to more than
    that plus padding; a .nii.gz is inflated once, a chunk at a time, unless ``read_through``
    is off (a caller about to read the file with :func:`load_nifti_data`, which refuses the
    same streams with the same titles). Raises :class:`InputError` titled "Unreadable NIfTI
    file", "Truncated file", "Truncated or damaged file" or "Input larger than its header"."""
    path = Path(path)
    image = nib.load(path)
    header_size = 540 if isinstance(image, nib.Nifti2Image) else 348
    if int(getattr(image.dataobj, "offset", header_size)) < header_size:
        # nibabel would read the header's own bytes as data
        raise InputError(
            "Unreadable NIfTI file",
            f"{role}: the file puts its data at byte {image.dataobj.offset} (vox_offset), inside its "
            f"{header_size}-byte header; the header is damaged, write the file again (e.g. with nibabel or mrconvert)",
        )
    if path.name.endswith(".gz"):
        if not read_through:
            return
        inflated = inflated_size(path, limit=expected + _TRAILING_SLACK, role=role)
    else:
        inflated = path.stat().st_size
    if inflated < expected:
        offset = int(getattr(image.dataobj, "offset", 0))
        raise InputError(
            "Truncated file",
            f"{role}: the header declares {expected - offset} bytes of image data but the file "
            f"holds only {max(0, inflated - offset)}; the upload or the file is incomplete, send it again",
        )


def inflated_size(path: Path, *, limit: int, role: str) -> int:
    """Inflate a gzip file once, in 1 MiB chunks, counting bytes; stop past ``limit`` (a
    stream longer than its header says is refused, not inflated). :class:`InputError` for a
    stream that is longer, cut short or corrupt."""
    total = 0
    try:
        with igzip.open(path, "rb") as stream:
            while chunk := stream.read(_CHECK_CHUNK):
                total += len(chunk)
                if total > limit:
                    raise InputError(
                        "Input larger than its header",
                        f"{role}: the compressed data inflates to more than its header declares; "
                        "the file is damaged, write it again",
                    )
    except InputError:
        raise
    except (EOFError, OSError, ValueError, zlib.error, isal_zlib.error, IsalError) as exc:
        raise InputError(
            "Truncated or damaged file",
            f"{role}: the gzip stream is incomplete or corrupt ({exc}); the upload or the file "
            "was cut short, send it again",
        ) from None
    return total


class _GzipInflater:
    """The inflated bytes of an open gzip file, member after member, handed out by
    ``readinto``: ISA-L inflates ``_INPUT_CHUNK`` bytes of input at a time into pieces of at
    most ``_PIECE`` bytes, each copied once into the caller's buffer (a gzip file object
    would hand out new ``bytes`` or read ahead into a temporary)."""

    def __init__(self, handle: BinaryIO):
        self._handle = handle
        self.name = Path(handle.name).name
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
    """Read from ``stream`` until ``view`` is full or the stream ends (or is cut short); the
    bytes read."""
    filled = 0
    while filled < len(view):
        try:
            count = stream.readinto(view[filled:])
        except EOFError:
            break
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


def read_gzip_range(path: Path, offset: int, size: int) -> memoryview:
    """Bytes ``offset`` to ``offset + size`` of what gzip file ``path`` inflates to (fewer if
    it inflates to less, or is cut short), inflated straight into one buffer; nothing past
    them is inflated."""
    buffer = bytearray(max(offset, size))
    with open(path, "rb") as handle:
        stream = _GzipInflater(handle)
        if _fill(stream, memoryview(buffer)[:offset]) < offset:
            return memoryview(b"")
        return memoryview(buffer)[: _fill(stream, memoryview(buffer)[:size])]


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
    scratch = memoryview(bytearray(_CHECK_CHUNK))
    extra = 0
    while count := inflater.readinto(scratch):
        extra += count
        if extra > _TRAILING_SLACK:
            raise InputError(
                "Input larger than its header",
                f"the compressed data of {inflater.name!r} inflates to more than its header declares; "
                "the file is damaged, write it again",
            )


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


def load_memory_bytes(info: NiftiInfo, dtype=np.float32) -> int:
    """Most bytes :func:`load_nifti_data` holds at once for a checked file: the stored values
    (inflated into their array), while slope and intercept are applied the scaled copy and a
    float64 intermediate, the float32 array unless the stored values are native float32,
    another ``dtype``'s copy; plus the inflater's input chunk, its piece and the scratch
    of the trailing-data check."""
    values = math.prod(info.shape)
    native_float32 = info.dtype == np.dtype(np.float32) and not info.scaled
    scaling = 2 * values * 8 if info.scaled else 0
    converted = 0 if native_float32 else values * 4
    if np.dtype(dtype) != np.float32:
        converted += values * np.dtype(dtype).itemsize
    stored = values * info.dtype.itemsize
    return stored + scaling + converted + _INPUT_CHUNK + _PIECE + _CHECK_CHUNK


def _gzip_size_field(path: Path) -> int:
    """The last member's ISIZE: its inflated length modulo 2**32 (the file's last 4 bytes)."""
    with open(path, "rb") as handle:
        handle.seek(-4, os.SEEK_END)
        return int.from_bytes(handle.read(4), "little")


def _read_gzip_parallel(info: NiftiInfo, threads: int) -> tuple[nib.Nifti1Header, np.ndarray] | None:
    """The header and stored data of a .nii.gz inflated by ``rapidgzip`` on ``threads``
    threads (it splits even a single-member stream by speculative decoding, and checks the
    CRC); None where it cannot vouch for the file: not installed, any error, or a stream
    whose end does not match its size field (rapidgzip stops quietly at a cut). The caller
    then reads it on one thread, which says what is wrong with a damaged file."""
    try:
        import rapidgzip

        with rapidgzip.open(str(info.path), parallelization=threads) as stream:
            header, stored = _read_stored(stream)
            scratch = memoryview(bytearray(_CHECK_CHUNK))
            inflated = stream.tell()
            while count := stream.readinto(scratch):
                inflated += count
                if inflated - stored.nbytes - header.get_data_offset() > _TRAILING_SLACK:
                    return None
    except MemoryError:
        raise
    except Exception:  # zero padding between members, cut streams, bad CRCs: see above
        return None
    if inflated % 2**32 != _gzip_size_field(info.path):
        return None
    return header, stored


def load_nifti_data(info: NiftiInfo, dtype=np.float32, *, threads: int = 1) -> np.ndarray:
    """The data array of a checked file, shape ``info.shape``, x fastest (Fortran order).

    ``dtype`` given: the values nibabel's ``get_fdata(dtype=np.float32)`` gives (scaled by
    the header's slope and intercept), bit for bit, as ``dtype``. ``dtype=None``: the stored
    values, unscaled, in native byte order (nibabel's ``dataobj.get_unscaled()``).

    A .nii.gz is inflated by ISA-L in cache-sized pieces straight into the array (no whole
    compressed or inflated copy of the file is held), its CRC checked; unscaled native data
    is returned without a further copy, so the read costs little more than the inflate.
    ``threads`` > 1 inflates a large file on that many threads instead (rapidgzip): for one
    job on an otherwise idle machine; many jobs at once keep one thread each, which costs
    the fewest CPU seconds.
    """
    try:
        parallel = None
        if threads > 1 and info.path.name.endswith(".gz") and info.path.stat().st_size >= _PARALLEL_INFLATE_BYTES:
            parallel = _read_gzip_parallel(info, threads)
        if parallel is not None:
            header, stored = parallel
        else:
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
    except MemoryError:
        raise InputError(
            "Out of memory",
            f"reading {info.path.name!r} needs about {load_memory_bytes(info, dtype or info.dtype)} bytes of memory, "
            "more than this machine has free; crop or mask the volume, or split it into slabs",
        ) from None
    except InputError:
        raise
    except EOFError as exc:
        raise InputError(
            "Truncated file",
            f"the data of {info.path.name!r} is incomplete ({exc}); the upload or the file was cut short, "
            "send or write it again",
        ) from None
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
