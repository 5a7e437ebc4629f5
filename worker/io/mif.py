"""MRtrix image format (``.mif``, ``.mif.gz``, ``.mih`` + data file): header-only checks,
reading and atomic writing, with no MRtrix3 code.

The format (MRtrix3 documentation, "Image file formats"; ``core/formats/mrtrix_utils.h``):
a text header ``mrtrix image``, ``key: value`` lines, ``END``, then raw data at
``file: . OFFSET`` (or in a separate file named by ``file:`` for ``.mih``); ``.mif.gz`` is
the whole ``.mif`` gzip-compressed. Keys: ``dim``, ``vox``, ``layout`` (symbolic strides:
``-0,+1,+2,+3`` stores axis 0 fastest and reversed), ``datatype``, ``transform`` (three rows
of the voxel→scanner matrix with unit columns: voxel sizes are in ``vox``), ``scaling``
(``offset,scale``), and free key–value pairs, kept here.

Arrays come out as our NIfTI reader gives them, i.e. as nibabel reads the NIfTI that
``mrconvert image.mif image.nii`` writes (MRtrix3 ``File::NIfTI::adjust_transform``): the
spatial axes in the order in which they are stored, each running the way it is stored, the
other axes after them in header order; ``affine`` maps those indices to scanner space. The
same volume read from either file gives identical arrays and affines, hence identical
peaks. Writing is the inverse: the data's own order is kept on disk and the header carries
the transform realigned as MRtrix3 realigns it (``Header::realign_transform``: axes permuted
and flipped to lie nearest to RAS, the strides saying how they are stored), which is what
``mrconvert image.nii image.mif`` writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Iterator, Mapping, Sequence

import isal.igzip
import numpy as np
from isal.igzip_lib import IsalError

from worker.errors import InputError, without_path
from worker.io.atomic import atomic_path
from worker.io.image_names import MIF_SUFFIXES
from worker.io.gzip_blocks import write_gzip
from worker.io.nifti import read_gzip_into
from worker.io.voxel_grid import grid_problem
from worker.provenance import hash_to_end, read_and_hash_into

__all__ = ["MIF_SUFFIXES", "MifInfo", "read_mif_header", "load_mif_data", "mif_array_view", "mif_scaled", "write_mif",
           "recording_command", "command_history_entry", "mrtrix_size"]


# What reading a damaged or cut gzip stream raises (zlib/gzip errors, ISA-L's own).
_STREAM_ERRORS = (OSError, EOFError, ValueError, IsalError)
# A header of dw_scheme and command history is tens of kilobytes; anything near this is not one.
_MAX_HEADER_BYTES = 16 * 1024**2
# Zero padding allowed between END and embedded data (MRtrix3 pads to 4 bytes): an offset far
# past the header would make a small .mif.gz inflate without bound before its data.
_MAX_PADDING = 64 * 1024
_MAGIC = "mrtrix image"
_COMPULSORY = ("dim", "vox", "layout", "datatype", "transform", "scaling", "file")
_NATIVE = "LE" if sys.byteorder == "little" else "BE"

# MRtrix3 datatype specifier (core/datatype.cpp) → numpy type; "Bit" is packed, 8 per byte.
_TYPES = {"int8": "i1", "uint8": "u1", "int16": "i2", "uint16": "u2", "int32": "i4", "uint32": "u4",
          "int64": "i8", "uint64": "u8", "float32": "f4", "float64": "f8", "cfloat32": "c8", "cfloat64": "c16"}


def _numpy_dtype(spec: str) -> np.dtype | None:
    """The numpy type of an MRtrix3 datatype specifier (case-insensitive); None if unknown."""
    spec = spec.strip().lower()
    if spec == "bit":
        return np.dtype(bool)
    order = {"le": "<", "be": ">"}.get(spec[-2:], "=")
    code = _TYPES.get(spec[:-2] if order != "=" else spec)
    if code is None:
        return None
    if np.dtype(code).itemsize == 1:
        return np.dtype(code) if order == "=" else None
    return np.dtype(code).newbyteorder(order)


def _datatype_spec(dtype: np.dtype) -> str:
    """The MRtrix3 specifier of a numpy type, with explicit byte order as MRtrix3 writes it."""
    dtype = np.dtype(dtype)
    if dtype == bool:
        return "Bit"
    names = {"i": "Int", "u": "UInt", "f": "Float", "c": "CFloat"}
    bits = dtype.itemsize * 8 // (2 if dtype.kind == "c" else 1)
    if dtype.kind not in names or _numpy_dtype(f"{names[dtype.kind]}{bits}") is None:
        raise ValueError(f"MRtrix3 images cannot store {dtype}; cast to float32, float64 or an 8–64 bit integer")
    name = f"{names[dtype.kind]}{bits}"
    if dtype.itemsize == 1:
        return name
    order = {"<": "LE", ">": "BE"}.get(dtype.byteorder, _NATIVE)
    return name + order


@dataclass(frozen=True)
class MifInfo:
    """An MRtrix image header.

    ``shape``, ``dtype``, ``affine`` and ``zooms`` follow our NIfTI reader (see the module
    docstring), so code written for :class:`worker.io.nifti.NiftiInfo` takes this too.
    ``dims``, ``vox``, ``layout`` and ``transform`` are the header's own, in its axis order;
    ``layout`` as ``mrinfo -strides`` prints it (1-based ranks, sign = direction).
    """

    path: Path
    dims: tuple[int, ...]
    vox: tuple[float, ...]
    layout: tuple[int, ...]
    datatype: str
    transform: np.ndarray
    scaling: tuple[float, float] | None
    data_path: Path
    data_offset: int
    keyval: dict[str, str] = field(default_factory=dict)
    #: what a user should know about the header, as :class:`worker.io.nifti.NiftiInfo`'s (none)
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def compressed(self) -> bool:
        return self.data_path.name.endswith(".gz")

    @property
    def dtype(self) -> np.dtype:
        return _numpy_dtype(self.datatype)

    @property
    def axes(self) -> tuple[int, ...]:
        """Header axes in array order: spatial ones by storage rank, then the others."""
        spatial = sorted(range(3), key=lambda a: abs(self.layout[a]))
        return tuple(spatial) + tuple(range(3, len(self.dims)))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.dims[a] for a in self.axes)

    @property
    def zooms(self) -> tuple[float, ...]:
        return tuple(self.vox[a] for a in self.axes)

    @property
    def affine(self) -> np.ndarray:
        """Voxel (array index) → scanner mm, 4×4 (MRtrix3 ``File::NIfTI::adjust_transform``)."""
        affine = np.eye(4)
        affine[:3, 3] = self.transform[:, 3]
        for i, a in enumerate(self.axes[:3]):
            column = self.transform[:, a] * self.vox[a]
            if self.layout[a] < 0:
                affine[:3, 3] += (self.dims[a] - 1) * column
                column = -column
            affine[:3, i] = column
        return affine

    @property
    def n_voxels(self) -> int:
        return math.prod(self.dims[:3])

    @property
    def data_bytes(self) -> int:
        """Bytes of stored data (``Bit`` packs 8 values a byte)."""
        count = math.prod(self.dims)
        return (count + 7) // 8 if self.datatype.lower() == "bit" else count * self.dtype.itemsize


def _bad(path: Path, role: str, what: str) -> InputError:
    return InputError(
        "Invalid MRtrix image header",
        f"the {role} file {path.name!r} {what}; write it again with MRtrix3 (mrconvert in.mif out.mif) "
        "or convert it to NIfTI (mrconvert in.mif out.nii.gz)",
    )


def _open_stream(path: Path) -> BinaryIO:
    """The file's bytes as a stream, inflated as they are read for ``.gz``."""
    return isal.igzip.open(path, "rb") if Path(path).name.endswith(".gz") else open(path, "rb")


