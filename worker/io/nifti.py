"""NIfTI reading and writing for jobs: header-only checks, atomic writes.

Checks read the header alone (a .nii.gz is decompressed only as far as its header), so a
service can reject a bad upload before queueing it, and a header that promises more data
than is allowed is refused before any of it is decompressed.

.nii.gz files are (de)compressed with ISA-L (``isal``), faster than zlib at both
(docs/decisions/parallel-gzip.md); the files are ordinary gzip.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import zlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import nibabel as nib
import numpy as np
from isal import isal_zlib
from isal.igzip_lib import IsalError
from nibabel.volumeutils import apply_read_scaling, native_code, seek_tell

from worker.io.atomic import atomic_path
from worker.io.image_names import NIFTI_SUFFIXES
from worker.io.gzip_blocks import write_gzip
from worker.io.voxel_grid import grid_problem
from worker.errors import InputError, without_path
from worker.provenance import hash_to_end, read_and_hash_into

__all__ = [
    "NiftiInfo", "read_nifti_header", "check_stored_size", "inflate_checked", "read_gzip_into", "INFLATER_BYTES",
    "load_memory_bytes",
    "load_nifti_data", "scaled_values",
    "save_nifti_atomic", "derived_image", "NIFTI_SUFFIXES",
]

# Compressed bytes read per call, and the most inflated bytes one call returns (a bound on
# what a gzip bomb can inflate at once). Few, large calls: between two calls the reading
# thread must win the GIL back, which costs up to a switch interval while another thread
# runs Python (the kernels load in the background during the read).
_INPUT_CHUNK = 1 << 22
_PIECE = 1 << 23
#: Most bytes an inflater holds besides what it fills: its input chunk, what is left of it
#: (ISA-L hands back a copy after each call, while the chunk is still held) and one piece.
INFLATER_BYTES = 2 * _INPUT_CHUNK + _PIECE
# What reading an uncompressed file's header and extensions holds besides the data, with
# room for the interpreter's own small allocations meanwhile (in the property test, not
# reproducibly: 64 KiB was exceeded by 323 bytes once, 128 KiB by 148 bytes once, on a header
# nibabel repaired, where the call also ran numpy's array printing).
_PLAIN_READ_BYTES = 256 << 10
# The largest piece a size check inflates at a time (it keeps nothing).
_CHECK_PIECE = 1 << 20
# Bytes a .nii.gz may inflate to past the end of its data (padding) before it is refused.
_TRAILING_SLACK = 1 << 20
# Smaller files inflate on one thread: splitting them would cost more than it saves.
_PARALLEL_INFLATE_BYTES = 16 << 20


@dataclass(frozen=True)
class NiftiInfo:
    path: Path
    shape: tuple[int, ...]
    dtype: np.dtype
    affine: np.ndarray
    zooms: tuple[float, ...]
    #: byte offset of the data in the (inflated) file, whether slope/intercept apply, and
    #: the header's size (348 for NIfTI-1, 540 for NIfTI-2)
    offset: int
    scaled: bool
    header_bytes: int
    #: the header as nibabel read it (the template of images written on this grid), its
    #: sform replaced by the qform where the sform could not place the image
    header: nib.Nifti1Header = field(compare=False, repr=False)
    #: what a user should know about the header (a fallback to the qform)
    warnings: tuple[str, ...] = field(default=(), compare=False)

    # exact integers: a NIfTI-2 header's 64-bit dims would wrap numpy's product
    @property
    def n_voxels(self) -> int:
        return math.prod(self.shape[:3])

    @property
    def data_bytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


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
        header_bytes = int(header.sizeof_hdr)
    except Exception as exc:  # nibabel raises many types for corrupt or foreign files
        raise InputError(
            "Unreadable NIfTI file",
            f"the {role} file {path.name!r} could not be read as NIfTI ({without_path(exc, path)}); "
            "check that it is a complete .nii or .nii.gz file (convert other formats with mrconvert or nibabel)",
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
    affine, header, warnings = _placed(header, affine, zooms, f"the {role} file {path.name!r}")
    return NiftiInfo(path, shape, dtype, affine, zooms, offset, scaled, header_bytes, header, warnings)


def _placed(header: nib.Nifti1Header, affine: np.ndarray, zooms: tuple[float, ...],
            what: str) -> tuple[np.ndarray, nib.Nifti1Header, tuple[str, ...]]:
    """The affine, header and warnings of a header whose grid :func:`grid_problem` accepts:
    its best affine, or, where that is an sform that cannot place the image while its qform
    can, the qform (as NIfTI readers do without an sform), written into a copy of the header
    as its sform; an :class:`InputError` saying what to fix otherwise."""
    problem = grid_problem(affine, zooms)
    if problem is None:
        return affine, header, ()
    if header["sform_code"] > 0 and header["qform_code"] > 0 and grid_problem(affine, (1, 1, 1)) is not None:
        qform = np.asarray(header.get_qform(), np.float64)
        if grid_problem(qform, zooms) is None:
            header = header.copy()
            header.set_sform(qform, code=int(header["qform_code"]))
            return qform, header, (
                f"{what} has {problem} in its sform; its qform was used instead. "
                "Check the result's orientation, and fix the input's sform",
            )
    raise InputError(
        "Invalid affine",
        f"{what} has {problem}; fix its header (pixdim, sform and qform, e.g. with nibabel or "
        "mrconvert from the scanner's data) and send it again",
    )


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


def _truncated(role: str, declared: int, held: int) -> InputError:
    return InputError(
        "Truncated file",
        f"{role}: the header declares {declared} bytes of image data but the file holds only {held}; "
        "the upload or the file is incomplete, send or write it again",
    )


def _damaged_gzip(role: str, exc: BaseException) -> InputError:
    return InputError(
        "Truncated or damaged file",
        f"{role}: the gzip stream is incomplete or corrupt ({exc}); the upload or the file was cut short, "
        "send or write it again",
    )


def _longer_than_header(role: str, extra: int | None = None) -> InputError:
    """``extra``: the bytes an uncompressed file holds past its data (None: a ``.gz``)."""
    if extra is None:
        found = "the compressed data inflates to more than its header declares"
    else:
        found = (f"the file holds {extra} bytes past the image data its header declares, more than "
                 f"the {_TRAILING_SLACK} bytes of padding allowed")
    return InputError("Input larger than its header", f"{role}: {found}; the file is damaged, write it again")


# What ISA-L raises for a corrupt deflate stream or a wrong CRC/length trailer.
_GZIP_ERRORS = (zlib.error, isal_zlib.error, IsalError)


def check_stored_size(path: Path, offset: int, data_bytes: int, role: str) -> None:
    """Refuse a file whose data (``data_bytes`` from byte ``offset``) is not all there, or, for
    ``.gz``, whose stream is cut short or corrupt or inflates past that plus padding; a
    compressed file is inflated once, a chunk at a time, keeping nothing. The messages are
    those :func:`load_nifti_data` gives for the same damage (``role`` first), so a caller
    about to read the file may skip this. Raises :class:`InputError` titled "Truncated file",
    "Truncated or damaged file" or "Input larger than its header". The rule for bytes past the
    data is the same with or without compression: up to 1 MiB (padding) is accepted."""
    path = Path(path)
    if not path.name.endswith(".gz"):
        stored = path.stat().st_size
        if stored < offset + data_bytes:
            raise _truncated(role, data_bytes, max(0, stored - offset))
        if stored > offset + data_bytes + _TRAILING_SLACK:
            raise _longer_than_header(role, stored - offset - data_bytes)
    else:
        with open(path, "rb") as handle:
            _check_gzip_stream(_GzipInflater(handle, _CHECK_PIECE), offset, data_bytes, role)


def inflate_checked(path: Path, offset: int, data_bytes: int, role: str, target: Path) -> str:
    """:func:`check_stored_size` of a ``.gz`` file that keeps what it inflates: the same pass
    writes the inflated file up to the end of its data (header, extensions, data: a ``.nii``
    for a ``.nii.gz``) to ``target`` and hashes the compressed bytes it reads, so a service
    stores its upload inflated (a job then reads it at file speed) and still knows what was
    uploaded. Returns the hex sha256 of the file at ``path`` (:func:`worker.provenance.file_sha256`'s).
    Raises what :func:`check_stored_size` raises, and then leaves no ``target``."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle, open(target, "wb") as sink:
            # a file the check accepts was read to its end, so all of it was hashed
            _check_gzip_stream(_GzipInflater(handle, _CHECK_PIECE, digest), offset, data_bytes, role, sink.write)
            # padding inflated past the data is not part of a .nii
            sink.truncate(offset + data_bytes)
    except BaseException:
        Path(target).unlink(missing_ok=True)
        raise
    return digest.hexdigest()


def _check_gzip_stream(stream: "_GzipInflater", offset: int, data_bytes: int, role: str,
                       keep: Callable[[memoryview], object] | None = None) -> None:
    """:func:`check_stored_size` of an open ``.gz``: inflate it through (handing each piece to
    ``keep``) and refuse what it finds wrong."""
    try:
        stored = stream.skip(offset + data_bytes + _TRAILING_SLACK + 1, keep)
    except _GZIP_ERRORS as exc:
        raise _damaged_gzip(role, exc) from None
    if stream.cut_short:
        raise _damaged_gzip(role, stream.cut_short)
    if stored > offset + data_bytes + _TRAILING_SLACK:
        raise _longer_than_header(role)
    if stored < offset + data_bytes:
        raise _truncated(role, data_bytes, max(0, stored - offset))


class _GzipInflater:
    """The inflated bytes of an open gzip file, member after member, handed out by
    ``readinto``: ISA-L inflates ``input_chunk`` bytes of input at a time into pieces of at
    most ``_PIECE`` bytes, each copied once into the caller's buffer (a gzip file object
    would hand out new ``bytes`` or read ahead into a temporary).

    A stream cut short ends like a whole one, with ``cut_short`` set to an :class:`EOFError`
    saying so, so a reader gets the bytes there were and the caller decides; a corrupt stream
    raises ISA-L's error (``_GZIP_ERRORS``).
    """

    def __init__(self, handle: BinaryIO, input_chunk: int = _INPUT_CHUNK, digest: "hashlib._Hash | None" = None):
        self._handle = handle
        self._input_chunk = input_chunk
        self._digest = digest
        self.name = Path(handle.name).name
        self._input = b""
        self._inflater = None  # None between members
        self._piece = memoryview(b"")
        self.cut_short: EOFError | None = None

    def readinto(self, view: memoryview) -> int:
        """Copy up to ``len(view)`` inflated bytes into ``view``; 0 at the end of the file."""
        if not self._piece:
            # no more than asked for (a stream longer than its header is not inflated far)
            self._piece = memoryview(self._inflate_next(min(_PIECE, max(len(view), _CHECK_PIECE))))
        count = min(len(view), len(self._piece))
        view[:count] = self._piece[:count]
        self._piece = self._piece[count:]
        return count

    def skip(self, limit: int, keep: Callable[[memoryview], object] | None = None) -> int:
        """Inflate on to the end or past ``limit`` bytes, 1 MiB at a time, handing each piece
        to ``keep`` (else keeping nothing); the bytes inflated (the CRC is checked at the end
        of each member)."""
        total = len(self._piece)
        if keep is not None and self._piece:
            keep(self._piece)
        self._piece = memoryview(b"")
        while total <= limit and (piece := self._inflate_next(_CHECK_PIECE)):
            total += len(piece)
            if keep is not None:
                keep(memoryview(piece))
        return total

    def _inflate_next(self, size: int) -> bytes:
        while True:
            if not self._input:
                self._input = self._handle.read(self._input_chunk)
                if self._digest is not None:
                    self._digest.update(self._input)
                if not self._input:
                    if self._inflater is not None:
                        self.cut_short = EOFError("the gzip stream ends before its end-of-stream marker")
                        self._inflater = None
                    return b""
            if self._inflater is None:
                # Zero padding may follow a member (Python's gzip module skips it too).
                self._input = self._input.lstrip(b"\0")
                if not self._input:
                    continue
                self._inflater = isal_zlib.decompressobj(wbits=31)
            piece = self._inflater.decompress(self._input, size)
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
    while filled < len(view) and (count := stream.readinto(view[filled:])):
        filled += count
    return filled


class _ShortRead(EOFError):
    """The file ended inside the part being read; ``data_held``: the data bytes there were."""

    def __init__(self, what: str, size: int, filled: int):
        super().__init__(f"the file ends {size - filled} bytes into its {what}")
        self.data_held = filled if what == "data" else 0


def _read_exactly(stream, size: int, what: str, empty: Callable[..., np.ndarray] = np.empty) -> np.ndarray:
    """``size`` bytes of ``stream`` in a new aligned buffer made by ``empty`` (as
    ``np.empty``); :class:`_ShortRead` naming ``what`` if fewer."""
    buffer = empty(size, np.uint8)
    filled = _fill(stream, memoryview(buffer))
    if filled < size:
        raise _ShortRead(what, size, filled)
    return buffer


def read_gzip_into(path: Path, offset: int, out: memoryview, digest: "hashlib._Hash | None" = None) -> int:
    """Fill ``out`` (a writable byte buffer) with bytes ``offset`` to ``offset + len(out)`` of
    what gzip file ``path`` inflates to, inflated straight into it (the bytes before
    ``offset`` too, as scratch), nothing past them inflated; returns the bytes filled (fewer
    if it inflates to less, or is cut short). ``digest``: updated with every byte of the
    file, those the inflate took in and then the rest, read (not inflated) to the end."""
    out = memoryview(out).cast("B")
    filled = 0
    with open(path, "rb") as handle:
        stream = _GzipInflater(handle, digest=digest)
        skipped = 0
        while skipped < offset and len(out):
            count = _fill(stream, out[: min(offset - skipped, len(out))])
            skipped += count
            if not count:
                break
        if skipped == offset:
            filled = _fill(stream, out)
        if digest is not None:
            hash_to_end(handle, digest)
    return filled


class _HashingReader:
    """An open file's ``readinto`` that also updates ``digest`` with the bytes it reads."""

    def __init__(self, handle: BinaryIO, digest: "hashlib._Hash"):
        self._handle = handle
        self._digest = digest

    def readinto(self, view: memoryview) -> int:
        # the views are of the buffers the read returns, never reused: hashed while read on
        return read_and_hash_into(self._handle, view, self._digest)


def _hash_beside(path: Path, digest: "hashlib._Hash") -> "Future[None]":
    """Update ``digest`` with the whole file at ``path`` on a thread of its own."""
    def whole_file() -> None:
        with open(path, "rb") as handle:
            hash_to_end(handle, digest)

    hashing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="input-sha256")
    try:
        return hashing.submit(whole_file)
    finally:
        hashing.shutdown(wait=False)  # the thread ends with its task


