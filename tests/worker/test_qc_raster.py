"""The QC picture's rasterizer draws Pillow's pixels: wide lines, panels resized by nearest
neighbour, texts (composed from glyphs, or rendered whole with an anchor and an outline)
and the final 2 × 2 reduction, each compared with Pillow drawing the same on the same
random background."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from worker.qc_raster import rasterize
from worker.qc_text import Text, text_arrays, text_length

# Odd sizes: the reduction's last row and column average two pixels, its corner one.
HEIGHT, WIDTH = 97, 131


def background(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (HEIGHT, WIDTH, 3), dtype=np.uint8)


def draw(canvas: np.ndarray, *, panels=(), texts=(), segments=(), widths=(), colours=()) -> np.ndarray:
    """``rasterize`` with only the given parts (``panels``: (picture, (left, top, width,
    height))); draws on ``canvas`` and returns the reduced picture."""
    offsets = np.cumsum([0] + [picture.size for picture, _ in panels])
    table = np.array([(offset, *picture.shape[:2], *box) for offset, (picture, box) in zip(offsets, panels)],
                     np.int64).reshape(-1, 7)
    pixels = np.concatenate([picture.ravel() for picture, _ in panels] + [np.zeros(0, np.uint8)])
    return rasterize(canvas, pixels, table, *text_arrays(list(texts)), np.array(segments, np.float64).reshape(-1, 4),
                     np.array(widths, np.int64), np.array(colours, np.uint8).reshape(-1, 3))


def test_wide_lines_are_pillows():
    rng = np.random.default_rng(0)
    count = 400
    # Ends inside and outside the canvas, fractional (Pillow truncates), some lines
    # horizontal, vertical or a single point.
    segments = rng.uniform(-10, [WIDTH + 10, HEIGHT + 10] * 2, (count, 4))
    segments[::7, 3] = segments[::7, 1]
    segments[1::7, 2] = segments[1::7, 0]
    segments[2::11, 2:] = segments[2::11, :2]
    widths = rng.integers(2, 13, count)
    colours = rng.integers(0, 256, (count, 3))
    canvas = background(1)
    expected = Image.fromarray(canvas)
    pen = ImageDraw.Draw(expected)
    for segment, width, colour in zip(segments.tolist(), widths.tolist(), colours.tolist()):
        pen.line(segment, fill=tuple(colour), width=width)
    reduced = draw(canvas, segments=segments, widths=widths, colours=colours)
    np.testing.assert_array_equal(canvas, np.asarray(expected))
    np.testing.assert_array_equal(reduced, np.asarray(expected.reduce(2)))


def test_panels_are_pillows_nearest_resizes():
    rng = np.random.default_rng(2)
    panels = []
    for _ in range(40):
        picture = rng.integers(0, 256, (*rng.integers(1, 13, 2), 3), dtype=np.uint8)
        # Enlarged and reduced by non-integer ratios, some partly off the canvas.
        box = (int(rng.integers(-20, WIDTH)), int(rng.integers(-20, HEIGHT)), *(int(v) for v in rng.integers(1, 61, 2)))
        panels.append((picture, box))
    canvas = background(3)
    expected = Image.fromarray(canvas)
    for picture, (left, top, width, height) in panels:
        expected.paste(Image.fromarray(picture).resize((width, height), Image.NEAREST), (left, top))
    draw(canvas, panels=panels)
    np.testing.assert_array_equal(canvas, np.asarray(expected))


TEXTS = [
    Text((4, 2), "sub-01_ses-02_acq-b3000_desc-wmfod.nii.gz: lmax 8, K = 3 peaks, mrtrix basis", 34, (235, 235, 235)),
    Text((-3, 30), "top: first-peak direction colour (red L-R, green A-P, blue S-I), lines: first peak projected", 24,
         (170, 170, 170)),
    Text((6, 55), "neurological (subject's left on the image's left); axes reoriented to RAS+ from the affine; "
                  "slices cross at voxel (49, 49, 34), world (-2.0, -112.5, 7.1) mm", 24, (170, 170, 170)),
    Text((20, 78), "sagittal", 24, (235, 235, 235)),
    Text((70, 75), "\\/\\//", 24, (200, 255, 90)),  # overlapping glyphs: each laid over the one before
    *(Text(xy, letter, 24, (235, 235, 235), anchor, stroke=4) for letter, xy, anchor in
      (("A", (6, 40), "lm"), ("P", (125, 40), "rm"), ("S", (60, 4), "mt"), ("I", (60, 93), "mb"))),
    Text((90, 70), "2   17 %", 24, (235, 235, 235), "lm"),
    Text((60, 60), "X", 24, (0, 0, 0), "mm", stroke=4),  # outline and text of one colour: one pass
]


def test_texts_are_pillows():
    canvas = background(4)
    expected = Image.fromarray(canvas)
    pen = ImageDraw.Draw(expected)
    for text in TEXTS:
        pen.text(text.xy, text.text, fill=text.fill, font=ImageFont.load_default(size=text.size), anchor=text.anchor,
                 stroke_width=text.stroke, stroke_fill=text.stroke_fill)
    draw(canvas, texts=TEXTS)
    np.testing.assert_array_equal(canvas, np.asarray(expected))


@pytest.mark.parametrize("text", [text for text in TEXTS if text.anchor is None])
def test_text_length_is_pillows(text):
    assert text_length(text.text, text.size) == ImageFont.load_default(size=text.size).getlength(text.text)
