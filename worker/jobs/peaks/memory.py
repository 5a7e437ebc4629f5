"""The most host memory a peaks job holds at once, from the headers alone."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from worker.io.images import ImageInfo

__all__ = ["peaks_memory_bytes"]

# The QC picture's canvas, drawing buffers and PNG encoder (tracemalloc of the rasterizer's
# numpy canvases, Pillow's own untraced), with 10 bytes a voxel on top.
_QC_FIXED_BYTES = 16 << 20
# Beside the read, the input's sha256 holds up to two 1 MiB blocks (a .nii's bytes past its
# data, read to be hashed; a file hashed beside a read on several threads); the images
# written at once hold their compressors' blocks, with room for thread timing.
_CHECKSUM_BLOCK_BYTES = 2 << 20
_WRITERS_FIXED_BYTES = 3 << 20


def peaks_memory_bytes(fod: "ImageInfo", mask: "ImageInfo | None" = None, npeaks: int = 3, qc: bool = True,
                       fixels: bool = False, basis: str = "mrtrix") -> int:
    """Most host memory a peaks job holds at once, in bytes, from checked headers.

    With N voxels, C coefficients and K peaks, the largest of three phases: reading (the
    SH volume as float32, N·C·4, plus what reading the mask takes, plus the checksum's
    block); computing (the SH volume, a copy of its selected voxels, per-voxel sums, flags
    and shifts, the backend's peaks (float64 on the CPU, float32 to and from the GPU) and
    the float32 results, N·(2·C·4 + 48·K + 64)); writing (the SH volume, the results, the
    peaks image and its copy, the fODF metric maps, and each image's bytes and their
    compression, N·(C·4 + 76·K + 21), the compressors' fixed buffers, with ``qc`` the
    picture's buffers, and with ``fixels`` (``format`` fixel) the FMLS segmentation beside
    them (:func:`gpu.fixels.segment.segment_memory_bytes`), after a ``dipy`` ``basis``'s
    SH volume is copied into MRtrix3's basis).
    """
    n, c, k = fod.n_voxels, fod.shape[3], npeaks
    sh = n * c * 4
    reading = _read_bytes(fod)
    if mask is not None:
        reading = max(reading, sh + _read_bytes(mask) + n)
    reading += _CHECKSUM_BLOCK_BYTES
    computing = n * (2 * c * 4 + 48 * k + 64)
    writing = n * (c * 4 + 76 * k + 21) + _WRITERS_FIXED_BYTES + (_QC_FIXED_BYTES + 10 * n if qc else 0)
    if fixels:
        from gpu.fixels.segment import segment_memory_bytes

        writing += segment_memory_bytes(n, c) + (sh if basis != "mrtrix" else 0)
    return max(reading, computing, writing)


def _read_bytes(info: "ImageInfo") -> int:
    """Most bytes reading an image as float32 holds: the NIfTI reader's own bound, or for an
    MRtrix image its stored values and their float32 copy."""
    from worker.io.nifti import NiftiInfo, load_memory_bytes

    if isinstance(info, NiftiInfo):
        return load_memory_bytes(info)
    values = math.prod(info.shape)
    return values * (info.dtype.itemsize + 4)
