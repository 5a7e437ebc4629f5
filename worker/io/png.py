"""PNG files of 8-bit pictures, written directly (PNG, ISO/IEC 15948:2004): the rows
unfiltered, deflated by zlib at level 1.

Pillow's encoder tries every row filter and deflates at zlib's default level, which for the
QC picture (flat panels of colour on black) takes six times as long for a somewhat smaller
file. zlib, not ISA-L: ISA-L gave two different streams for the same rows
(docs/decisions/qc-png-writer.md).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

from worker.io.atomic import write_bytes_atomic

__all__ = ["png_bytes", "write_png_atomic"]

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# PNG colour types (ISO/IEC 15948 Table 11.1) by the number of channels.
_COLOUR_TYPES = {1: 0, 3: 2, 4: 6}  # greyscale, truecolour, truecolour with alpha


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))


def png_bytes(pixels: np.ndarray) -> bytes:
    """The PNG file of a picture.

    Parameters
    ----------
    pixels : (H, W) or (H, W, C) uint8 array
        Rows top to bottom; C = 1 (grey), 3 (RGB) or 4 (RGBA).

    Returns
    -------
    bytes
    """
    pixels = np.asarray(pixels)
    if pixels.ndim == 2:
        pixels = pixels[..., None]
    if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] not in _COLOUR_TYPES or 0 in pixels.shape:
        raise ValueError(f"expected a non-empty (H, W) or (H, W, 1|3|4) uint8 picture, got {pixels.dtype} "
                         f"{pixels.shape}")
    height, width, channels = pixels.shape
    rows = np.zeros((height, 1 + width * channels), np.uint8)  # filter type 0 (None) before each row
    rows[:, 1:] = pixels.reshape(height, width * channels)
    header = struct.pack(">IIBBBBB", width, height, 8, _COLOUR_TYPES[channels], 0, 0, 0)
    return (_SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(rows, 1))
            + _chunk(b"IEND", b""))


def write_png_atomic(path: Path, pixels: np.ndarray) -> Path:
    """Write ``pixels`` (see :func:`png_bytes`) to ``path`` as PNG, atomically."""
    return write_bytes_atomic(Path(path), png_bytes(pixels))