def _read_stored(stream, empty: Callable[..., np.ndarray] = np.empty) -> tuple[nib.Nifti1Header, np.ndarray]:
    """The header and the stored (unscaled) data array of a NIfTI-1/2 byte stream.

    The header is checked and fixed as ``nib.load`` does; the data is read once, straight
    into the array's buffer (made by ``empty``), and viewed in the header's dtype and byte
    order, x fastest.
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
    stored = _read_exactly(stream, math.prod(shape) * dtype.itemsize, "data", empty)
    return header, stored.view(dtype).reshape(shape, order="F")


def scaled_values(stored: np.ndarray, header: nib.Nifti1Header, dtype: np.dtype) -> np.ndarray:
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
    another ``dtype``'s copy; plus, for a .nii.gz, the inflater's input chunk (a read of that
    size allocates it whole) and the copy of its rest, its piece (no larger than the inflated
    bytes) and the scratch of the trailing-data check; for a .nii, the header's small reads. (A read on several
    threads adds rapidgzip's buffers, a few MiB a thread: one job alone on a machine does
    that, never a service worker.)"""
    values = math.prod(info.shape)
    native_float32 = info.dtype == np.dtype(np.float32) and not info.scaled
    scaling = 2 * values * 8 if info.scaled else 0
    converted = 0 if native_float32 else values * 4
    if np.dtype(dtype) != np.float32:
        converted += values * np.dtype(dtype).itemsize
    stored = values * info.dtype.itemsize
    if info.path.name.endswith(".gz"):
        reader = 2 * _INPUT_CHUNK + min(_PIECE, info.offset + info.data_bytes) + _CHECK_PIECE
    else:
        reader = _PLAIN_READ_BYTES
    return stored + scaling + converted + reader


