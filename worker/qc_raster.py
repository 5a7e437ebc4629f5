"""The QC picture's pixels (:mod:`worker.qc_picture`) drawn in one numba call that releases
the interpreter lock, so that the other output writers of a job run meanwhile.

It draws what Pillow would, pixel for pixel: panels scaled by nearest neighbour
(libImaging ``Geometry.c``, ``ImagingScaleAffine``), text masks blended in their colour
(``Paste.c``, ``fill_mask_L``), wide lines (``Draw.c``, ``ImagingDrawWideLine`` and the
scan-line filler ``polygon_generic``, with C's float32 arithmetic and roundings) and the
final 2 × 2 box reduction (``Reduce.c``, ``ImagingReduce2x2`` and its corners). The
functions live in this file so that numba caches their machine code (``cache=True``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

import gpu.numba_cache  # noqa: F401 - numba's cache shared safely by processes

__all__ = ["rasterize"]

_HALF = np.float32(0.5)
_ONE = np.float32(1.0)


@njit(nogil=True, cache=True)
def _round_up_float(f):  # pragma: no cover - compiled
    """Draw.c's ROUND_UP of a C float: ``f + 0.5F`` adds in float32, ``fabs`` promotes."""
    if f >= 0.0:
        return int(math.floor(f + _HALF))
    return -int(math.floor(abs(np.float64(f)) + 0.5))


@njit(nogil=True, cache=True)
def _round_down_float(f):  # pragma: no cover - compiled
    """Draw.c's ROUND_DOWN of a C float."""
    if f >= 0.0:
        return int(math.ceil(f - _HALF))
    return -int(math.ceil(abs(np.float64(f)) - 0.5))


@njit(nogil=True, cache=True)
def _round_up_double(f):  # pragma: no cover - compiled
    return int(math.floor(f + 0.5)) if f >= 0.0 else -int(math.floor(abs(f) + 0.5))


@njit(nogil=True, cache=True)
def _round_down_double(f):  # pragma: no cover - compiled
    return int(math.ceil(f - 0.5)) if f >= 0.0 else -int(math.ceil(abs(f) - 0.5))


@njit(nogil=True, cache=True)
def _roundf(f):  # pragma: no cover - compiled
    """C's ``roundf`` (halves away from zero), exact: float32 + 0.5 is exact in float64."""
    return np.float32(math.copysign(math.floor(abs(np.float64(f)) + 0.5), f))


@njit(nogil=True, cache=True)
def _hline(canvas, x0, y, x1, colour):  # pragma: no cover - compiled
    """Pixels ``x0..x1`` (inclusive) of row ``y``, clipped to the canvas (``hline32``)."""
    height, width = canvas.shape[0], canvas.shape[1]
    if y < 0 or y >= height or x0 >= width or x1 < 0:
        return
    for x in range(max(x0, 0), min(x1, width - 1) + 1):
        for c in range(3):
            canvas[y, x, c] = colour[c]


@njit(nogil=True, cache=True)
def _edge_x(y, x0, y0, dx):  # pragma: no cover - compiled
    """Where an edge crosses row ``y``, in C's float32: ``(y - y0) * dx + x0``."""
    return np.float32(y - y0) * dx + np.float32(x0)


