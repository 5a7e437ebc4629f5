"""Images read a slab at a time from a memory map of their data, for volumes a job cannot
hold in memory at once (an upsampled DWI).

:func:`map_image` maps the stored values of a checked header (NIfTI or MRtrix; a ``.gz`` is
first inflated to an unnamed file in a scratch folder on the same disk as the outputs) and
:meth:`MappedImage.slab` gives the values of a range of the third axis as
:func:`worker.io.images.load_image_data` gives the whole image: the same scaling, the same
bits, in the same (x fastest) order. The files behind the maps are unlinked as soon as they
are mapped, so nothing is left on disk whatever becomes of the job.
"""

from __future__ import annotations

import math
import mmap
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nibabel as nib
import numpy as np

from worker.errors import InputError
from worker.io.mif import MifInfo, mif_array_view, mif_scaled
from worker.io.nifti import NiftiInfo, check_stored_size, inflate_checked, scaled_values
from worker.provenance import file_sha256

__all__ = ["MappedImage", "map_image", "scratch_array"]


@dataclass(frozen=True)
class MappedImage:
    """A mapped image: ``info`` its header, ``stored`` its stored values in array order (a
    view of the map, unscaled), ``sha256`` of its files by name (of a ``.gz`` as stored),
    ``nifti_header`` the NIfTI file's own header (its slope and intercept; None for MRtrix)."""

    info: NiftiInfo | MifInfo
    stored: np.ndarray
    sha256: dict[str, str]
    nifti_header: nib.Nifti1Header | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.stored.shape)

    def slab(self, start: int, stop: int) -> np.ndarray:
        """The float32 values of ``[:, :, start:stop]``, x fastest (Fortran order)."""
        stored = np.asfortranarray(self.stored[:, :, start:stop])
        if isinstance(self.info, MifInfo):
            return np.asfortranarray(mif_scaled(stored, self.info, np.float32))
        return np.asfortranarray(scaled_values(stored, self.nifti_header, np.float32))


def _map(path: Path, offset: int, size: int) -> np.ndarray:
    """``size`` bytes of ``path`` from ``offset``, mapped read-only as uint8."""
    with open(path, "rb") as handle:
        start = offset - offset % mmap.ALLOCATIONGRANULARITY
        mapped = mmap.mmap(handle.fileno(), offset + size - start, access=mmap.ACCESS_READ, offset=start)
    return np.frombuffer(mapped, np.uint8, size, offset - start)


def _unpacked(info: NiftiInfo | MifInfo, scratch: Path, role: str, hashed: bool) -> tuple[Path, dict[str, str], bool]:
    """The file holding ``info``'s data uncompressed, the sha256 of the files read (with
    ``hashed``; an uncompressed file is read once more for it), and whether that file is a
    scratch copy to unlink once mapped."""
    if isinstance(info, MifInfo):
        path, offset, compressed = info.data_path, info.data_offset, info.compressed
        header = {} if info.data_path == info.path or not hashed else {info.path.name: file_sha256(info.path)}
    else:
        path, offset, compressed, header = info.path, info.offset, info.path.name.endswith(".gz"), {}
    if not compressed:
        check_stored_size(path, offset, info.data_bytes, role)
        return path, {**header, path.name: file_sha256(path)} if hashed else {}, False
    handle, target = tempfile.mkstemp(prefix=".inflated-", suffix=".mif" if isinstance(info, MifInfo) else ".nii",
                                      dir=scratch)
    os.close(handle)
    return Path(target), {**header, path.name: inflate_checked(path, offset, info.data_bytes, role, Path(target))}, True


def _nifti_header(path: Path) -> nib.Nifti1Header:
    """The NIfTI-1 or -2 header of an uncompressed file as stored, its slope and intercept kept
    (``nib.load`` moves them to its array proxy; a :class:`NiftiInfo`'s header is a template)."""
    with open(path, "rb") as handle:
        first = handle.read(4)
        handle.seek(0)
        nifti2 = 540 in (int.from_bytes(first, "little"), int.from_bytes(first, "big"))
        return (nib.Nifti2Header if nifti2 else nib.Nifti1Header).from_fileobj(handle, check=True)


def map_image(info: NiftiInfo | MifInfo, scratch: Path, role: str = "image", *, hashed: bool = True) -> MappedImage:
    """Map the data of the checked header ``info`` (:func:`worker.io.images.read_image_header`);
    a compressed file is inflated into ``scratch`` (a folder on the outputs' disk) first.
    ``hashed=False``: no sha256 (a caller that knows the upload's), no read for it.
    Raises :class:`InputError` for a truncated or damaged file, as the whole-image read does."""
    if isinstance(info, MifInfo) and info.datatype.lower() == "bit":
        raise InputError("Unsupported data type", f"{role}: a bit-packed image cannot be read a slab at a time; "
                         "convert it with mrconvert -datatype float32")
    path, sha256, scratch_copy = _unpacked(info, scratch, role, hashed)
    try:
        if isinstance(info, MifInfo):
            return MappedImage(info, mif_array_view(_map(path, info.data_offset, info.data_bytes).view(info.dtype), info),
                               sha256)
        header = _nifti_header(path)
        flat = _map(path, info.offset, info.data_bytes).view(header.get_data_dtype())
        return MappedImage(info, flat.reshape(info.shape, order="F"), sha256, header)
    finally:
        if scratch_copy:
            path.unlink()


def scratch_array(shape: tuple[int, ...], scratch: Path, dtype=np.float32) -> np.ndarray:
    """A zeroed array of ``shape`` in Fortran order backed by an unnamed file in ``scratch``
    (memory the kernel may write back to disk): outputs too large to hold, written a slab at a
    time and then saved as a whole."""
    size = math.prod(shape) * np.dtype(dtype).itemsize
    with tempfile.TemporaryFile(dir=scratch) as handle:
        handle.truncate(max(size, 1))
        mapped = mmap.mmap(handle.fileno(), max(size, 1))
    return np.frombuffer(mapped, dtype, math.prod(shape)).reshape(shape, order="F")