def _header_lines(path: Path, role: str) -> tuple[list[str], int]:
    """The header's lines between ``mrtrix image`` and ``END``, comments stripped, and its
    length in bytes; reads (and for ``.mif.gz`` inflates) no further than the header."""
    lines: list[str] = []
    consumed = 0
    try:
        with _open_stream(path) as stream:
            first = stream.readline(len(_MAGIC) + 2)
            consumed = len(first)
            if first.decode("latin-1").rstrip("\r\n") != _MAGIC:
                raise _bad(path, role, f"does not start with {_MAGIC!r}, so it is not an MRtrix image")
            while True:
                raw = stream.readline(_MAX_HEADER_BYTES - consumed + 1)
                consumed += len(raw)
                if consumed > _MAX_HEADER_BYTES:
                    raise _bad(path, role, f"has no END line in its first {_MAX_HEADER_BYTES} bytes")
                if not raw:
                    if path.name.endswith(".mih"):  # MRtrix3 ends a separate header without END
                        return lines, consumed
                    raise _bad(path, role, "ends before the END line of its header (truncated?)")
                line = raw.decode("utf-8", "replace").split("#", 1)[0].strip()
                if line == "END":
                    return lines, consumed
                if line:
                    lines.append(line)
    except InputError:
        raise
    except _STREAM_ERRORS as exc:
        raise InputError(
            "Unreadable MRtrix image",
            f"the {role} file {path.name!r} could not be read ({without_path(exc, path)}); check that it is a complete "
            ".mif or .mif.gz file",
        ) from None