def _gzip_size_field(path: Path) -> int:
    """The last member's ISIZE: its inflated length modulo 2**32 (the file's last 4 bytes)."""
    with open(path, "rb") as handle:
        handle.seek(-4, os.SEEK_END)
        return int.from_bytes(handle.read(4), "little")


# docs/decisions/parallel-gzip.md
def _read_gzip_parallel(info: NiftiInfo, threads: int,
                        empty: Callable[..., np.ndarray] = np.empty) -> tuple[nib.Nifti1Header, np.ndarray] | None:
    """The header and stored data (in an array made by ``empty``) of a .nii.gz inflated by
    ``rapidgzip`` on ``threads`` threads (it splits even a single-member stream by speculative decoding, and checks the
    CRC); None where it cannot vouch for the file: any error, or a stream whose end does not
    match its size field (rapidgzip stops quietly at a cut). The caller
    then reads it on one thread, which says what is wrong with a damaged file."""
    try:
        import rapidgzip

        with rapidgzip.open(str(info.path), parallelization=threads) as stream:
            header, stored = _read_stored(stream, empty)
            scratch = memoryview(bytearray(_CHECK_PIECE))
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


def load_nifti_data(info: NiftiInfo, dtype=np.float32, *, threads: int = 1,
                    digest: "hashlib._Hash | None" = None,
                    empty: Callable[..., np.ndarray] = np.empty) -> np.ndarray:
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

    ``digest`` (a :mod:`hashlib` object): updated with every byte of the file in the same
    read (the compressed bytes of a .nii.gz as they are inflated; a read that succeeds goes
    to the end of the file), so that a job knows its input's checksum without reading the
    file twice; a read on several threads hashes the file beside them, on a thread of its own.

    ``empty``: allocates the array the stored values are read into, as ``np.empty(shape,
    dtype)`` does (page-locked memory for a GPU, :func:`gpu.cuda.host_memory.pinned_empty`).
    """
    role = info.path.name
    stream = None
    hashing = None
    try:
        parallel = None
        if threads > 1 and info.path.name.endswith(".gz") and info.path.stat().st_size >= _PARALLEL_INFLATE_BYTES:
            if digest is not None:
                # rapidgzip reads the file itself; hashed here once, whichever read follows
                hashing, digest = _hash_beside(info.path, digest), None
            parallel = _read_gzip_parallel(info, threads, empty)
        if parallel is not None:
            header, stored = parallel
        else:
            with open(info.path, "rb") as handle:
                if info.path.name.endswith(".gz"):
                    stream = _GzipInflater(handle, digest=digest)
                    header, stored = _read_stored(stream, empty)
                    if stream.skip(_TRAILING_SLACK) > _TRAILING_SLACK:
                        raise _longer_than_header(role)
                elif digest is None:
                    header, stored = _read_stored(handle, empty)
                else:
                    header, stored = _read_stored(_HashingReader(handle, digest), empty)
                    hash_to_end(handle, digest)
        if stream is not None and stream.cut_short:
            raise _damaged_gzip(role, stream.cut_short)
        if dtype is None:
            data = stored.astype(stored.dtype.newbyteorder("="), copy=False)
        else:
            data = scaled_values(stored, header, np.dtype(np.float32)).astype(dtype, copy=False)
    except MemoryError:
        raise InputError(
            "Out of memory",
            f"reading {info.path.name!r} needs about {load_memory_bytes(info, dtype or info.dtype)} bytes of memory, "
            "more than this machine has free; crop or mask the volume, or split it into slabs",
        ) from None
    except InputError:
        raise
    except _GZIP_ERRORS as exc:
        raise _damaged_gzip(role, exc) from None
    except _ShortRead as exc:
        # the same problem, in the same words, as check_stored_size finds before the read
        if stream is not None and stream.cut_short:
            raise _damaged_gzip(role, stream.cut_short) from None
        raise _truncated(role, info.data_bytes, exc.data_held) from None
    except Exception as exc:
        raise InputError(
            "Unreadable NIfTI data",
            f"the data of {info.path.name!r} could not be read ({exc}); the file is probably truncated or damaged",
        ) from None
    finally:
        if hashing is not None:
            wait([hashing])  # nothing reads the file on after the caller moves on
    if hashing is not None:
        hashing.result()
    return data


def derived_image(reference: NiftiInfo, data: np.ndarray) -> nib.Nifti1Image:
    """A NIfTI image of ``data`` on the reference's grid: same affine, qform/sform and zooms."""
    image = nib.Nifti1Image(data, reference.affine, header=reference.header)
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

    A .nii.gz is compressed by ISA-L at level 1 in 1 MiB blocks on ``threads`` threads
    (:func:`worker.io.gzip_blocks.write_gzip`); it inflates to bytes that depend on the image alone.
    """
    path = Path(path)
    parts = _stored_parts(image)
    with atomic_path(path) as temporary:
        if path.name.endswith(".gz"):
            write_gzip(temporary, parts, threads)
        else:
            with open(temporary, "wb") as out:
                for part in parts:
                    out.write(part)
    return path


def _stored_parts(image: nib.Nifti1Image) -> list:
    """The bytes nibabel writes for ``image`` as one ``.nii`` file, as the header (with its
    extensions and padding up to the data) and the data array in file (Fortran) order,
    without joining them into one ``bytes`` (a copy of the image under the interpreter
    lock). Where nibabel would convert or scale the array, its own bytes, as one part."""
    data = np.asanyarray(image.dataobj)
    header = image.header
    as_stored = (data.dtype == header.get_data_dtype() and data.dtype.isnative and header.endianness == native_code
                 and np.isnan(header["scl_slope"]) and np.isnan(header["scl_inter"]))
    if not as_stored:
        return [image.to_bytes()]
    image = nib.Nifti1Image(data, image.affine, header=header)
    image.update_header()
    header = image.header
    header.set_slope_inter(1.0, 0.0)  # what nibabel records for an array stored unscaled
    stream = io.BytesIO()
    header.write_to(stream)
    seek_tell(stream, header.get_data_offset(), write0=True)
    return [stream.getvalue(), np.ravel(data, order="F")]
