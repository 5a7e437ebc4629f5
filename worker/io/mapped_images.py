"""Images read a slab at a time from a memory map of their data, for volumes a job cannot
hold in memory at once (an upsampled DWI).

:func:`map_image` maps the stored values of a checked header (NIfTI or MRtrix; a ``.gz`` is
first inflated, on as many threads as the whole read takes, into an unnamed file in a scratch
folder on the same disk as the outputs) and
:meth:`MappedImage.slab` gives the values of a range of the third axis as
:func:`worker.io.images.load_image_data` gives the whole image: the same scaling, the same
bits, in the same (x fastest) order. Scratch files are unlinked as soon as they are made, so
nothing is left on disk whatever becomes of the job.
"""

from __future__ import annotations

import math
import mmap
import tempfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import nibabel as nib
import numpy as np
from nibabel.openers import Opener

from worker.errors import InputError
from worker.io.images import load_image_data, load_image_data_with_sha256
from worker.io.mif import MifInfo, mif_array_view, mif_scaled
from worker.io.nifti import NiftiInfo, check_stored_size, scaled_values
from worker.provenance import file_sha256

__all__ = ["MappedImage", "map_image", "scratch_array"]


@dataclass(frozen=True)
class MappedImage:
    """A mapped image: ``info`` its header, ``stored`` its stored values in array order (a
    view of the map, unscaled), ``sha256`` of its files by name (of a ``.gz`` as stored),
    ``nifti_header`` the NIfTI file's own header (its slope and intercept; None for MRtrix),
    ``volumes`` the volumes of a 4-D image its slabs hold (None: all)."""

    info: NiftiInfo | MifInfo
    stored: np.ndarray
    sha256: dict[str, str]
    nifti_header: nib.Nifti1Header | None = None
    volumes: np.ndarray | None = None

    def slab(self, start: int, stop: int) -> np.ndarray:
        """The float32 values of ``[:, :, start:stop]`` (of ``volumes``), x fastest (Fortran order)."""
        part = self.stored[:, :, start:stop]
        stored = np.asfortranarray(part if self.volumes is None else part[..., self.volumes])
        if isinstance(self.info, MifInfo):
            return mif_scaled(stored, self.info, np.float32)
        return scaled_values(stored, self.nifti_header, np.float32)


def _nifti_header(path: Path) -> nib.Nifti1Header:
    """The NIfTI-1 or -2 header of a file as stored, its slope and intercept kept (``nib.load``
    moves them to its array proxy; a :class:`NiftiInfo`'s header is a template)."""
    with Opener(str(path), "rb") as handle:
        first = handle.read(4)
        nifti2 = 540 in (int.from_bytes(first, "little"), int.from_bytes(first, "big"))
        klass = nib.Nifti2Header if nifti2 else nib.Nifti1Header
        return klass(first + handle.read(klass.template_dtype.itemsize - 4), check=True)


def _mapped_file(info: NiftiInfo | MifInfo, dtype: np.dtype, hashed: bool) -> tuple[np.ndarray, dict[str, str]]:
    """The stored values (of ``dtype``, byte order included) of an uncompressed image, mapped
    from its own file, and the sha256 of its files (with ``hashed``: a read of its own)."""
    path, offset = (info.data_path, info.data_offset) if isinstance(info, MifInfo) else (info.path, info.offset)
    check_stored_size(path, offset, info.data_bytes, path.name)  # the whole read's words
    with open(path, "rb") as handle:
        start = offset - offset % mmap.ALLOCATIONGRANULARITY
        mapped = mmap.mmap(handle.fileno(), offset + info.data_bytes - start, access=mmap.ACCESS_READ, offset=start)
    flat = np.frombuffer(mapped, np.uint8, info.data_bytes, offset - start).view(dtype)
    stored = mif_array_view(flat, info) if isinstance(info, MifInfo) else flat.reshape(info.shape, order="F")
    sha256 = {name: file_sha256(p) for name, p in {info.path.name: info.path, path.name: path}.items()} if hashed else {}
    return stored, sha256


def map_image(info: NiftiInfo | MifInfo, scratch: Path, role: str = "image", *, hashed: bool = True,
              threads: int = 1) -> MappedImage:
    """Map the data of the checked header ``info`` (:func:`worker.io.images.read_image_header`):
    an uncompressed file's own; a compressed one is inflated (on ``threads`` threads, as
    :func:`worker.io.images.load_image_data`) into a :func:`scratch_array` in ``scratch``
    (a folder on the outputs' disk). ``hashed=False``: no sha256 (a caller that knows the
    upload's), no read for it. Raises :class:`InputError` for a truncated or damaged file, as
    the whole-image read does."""
    if isinstance(info, MifInfo) and info.datatype.lower() == "bit":
        raise InputError("Unsupported data type", f"{role}: a bit-packed image cannot be read a slab at a time; "
                         "convert it with mrconvert -datatype float32")
    compressed = info.compressed if isinstance(info, MifInfo) else info.path.name.endswith(".gz")
    header = None if isinstance(info, MifInfo) else _nifti_header(info.path)
    if not compressed:
        stored, sha256 = _mapped_file(info, info.dtype if header is None else header.get_data_dtype(), hashed)
    else:
        empty = partial(scratch_array, scratch=scratch)
        if hashed:
            stored, sha256 = load_image_data_with_sha256(info, None, threads=threads, empty=empty)
        else:
            stored, sha256 = load_image_data(info, None, threads=threads, empty=empty), {}
    return MappedImage(info, stored, sha256, header)


def scratch_array(shape, dtype=np.float32, *, scratch: Path) -> np.ndarray:
    """A zeroed array of ``shape`` in Fortran order backed by an unnamed file in ``scratch``
    (memory the kernel may write back to disk; as ``np.empty`` takes its arguments): data too
    large to hold, written a slab at a time or inflated into it, then read or saved whole."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    size = math.prod(shape) * np.dtype(dtype).itemsize
    with tempfile.TemporaryFile(dir=scratch) as handle:
        handle.truncate(max(size, 1))
        mapped = mmap.mmap(handle.fileno(), max(size, 1))
    return np.frombuffer(mapped, dtype, math.prod(shape)).reshape(shape, order="F")