@njit(nogil=True, cache=True)
def _fill_polygon(canvas, vertices, colour):  # pragma: no cover - compiled
    """The filled polygon of ``vertices`` ((n, 2) int), as ``polygon_generic`` fills it
    (no alpha): horizontal edges drawn as lines, the others crossed by each scan line,
    crossings at corners adjusted as Pillow does, spans from ROUND_UP to ROUND_DOWN."""
    n = vertices.shape[0]
    ex0 = np.empty(n, np.int64)
    ey0 = np.empty(n, np.int64)
    exmin = np.empty(n, np.int64)
    exmax = np.empty(n, np.int64)
    eymin = np.empty(n, np.int64)
    eymax = np.empty(n, np.int64)
    edx = np.empty(n, np.float32)
    for i in range(n):  # add_edge
        x0, y0 = vertices[i, 0], vertices[i, 1]
        x1, y1 = vertices[(i + 1) % n, 0], vertices[(i + 1) % n, 1]
        ex0[i], ey0[i] = x0, y0
        exmin[i], exmax[i] = min(x0, x1), max(x0, x1)
        eymin[i], eymax[i] = min(y0, y1), max(y0, y1)
        edx[i] = np.float32(0.0) if y0 == y1 else np.float32(x1 - x0) / np.float32(y1 - y0)
    height = canvas.shape[0]
    ymin, ymax = height - 1, 0
    table = np.empty(n, np.int64)
    count = 0
    for i in range(n):
        ymin, ymax = min(ymin, eymin[i]), max(ymax, eymax[i])
        if eymin[i] == eymax[i]:
            _hline(canvas, exmin[i], eymin[i], exmax[i], colour)
        else:
            table[count] = i
            count += 1
    ymin, ymax = max(ymin, 0), min(ymax, height)
    xx = np.empty(2 * n, np.float32)
    for y in range(ymin, ymax + 1):
        j = 0
        for a in range(count):
            i = table[a]
            if y < eymin[i] or y > eymax[i]:
                continue
            xx[j] = _edge_x(y, ex0[i], ey0[i], edx[i])
            j += 1
            if y == eymax[i] and y < ymax:
                xx[j] = xx[j - 1]
                j += 1
            elif (y == eymin[i] or y == eymax[i]) and edx[i] != 0:
                # Connect discontiguous corners (Pillow ≥ 9.2).
                for b in range(a):
                    k = table[b]
                    if (y != eymin[k] and y != eymax[k]) or edx[k] == 0:
                        continue
                    if _roundf(xx[j - 1]) != _roundf(_edge_x(y, ex0[k], ey0[k], edx[k])):
                        continue
                    offset = -1 if y == eymax[i] else 1
                    adjacent = _edge_x(y + offset, ex0[i], ey0[i], edx[i])
                    if y + offset >= eymin[k] and y + offset <= eymax[k]:
                        adjacent_other = _edge_x(y + offset, ex0[k], ey0[k], edx[k])
                        if xx[j - 1] > adjacent + _ONE and xx[j - 1] > adjacent_other + _ONE:
                            xx[j - 1] = _roundf(max(adjacent, adjacent_other)) + _ONE
                        elif xx[j - 1] < adjacent - _ONE and xx[j - 1] < adjacent_other - _ONE:
                            xx[j - 1] = _roundf(min(adjacent, adjacent_other)) - _ONE
                        break
        for a in range(1, j):  # qsort of at most 2n floats
            value = xx[a]
            b = a
            while b > 0 and xx[b - 1] > value:
                xx[b] = xx[b - 1]
                b -= 1
            xx[b] = value
        for a in range(1, j, 2):
            _hline(canvas, _round_up_float(xx[a - 1]), y, _round_down_float(xx[a]), colour)


@njit(nogil=True, cache=True)
def _wide_line(canvas, x0, y0, x1, y1, width, colour):  # pragma: no cover - compiled
    """``ImagingDrawWideLine``: the quadrilateral about the segment, ``width`` pixels across."""
    dx, dy = x1 - x0, y1 - y0
    if dx == 0 and dy == 0:
        if 0 <= x0 < canvas.shape[1] and 0 <= y0 < canvas.shape[0]:
            for c in range(3):
                canvas[y0, x0, c] = colour[c]
        return
    big = math.hypot(dx, dy)
    small = (width - 1) / 2.0
    ratio_max = _round_up_double(small) / big
    ratio_min = _round_down_double(small) / big
    dxmin, dxmax = _round_down_double(ratio_min * dy), _round_down_double(ratio_max * dy)
    dymin, dymax = _round_down_double(ratio_min * dx), _round_down_double(ratio_max * dx)
    vertices = np.empty((4, 2), np.int64)
    vertices[0, 0], vertices[0, 1] = x0 - dxmin, y0 + dymax
    vertices[1, 0], vertices[1, 1] = x1 - dxmin, y1 + dymax
    vertices[2, 0], vertices[2, 1] = x1 + dxmax, y1 - dymin
    vertices[3, 0], vertices[3, 1] = x0 + dxmax, y0 - dymin
    _fill_polygon(canvas, vertices, colour)