def _numbers(path: Path, role: str, key: str, value: str, kind=float) -> list:
    try:
        return [kind(item) for item in value.split(",")]
    except ValueError:
        raise _bad(path, role, f"has a malformed {key!r} entry {value!r}") from None


def _parse_layout(path: Path, role: str, value: str, ndim: int) -> tuple[int, ...]:
    """``+0,-1,+2`` → strides (1, -2, 3), validated as MRtrix3 ``parse_axes`` does."""
    strides = []
    for item in value.split(","):
        item = item.strip()
        sign = -1 if item.startswith("-") else 1
        digits = item.lstrip("+-")
        if not digits.isdigit() or len(item) - len(digits) > 1:
            raise _bad(path, role, f"has a malformed layout {value!r}")
        strides.append(sign * (int(digits) + 1))
    if len(strides) != ndim or sorted(abs(s) for s in strides) != list(range(1, ndim + 1)):
        raise _bad(path, role, f"has layout {value!r}, which is not one stride per axis of its {ndim} dimensions")
    return tuple(strides)


def read_mif_header(path: Path, role: str = "image") -> MifInfo:
    """The header of MRtrix image ``path`` (``role`` names it in errors: "FOD", "mask").

    Reads only the header; raises :class:`InputError` saying what is wrong and how to fix it.
    A missing ``transform`` is MRtrix3's default (``Transform::get_default``), non-unit
    transform columns are normalised into the voxel sizes (``Header::sanitise_transform``).
    """
    path = Path(path)
    if not path.name.endswith(MIF_SUFFIXES):
        raise InputError("Not an MRtrix image", f"the {role} file {path.name!r} must end in .mif, .mif.gz or .mih")
    fields: dict[str, list[str]] = {}
    keyval: dict[str, str] = {}
    lines, header_bytes = _header_lines(path, role)
    for line in lines:
        key, colon, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if not colon or not key or not value:
            continue  # MRtrix3 ignores malformed lines and empty values too
        if key.lower() in _COMPULSORY:
            fields.setdefault(key.lower(), []).append(value)
        else:
            keyval[key] = f"{keyval[key]}\n{value}" if key in keyval else value
    for key in ("dim", "vox", "layout", "datatype", "file"):
        if key not in fields:
            raise _bad(path, role, f"has no {key!r} entry")
        if key != "file" and len(fields[key]) > 1:
            raise _bad(path, role, f"has {len(fields[key])} {key!r} entries")

    dims = _numbers(path, role, "dim", fields["dim"][0], int)
    if any(d < 1 for d in dims):
        raise _bad(path, role, f"has dimensions {dims}; each must be at least 1")
    vox = _numbers(path, role, "vox", fields["vox"][0])
    if len(vox) < min(3, len(dims)):
        raise _bad(path, role, f"gives {len(vox)} voxel sizes for {len(dims)} dimensions")
    vox = (vox + [float("nan")] * len(dims))[: len(dims)]
    layout = _parse_layout(path, role, fields["layout"][0], len(dims))
    datatype = fields["datatype"][0]
    if _numpy_dtype(datatype) is None:
        raise _bad(path, role, f"has the unknown datatype {datatype!r}")

    # MRtrix3 images have at least 3 axes (Header::sanitise_voxel_sizes adds them).
    spatial = [v for v in vox[:3] if math.isfinite(v) and v > 0]
    while len(dims) < 3:
        layout += (len(dims) + 1,)
        dims.append(1)
        vox.append(float(np.mean(spatial)) if spatial else 1.0)
    if not all(math.isfinite(v) and v > 0 for v in vox[:3]):
        raise _bad(path, role, f"has voxel sizes {vox[:3]}; the first three must be positive numbers")

    if "transform" in fields:
        rows = [_numbers(path, role, "transform", row) for row in fields["transform"]]
        if len(rows) < 3 or any(len(row) != 4 for row in rows):
            raise _bad(path, role, "has a transform that is not 3 rows of 4 numbers")
        transform = np.array(rows[:3], dtype=np.float64)  # MRtrix3 ignores a fourth row
        if not np.isfinite(transform).all():
            raise _bad(path, role, "has a non-finite transform")
        # before the columns are normalised, which would overflow on absurd numbers
        if (problem := grid_problem(np.vstack([transform, [0, 0, 0, 1]]), vox[:3])) is not None:
            raise _bad(path, role, f"has {problem}")
        lengths = np.linalg.norm(transform[:, :3], axis=0)
        if (lengths == 0).any():
            raise _bad(path, role, "has a transform with a zero column")
        if (abs(lengths - 1.0) > 1e-6).any():
            transform[:, :3] /= lengths
            vox[:3] = [v * n for v, n in zip(vox[:3], lengths)]
    else:
        transform = np.zeros((3, 4))
        transform[:, :3] = np.eye(3)
        transform[:, 3] = [-0.5 * (d - 1) * v for d, v in zip(dims[:3], vox[:3])]

    scaling = None
    if "scaling" in fields:
        scaling = _numbers(path, role, "scaling", fields["scaling"][0])
        if len(scaling) != 2 or not all(math.isfinite(s) for s in scaling):
            raise _bad(path, role, f"has scaling {fields['scaling'][0]!r}; it must be 'offset,scale'")
        scaling = (scaling[0], scaling[1])

    if len(fields["file"]) > 1:
        raise InputError(
            "Multi-file MRtrix image",
            f"the {role} file {path.name!r} keeps its data in {len(fields['file'])} files; join them into "
            "one with mrconvert in.mih out.mif",
        )
    name, _, offset_text = fields["file"][0].partition(" ")
    try:
        offset = int(offset_text) if offset_text.strip() else 0
    except ValueError:
        raise _bad(path, role, f"has a malformed data offset {offset_text!r}") from None
    if name == ".":
        if not header_bytes <= offset <= header_bytes + _MAX_PADDING:
            raise _bad(path, role, f"puts its data at byte {offset}, not just after its {header_bytes}-byte header")
        data_path = path
    else:
        if path.name.endswith(".gz"):
            raise _bad(path, role, "is compressed but keeps its data in another file")
        # Only a file beside the header: a header must not point a reader at any file it likes.
        if Path(name).name != name or name in ("", ".."):
            raise _bad(path, role, f"keeps its data in {name!r}, not in a file beside it")
        data_path = path.parent / name
        if data_path.is_symlink() and data_path.resolve().parent != path.parent.resolve():
            raise InputError(
                "Data file outside the header's folder",
                f"the {role} file {path.name!r} keeps its data in {name!r}, a link to a file in another "
                f"folder; put the data file itself beside the header, or make one file of both with "
                f"mrconvert {path.name} {path.stem}.mif",
            )
        if not data_path.is_file():
            raise InputError(
                "Missing data file",
                f"the {role} file {path.name!r} keeps its data in {name!r}, which is not beside it; "
                f"put it there, or make one file of both with mrconvert {path.name} {path.stem}.mif",
            )
    info = MifInfo(path, tuple(dims), tuple(vox), layout, datatype, transform, scaling, data_path, offset, keyval)
    if (problem := grid_problem(info.affine, info.zooms)) is not None:
        raise _bad(path, role, f"has {problem}")
    return info


