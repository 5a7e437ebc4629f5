"""The PNG writer: Pillow reads back every pixel, in each colour type, the chunks carry
the lengths and CRC-32s the PNG specification (ISO/IEC 15948) asks for, and the image data
is zlib's stream of the rows."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from worker.io.png import png_bytes, write_png_atomic


def chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    found, at = [], 8
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length:at + 12 + length])
        assert crc == zlib.crc32(kind + body), kind
        found.append((kind, body))
        at += 12 + length
    return found


@pytest.mark.parametrize("shape, mode", [((7, 5, 3), "RGB"), ((3, 9), "L"), ((4, 6, 1), "L"), ((2, 3, 4), "RGBA"),
                                         ((1, 1, 3), "RGB")])
def test_pillow_reads_back_every_pixel(tmp_path, shape, mode):
    pixels = np.random.default_rng(3).integers(0, 256, shape, dtype=np.uint8)
    path = write_png_atomic(tmp_path / "picture.png", pixels)
    with Image.open(path) as png:
        assert png.format == "PNG" and png.mode == mode and png.size == (shape[1], shape[0])
        np.testing.assert_array_equal(np.asarray(png).reshape(shape), pixels)
    kinds = [kind for kind, _ in chunks(path.read_bytes())]
    assert kinds == [b"IHDR", b"IDAT", b"IEND"]


def test_the_image_data_is_zlibs_deflate_of_the_unfiltered_rows():
    """The IDAT chunk is zlib's level-1 stream of the rows, each after its filter byte 0: a
    function of the pixels alone (docs/decisions/qc-png-writer.md). The QC picture's kind
    of content: panels of flat colour on black."""
    pixels = np.zeros((300, 400, 3), np.uint8)
    pixels[20:280, 30:200] = np.repeat(np.random.default_rng(0).integers(0, 256, (26, 17, 3), dtype=np.uint8), 10,
                                       axis=0).repeat(10, axis=1)
    ours = png_bytes(pixels)
    rows = b"".join(b"\x00" + row.tobytes() for row in pixels)
    assert dict(chunks(ours))[b"IDAT"] == zlib.compress(rows, 1)
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(ours))), pixels)


@pytest.mark.parametrize("pixels", [np.zeros((2, 2, 2), np.uint8), np.zeros((2, 2, 3), np.float32),
                                    np.zeros((0, 2, 3), np.uint8)])
def test_other_arrays_are_refused(tmp_path, pixels):
    with pytest.raises(ValueError, match="uint8 picture"):
        write_png_atomic(tmp_path / "bad.png", pixels)
    assert not list(tmp_path.iterdir())