@njit(nogil=True, cache=True)
def _paste_nearest(canvas, picture, left, top, width, height):  # pragma: no cover - compiled
    """``picture`` resized to ``width`` × ``height`` by nearest neighbour and pasted with its
    top-left corner at (``left``, ``top``); the source column of output column x is
    ``int(x_o)`` with x_o = a/2 + x·a accumulated in float64 as ``ImagingScaleAffine`` does,
    a = source/output size; outside the source, black."""
    rows, cols = picture.shape[0], picture.shape[1]
    step_x, step_y = cols / width, rows / height
    source_col = np.empty(width, np.int64)
    position = step_x * 0.5
    for x in range(width):
        source_col[x] = int(position) if position >= 0.0 else -1
        position += step_x
    position = step_y * 0.5
    for y in range(height):
        row = int(position) if position >= 0.0 else -1
        position += step_y
        out_y = top + y
        if out_y < 0 or out_y >= canvas.shape[0]:
            continue
        for x in range(width):
            out_x = left + x
            if out_x < 0 or out_x >= canvas.shape[1]:
                continue
            col = source_col[x]
            inside = 0 <= row < rows and 0 <= col < cols
            for c in range(3):
                canvas[out_y, out_x, c] = picture[row, col, c] if inside else 0


@njit(nogil=True, cache=True)
def _blend(background, mask, ink):  # pragma: no cover - compiled
    """Paste.c's BLEND: (background·(255 − mask) + ink·mask) / 255, rounded as DIV255."""
    value = np.int64(background) * (255 - np.int64(mask)) + np.int64(ink) * np.int64(mask) + 128
    return ((value >> 8) + value) >> 8


@njit(nogil=True, cache=True)
def _over(below, above):  # pragma: no cover - compiled
    """A glyph's coverage over the text's so far, as Pillow's ``font_render`` combines
    overlapping glyphs: above + below·(255 − above)/255 (MULDIV255), where both cover."""
    if above == 0:
        return below
    if below == 0:
        return above
    value = np.int64(below) * (255 - np.int64(above)) + 128
    return min(255, np.int64(above) + (((value >> 8) + value) >> 8))


@njit(nogil=True, cache=True)
def _draw_text(canvas, masks, pieces, first, end, colour):  # pragma: no cover - compiled
    """One text: its pieces (glyph or string masks) combined in order as Pillow's
    ``font_render`` combines glyphs (:func:`_over`), then blended onto the canvas in
    ``colour``."""
    left, top, right, bottom = 1 << 30, 1 << 30, -(1 << 30), -(1 << 30)
    for p in range(first, end):
        left, top = min(left, pieces[p, 3]), min(top, pieces[p, 4])
        right, bottom = max(right, pieces[p, 3] + pieces[p, 2]), max(bottom, pieces[p, 4] + pieces[p, 1])
    if right <= left or bottom <= top:
        return
    mask = np.zeros((bottom - top, right - left), np.uint8)
    for p in range(first, end):
        offset, rows, cols = pieces[p, 0], pieces[p, 1], pieces[p, 2]
        x, y = pieces[p, 3] - left, pieces[p, 4] - top
        for i in range(rows):
            for j in range(cols):
                mask[y + i, x + j] = _over(mask[y + i, x + j], masks[offset + i * cols + j])
    for i in range(max(top, 0), min(bottom, canvas.shape[0])):
        for j in range(max(left, 0), min(right, canvas.shape[1])):
            m = mask[i - top, j - left]
            if m:
                for c in range(3):
                    canvas[i, j, c] = _blend(canvas[i, j, c], m, colour[c])