def _read_into(info: MifInfo, out: np.ndarray, digest: "hashlib._Hash | None" = None) -> None:
    """Fill ``out`` (a new array of ``info.data_bytes`` bytes) with the stored data, read (and
    for ``.gz`` inflated) straight into it and no further than it goes; ``digest``: updated
    with every byte of the data file, read to its end."""
    view = memoryview(out).cast("B")
    try:
        if info.compressed:
            filled = read_gzip_into(info.data_path, info.data_offset, view, digest)
        else:
            with open(info.data_path, "rb") as stream:
                if digest is None:
                    stream.seek(info.data_offset)
                else:
                    for start in range(0, info.data_offset, 1 << 20):  # a header of up to 16 MiB
                        digest.update(stream.read(min(1 << 20, info.data_offset - start)))
                if digest is None:
                    filled = stream.readinto(view)  # a buffered reader fills it unless the file ends
                else:
                    filled = read_and_hash_into(stream, view, digest)
                    hash_to_end(stream, digest)
    except _STREAM_ERRORS as exc:
        raise InputError(
            "Unreadable MRtrix image data",
            f"the data of {info.path.name!r} could not be read ({exc}); the file is probably damaged",
        ) from None
    if filled != info.data_bytes:
        raise InputError(
            "Truncated file",
            f"{info.path.name!r} declares {info.data_bytes} bytes of image data but holds {filled}; "
            "the file is incomplete, write or send it again",
        )


