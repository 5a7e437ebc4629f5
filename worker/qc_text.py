"""The QC picture's text as masks for :func:`worker.qc_raster.rasterize`, with no FreeType
rendering per job once its glyphs are known.

Pillow's default font (Aileron, which ``ImageFont.load_default`` gives with its basic
layout) renders a string glyph by glyph: each glyph's bitmap, rendered at the pen's origin,
is placed at the pen position rounded to whole pixels, the pen advancing by the glyph's
hinted advance plus kerning, and overlapping bitmaps keep their maximum (``font_render``
in Pillow's ``_imagingft.c``). So a string anchored at its left and ascender (Pillow's
default anchor) is composed here from glyph masks rendered once per process, which gives
Pillow's mask of the whole string; texts with another anchor or an outline (orientation
letters, colour-bar labels: few distinct strings) are rendered whole by Pillow, once.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

__all__ = ["Text", "default_font", "text_length", "text_arrays"]


class Text(NamedTuple):
    """A text as ``ImageDraw.text`` would draw it: the default font at ``size`` pixels,
    ``anchor`` (None: left, ascender), and an outline ``stroke`` pixels wide in
    ``stroke_fill`` drawn first when ``stroke`` > 0."""

    xy: tuple[int, int]
    text: str
    size: int
    fill: tuple[int, int, int]
    anchor: str | None = None
    stroke: int = 0
    stroke_fill: tuple[int, int, int] = (0, 0, 0)


@lru_cache(maxsize=None)
def default_font(size: int):
    """Pillow's default font at ``size`` pixels (``ImageFont.load_default``), loaded once."""
    from PIL import ImageFont

    return ImageFont.load_default(size=size)


@lru_cache(maxsize=4096)
def _rendered(text: str, size: int, anchor: str | None, stroke: int) -> tuple[np.ndarray, int, int]:
    """Pillow's mask of ``text`` and where its top-left pixel lies from the anchor point."""
    from PIL import Image, ImageDraw

    font = default_font(size)
    left, top, right, bottom = font.getbbox(text, anchor=anchor, stroke_width=stroke)
    image = Image.new("L", (max(right - left, 1), max(bottom - top, 1)))
    ImageDraw.Draw(image).text((-left, -top), text, fill=255, font=font, anchor=anchor, stroke_width=stroke)
    return np.ascontiguousarray(np.asarray(image)), left, top


@lru_cache(maxsize=None)
def _advance(char: str, following: str, size: int) -> int:
    """The pen's advance over ``char`` before ``following`` ('' at the end), kerning
    included, in FreeType's 26.6 fixed point (``getlength`` is a multiple of 1/64)."""
    font = default_font(size)
    if not following:
        return round(font.getlength(char) * 64)
    return round(font.getlength(char + following) * 64) - round(font.getlength(following) * 64)


@lru_cache(maxsize=None)
def _ascender(size: int) -> int:
    """Pixels from the ascender line down to the baseline."""
    font = default_font(size)
    return font.getbbox("x", anchor="la")[1] - font.getbbox("x", anchor="ls")[1]


@lru_cache(maxsize=1024)
def _composed(text: str, size: int) -> tuple[tuple[tuple[np.ndarray, int, int], ...], int]:
    """Glyph masks of ``text`` anchored left at the ascender, each with its top-left pixel
    from the anchor point, and the string's length in 26.6."""
    ascender = _ascender(size)
    pieces, pen = [], 0
    for i, char in enumerate(text):
        mask, left, top = _rendered(char, size, "ls", 0)
        # PIXEL() of _imagingft.c: the 26.6 pen position rounded to the nearest pixel.
        pieces.append((mask, ((pen + 32) >> 6) + left, ascender + top))
        pen += _advance(char, text[i + 1:i + 2], size)
    return tuple(pieces), pen


def text_length(text: str, size: int) -> float:
    """``FreeTypeFont.getlength`` of the default font at ``size``, from cached advances."""
    return _composed(text, size)[1] / 64


def _pieces(text: Text, stroked: bool) -> tuple[tuple[np.ndarray, int, int], ...]:
    if stroked:
        return (_rendered(text.text, text.size, text.anchor, text.stroke),)
    if text.anchor is None:
        return _composed(text.text, text.size)[0]
    return (_rendered(text.text, text.size, text.anchor, 0),)


def text_arrays(texts: list[Text]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``masks``, ``pieces`` and ``texts`` arguments of
    :func:`worker.qc_raster.rasterize` that draw ``texts`` in order, each outline before its
    text (as ``ImageDraw.text``)."""
    offsets: dict[int, int] = {}
    buffers, rows, drawn = [], [], []
    size = 0
    for text in texts:
        # ImageDraw.text draws the outline, then the text unless it has the outline's colour.
        passes = ((True,) if text.fill == text.stroke_fill else (True, False)) if text.stroke else (False,)
        for stroked in passes:
            first = len(rows)
            for mask, left, top in _pieces(text, stroked):
                if id(mask) not in offsets:
                    offsets[id(mask)] = size
                    buffers.append(mask.ravel())
                    size += mask.size
                rows.append((offsets[id(mask)], *mask.shape, text.xy[0] + left, text.xy[1] + top))
            drawn.append((first, len(rows), *(text.stroke_fill if stroked else text.fill)))
    masks = np.concatenate(buffers) if buffers else np.zeros(0, np.uint8)
    return masks, np.array(rows, np.int64).reshape(-1, 5), np.array(drawn, np.int64).reshape(-1, 5)