@njit(nogil=True, cache=True)
def _reduce2(canvas):  # pragma: no cover - compiled
    """``Image.reduce(2)``: means of 2 × 2 blocks rounded half up; a last odd row or column
    averages what it has (``ImagingReduceCorners``)."""
    height, width = canvas.shape[0], canvas.shape[1]
    out = np.empty(((height + 1) // 2, (width + 1) // 2, 3), np.uint8)
    for y in range(height // 2):
        top, bottom = canvas[2 * y], canvas[2 * y + 1]
        for x in range(width // 2):
            for c in range(3):
                total = (np.int32(top[2 * x, c]) + np.int32(top[2 * x + 1, c]) + np.int32(bottom[2 * x, c])
                         + np.int32(bottom[2 * x + 1, c]))
                out[y, x, c] = (total + 2) >> 2
    # The last column and row of an odd size, and their corner.
    for y in range(out.shape[0]):
        partial_row = 2 * y + 1 == height
        for x in range(0 if partial_row else width // 2, out.shape[1]):
            rows, cols = min(2, height - 2 * y), min(2, width - 2 * x)
            for c in range(3):
                total = 0
                for i in range(rows):
                    for j in range(cols):
                        total += np.int32(canvas[2 * y + i, 2 * x + j, c])
                out[y, x, c] = (total + rows * cols // 2) // (rows * cols)
    return out


@njit(nogil=True, cache=True)
def rasterize(canvas, panels, panel_table, masks, pieces, texts, segments, widths,
              colours):  # pragma: no cover - compiled
    """Draw onto ``canvas`` and return it reduced 2 × 2 (the interpreter lock released).

    Parameters
    ----------
    canvas : (H, W, 3) uint8 array
        The supersampled picture, drawn on in place.
    panels : (P,) uint8 array
        The panels' pixels one after the other, each (rows, cols, 3) C-ordered.
    panel_table : (N, 7) int64 array
        Per panel: offset in ``panels``, rows, cols, then left, top, width, height on the
        canvas (:func:`_paste_nearest`).
    masks : (M,) uint8 array
        Text masks (glyphs or whole strings) one after the other, each (rows, cols).
    pieces : (Q, 5) int64 array
        Per placed mask: offset in ``masks``, rows, cols, left, top on the canvas.
    texts : (T, 5) int64 array
        Per text, in drawing order: its first and past-last row of ``pieces``, and its
        colour (r, g, b).
    segments : (L, 4) float64 array
        Lines x0, y0, x1, y1 in drawing order (truncated to int, as Pillow does).
    widths : (L,) int64 array
        Line widths in pixels, at least 2 (Pillow draws 1-pixel lines otherwise, by
        Bresenham's algorithm, which this does not).
    colours : (L, 3) uint8 array
        Line colours.

    Returns
    -------
    (ceil(H / 2), ceil(W / 2), 3) uint8 array

    Notes
    -----
    Panels go first, then texts, then lines: the order in which Pillow drew them wherever
    they overlap in the QC picture (lines over the panels' orientation letters).
    """
    for n in range(panel_table.shape[0]):
        offset, rows, cols = panel_table[n, 0], panel_table[n, 1], panel_table[n, 2]
        picture = panels[offset:offset + rows * cols * 3].reshape((rows, cols, 3))
        _paste_nearest(canvas, picture, panel_table[n, 3], panel_table[n, 4], panel_table[n, 5],
                       panel_table[n, 6])
    for t in range(texts.shape[0]):
        _draw_text(canvas, masks, pieces, texts[t, 0], texts[t, 1], texts[t, 2:5])
    for n in range(segments.shape[0]):
        _wide_line(canvas, int(segments[n, 0]), int(segments[n, 1]), int(segments[n, 2]), int(segments[n, 3]),
                   widths[n], colours[n])
    return _reduce2(canvas)