def _as_type(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``array``, a view of the whole buffer this read made (axes permuted, some perhaps
    reversed), as ``dtype``: the view itself where it has that type and runs forward (the
    copy ``astype`` would make has its very memory layout), else that copy."""
    if array.dtype == dtype and all(stride >= 0 for stride in array.strides):
        return array
    return array.astype(dtype)


def load_mif_data(info: MifInfo, dtype=np.float32, *, digest: "hashlib._Hash | None" = None,
                  empty: Callable[..., np.ndarray] = np.empty) -> np.ndarray:
    """The data array of a checked header, in array order (see :class:`MifInfo`).

    ``dtype`` given: values ``offset + scale × stored`` (the header's ``scaling``) as ``dtype``.
    ``dtype=None``: the stored values themselves, unscaled, in native byte order.
    ``digest`` (a :mod:`hashlib` object): updated with every byte of the file holding the
    data (``info.data_path``) in the same read. ``empty``: allocates the array the data is
    read into, as ``np.empty(shape, dtype)`` does (page-locked memory for a GPU,
    :func:`gpu.cuda.host_memory.pinned_empty`; docs/decisions/pinned-host-transfers.md).

    The data is read straight into the array returned where it is stored as ``dtype`` in
    native byte order, unscaled, and no axis past the third runs backwards (a ``.mif`` of
    float32 SH as ``dwi2fod`` or ``mrconvert`` writes it): a read at file speed. Other files
    cost one conversion, in the layout the data has on disk.
    """
    count = math.prod(info.dims)
    bits = info.datatype.lower() == "bit"
    stored = np.empty(info.data_bytes, np.uint8) if bits else empty(count, info.dtype)
    _read_into(info, stored, digest)
    # MRtrix3 packs bits most significant first (core/raw.h, BITMASK 0x80 >> i%8).
    array = mif_array_view(np.unpackbits(stored, count=count).view(bool) if bits else stored, info)
    if dtype is None:
        return _as_type(array, array.dtype.newbyteorder("="))
    return mif_scaled(array, info, dtype, own=True)


def mif_array_view(flat: np.ndarray, info: MifInfo) -> np.ndarray:
    """The stored values ``flat`` (in disk order) viewed in array order (see :class:`MifInfo`):
    axes by rank, fastest first, then the array's axes out of them; no copy."""
    by_rank = sorted(range(len(info.dims)), key=lambda a: abs(info.layout[a]))
    array = flat.reshape([info.dims[a] for a in by_rank], order="F").transpose([by_rank.index(a) for a in info.axes])
    for i, a in enumerate(info.axes[3:], start=3):
        if info.layout[a] < 0:
            array = np.flip(array, i)
    return array


def mif_scaled(array: np.ndarray, info: MifInfo, dtype, *, own: bool = False) -> np.ndarray:
    """Values ``offset + scale × stored`` (the header's ``scaling``) of ``array``, a view in
    array order, as ``dtype``: the view itself where nothing converts; scaled in place where
    the buffer is the caller's (``own``) and has that type already, else in a copy."""
    if info.scaling is None or info.scaling == (0.0, 1.0):
        return _as_type(array, np.dtype(dtype))
    values = _as_type(array, np.result_type(dtype, np.float32))
    if values is array and not own:
        values = array.copy()
    values *= info.scaling[1]
    values += info.scaling[0]
    return values.astype(dtype, copy=False)


def _axial_permutation(rotation: np.ndarray) -> tuple[list[int], list[bool]]:
    """MRtrix3 ``Axes::get_permutation_to_make_axial``: for each scanner axis the image axis
    nearest to it, and for each image axis whether it runs against its scanner axis."""
    perm = [int(np.argmax(np.abs(rotation[row]))) for row in range(3)]

    def other(a: int, b: int) -> int:
        return next(i for i in range(3) if i not in (a, b))

    if perm[0] == perm[1]:
        perm[1] = other(perm[0], perm[2])
    if perm[0] == perm[2]:
        perm[2] = other(perm[0], perm[1])
    if perm[1] == perm[2]:
        perm[2] = other(perm[0], perm[1])
    flip = [False] * 3
    for row in range(3):
        flip[perm[row]] = bool(rotation[row, perm[row]] < 0)
    return perm, flip


# What write_mif adds to the command_history of the images it writes: the command (or job) at
# work, set by :func:`recording_command`. An environment variable, so that the worker
# processes a command starts (a batch's) inherit it; unset: nothing is added.
_COMMAND_VARIABLE = "FIBERTENSOR_COMMAND_HISTORY_ENTRY"


def command_history_entry(program: str, arguments: Sequence[str], version: str) -> str:
    """One ``command_history`` line as MRtrix3 3.0 writes it (``App::command_history_string``):
    the program and its arguments separated by spaces, then ``  (version=...)``. A ``#`` (a
    comment to MRtrix3) or a line break in an argument is escaped as ``%23``, a space."""
    text = " ".join([program, *arguments]) + f"  (version={version})"
    return " ".join(text.replace("#", "%23").splitlines())


@contextlib.contextmanager
def recording_command(entry: str) -> Iterator[None]:
    """While in this block, every image :func:`write_mif` writes, from any thread of the
    process or a process it starts, gets ``entry`` (:func:`command_history_entry`) appended to
    its ``command_history``."""
    previous = os.environ.get(_COMMAND_VARIABLE)
    os.environ[_COMMAND_VARIABLE] = entry
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(_COMMAND_VARIABLE, None)
        else:
            os.environ[_COMMAND_VARIABLE] = previous


def mrtrix_size(shape: Sequence[int], affine: np.ndarray) -> str:
    """The size of an image of array ``shape`` and voxel→scanner ``affine`` as ``mrinfo``
    prints it (``9 x 10 x 10``): MRtrix3 shows the spatial axes realigned nearest to scanner
    x, y, z, whatever the order they are stored in."""
    spatial = affine[:3, :3] / np.linalg.norm(affine[:3, :3], axis=0)
    perm, _ = _axial_permutation(spatial)
    return " x ".join(str(shape[a]) for a in [*perm, *range(3, len(shape))])


def _header_text(lines: Sequence[str], data_file: str | None) -> bytes:
    """The header, ending with ``file:`` and ``END``; for embedded data (``data_file`` None)
    zero-padded to the offset it names, a multiple of 16."""
    body = ("mrtrix image\n" + "".join(f"{line}\n" for line in lines)).encode()
    if data_file is not None:
        return body + f"file: {data_file} 0\nEND\n".encode()
    offset = 0
    while offset < (need := len(body) + len(f"file: . {offset}\nEND\n")) or offset % 16:
        offset = -(-need // 16) * 16
    text = body + f"file: . {offset}\nEND\n".encode()
    return text + b"\0" * (offset - len(text))


def write_mif(
    path: Path,
    data: np.ndarray,
    affine: np.ndarray,
    *,
    layout: Sequence[int] | None = None,
    datatype: str | None = None,
    scaling: tuple[float, float] | None = None,
    keyval: Mapping[str, str] | None = None,
) -> Path:
    """Write ``data`` (array order, as :func:`load_mif_data` returns it) as an MRtrix image.

    Parameters
    ----------
    path : Path
        ``.mif``, ``.mif.gz``, or ``.mih`` (the data then goes to ``.dat`` beside it).
    data : ndarray, shape (X, Y, Z, ...)
        Values; ``bool`` is stored as ``Bit``.
    affine : ndarray, shape (4, 4)
        Voxel → scanner mm of ``data``'s first three axes; their voxel sizes are its column
        norms (those of other axes are 1, as in our NIfTI outputs).
    layout : sequence of int, optional
        Strides of the written header's axes as ``mrconvert -strides`` takes them (``-1,2,3,4``);
        default: ``data``'s own order, as ``mrconvert`` keeps a NIfTI's.
    datatype : str, optional
        MRtrix3 datatype (``Float32BE``, ``UInt16LE``, ...); default: ``data``'s type.
    scaling : (offset, scale), optional
        Stored so that readers return ``offset + scale × stored``.
    keyval : mapping of str to str, optional
        Free header entries (e.g. the input's ``command_history``); multi-line values become
        repeated keys. Inside :func:`recording_command`, its entry is added as the last line
        of ``command_history``, as each MRtrix3 command adds its own.

    The header transform is realigned as MRtrix3 does on reading (``Header::realign_transform``),
    and the file is written beside ``path`` and renamed into place.
    """
    path = Path(path)
    if not path.name.endswith(MIF_SUFFIXES):
        raise ValueError(f"{path.name!r}: an MRtrix image name ends in .mif, .mif.gz or .mih")
    data = np.asarray(data)
    if data.ndim < 3:
        raise ValueError(f"MRtrix images have at least 3 axes; got shape {data.shape} (add axes of size 1)")
    affine = np.asarray(affine, np.float64)
    spacing = np.linalg.norm(affine[:3, :3], axis=0)
    if affine.shape != (4, 4) or not np.isfinite(affine).all() or (spacing == 0).any():
        raise ValueError("affine must be a finite 4×4 voxel→scanner matrix with non-zero columns")
    if datatype is not None:
        stored_type = _numpy_dtype(datatype)
        if stored_type is None:
            raise ValueError(f"unknown MRtrix3 datatype {datatype!r}")
        data = data.astype(stored_type, copy=False)
    datatype = _datatype_spec(data.dtype)
    zooms = [*spacing, *[1.0] * (data.ndim - 3)]
    keyval = dict(keyval or {})
    command = os.environ.get(_COMMAND_VARIABLE)
    if command:
        keyval["command_history"] = "\n".join(filter(None, (keyval.get("command_history"), command)))
    for key, value in keyval.items():
        if not key or ":" in key or "#" in key or "\n" in key or key.lower() in _COMPULSORY or key == "END":
            raise ValueError(f"{key!r} cannot be a free MRtrix header key")
        if "#" in str(value):
            raise ValueError(f"the value of {key!r} contains '#', which MRtrix3 reads as a comment")

    # Header axis j is data axis perm[j], reversed where flip: nearest to scanner x, y, z.
    unit = affine[:3, :3] / spacing
    perm, flip = _axial_permutation(unit)
    transform = np.zeros((3, 4))
    transform[:, 3] = affine[:3, 3]
    for j, a in enumerate(perm):
        transform[:, j] = -unit[:, a] if flip[a] else unit[:, a]
        if flip[a]:
            transform[:, 3] += (data.shape[a] - 1) * affine[:3, a]
    order = perm + list(range(3, data.ndim))
    header_array = data.transpose(order)
    for j, a in enumerate(perm):
        if flip[a]:
            header_array = np.flip(header_array, j)
    dims = header_array.shape
    vox = [zooms[a] for a in order]
    if layout is None:
        layout = [(-1 if flip[a] else 1) * (a + 1) for a in perm] + list(range(4, data.ndim + 1))
    layout = [int(s) for s in layout]
    if len(layout) != data.ndim or sorted(abs(s) for s in layout) != list(range(1, data.ndim + 1)):
        raise ValueError(f"layout {layout} must give each of the {data.ndim} axes a distinct stride 1…{data.ndim}")

    # Disk order: header axes reversed where the stride is negative, fastest (rank 1) first.
    stored = header_array
    for j, s in enumerate(layout):
        if s < 0:
            stored = np.flip(stored, j)
    stored = stored.transpose(sorted(range(data.ndim), key=lambda j: abs(layout[j])))
    # The data in disk order as an array (a copy numpy makes without the interpreter lock),
    # handed to the writers as it is, not joined to the header.
    payload = np.packbits(stored.ravel(order="F")) if data.dtype == bool else np.ravel(stored, order="F")

    def number(x: float) -> str:
        return repr(float(x))

    lines = [
        "dim: " + ",".join(str(d) for d in dims),
        "vox: " + ",".join(number(v) for v in vox),
        "layout: " + ",".join(f"{'-' if s < 0 else '+'}{abs(s) - 1}" for s in layout),
        f"datatype: {datatype}",
        *("transform: " + ",".join(number(x) for x in row) for row in transform),
    ]
    if scaling is not None:
        lines.append(f"scaling: {number(scaling[0])},{number(scaling[1])}")
    lines += [f"{key}: {line}" for key, value in keyval.items() for line in str(value).split("\n")]

    if path.name.endswith(".mih"):
        data_path = path.with_suffix(".dat")
        with atomic_path(data_path) as temporary, open(temporary, "wb") as out:
            out.write(payload)
        with atomic_path(path) as temporary:
            temporary.write_bytes(_header_text(lines, data_path.name))
        return path
    header = _header_text(lines, None)
    with atomic_path(path) as temporary:
        if path.name.endswith(".gz"):
            write_gzip(temporary, [header, payload])  # on threads, as the NIfTI writer
        else:
            with open(temporary, "wb") as raw:
                raw.write(header)
                raw.write(payload)
    return path
