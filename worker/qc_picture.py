"""The quality-control picture of a peaks job: ``OUT_PREFIX_qc.png``.

Top row: three orthogonal slices through the centre of the voxels with peaks, showing the
directionally encoded colour map of the first peak (red = left–right, green =
anterior–posterior, blue = superior–inferior; Pajevic & Pierpaoli 1999) with the first-peak
directions drawn as lines on a coarser grid, projected onto the slice (a fiber through the
slice draws short); brightness and line length grow with AFD_max (length with its square
root), the 99th percentile of the slices at full scale, so that noise in grey matter stays
dim and short. Bottom row: the
number of fiber orientations (NuFO) on the same slices, with a colour bar.

Slices are shown in anatomical orientation (superior up, anterior up in the axial view,
anterior on the left in the sagittal view) after reorienting the arrays to the closest
canonical RAS+ axes of the affine, in neurological convention (subject's left on the
image's left) unless ``radiological``; the picture says which.

Drawn as Pillow's ``ImageDraw`` draws, which keeps the worker free of a plotting stack, with
Pillow's own pixels but in one numba call that releases the interpreter lock
(:mod:`worker.qc_raster`; text from glyphs rendered once, :mod:`worker.qc_text`), so that a
job's other writers run meanwhile; lines are drawn at twice the size and reduced, which
anti-aliases them. A peaks job draws it from the peaks as the search gives them
(:func:`write_peaks_qc_png`): only the three slices are coloured, so the picture need not
wait for the volume's fODF metric maps.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

import numpy as np
from nibabel.orientations import apply_orientation, io_orientation

from worker.io.png import write_png_atomic
from worker.qc_text import Text, save_glyph_store, text_arrays, text_length

__all__ = ["QcPicture", "render_qc_picture", "render_peaks_qc_picture", "write_qc_png", "write_peaks_qc_png",
           "warm_up_qc_picture", "save_qc_glyph_store"]

_SUPERSAMPLE = 2
_BIG, _SMALL = 17 * _SUPERSAMPLE, 12 * _SUPERSAMPLE  # font sizes: the title, the rest
_ORIENTATION_LETTERS = "LRAPSI"
_OUTLINE = 2 * _SUPERSAMPLE  # the orientation letters' outline, pixels
_PANEL = 320  # pixels of the longest field of view, before supersampling
_GLYPHS_ACROSS = 32  # first-peak lines along the longest field of view
_MARGIN = 14
# The colour map under the lines is shown at this fraction of full brightness, so that a
# line stands out from a voxel of its own colour.
_MAP_BRIGHTNESS = 0.65
# Seconds numba takes to compile the rasterizer (worker.qc_raster) on a 2-core CI machine.
_RASTERIZER_COMPILE_SECONDS = 5
# viridis at 0, 1/4, 1/2, 3/4, 1: NuFO 1..K from dark blue to yellow; 0 is black.
_VIRIDIS = np.array([[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]], float)


@dataclass(frozen=True)
class _View:
    """A slice plane: ``fixed`` axis (RAS index), ``across`` axis shown left→right with
    ``across_sign`` +1 when it increases to the right, ``up`` axis increasing upwards."""

    name: str
    fixed: int
    across: int
    across_sign: int
    up: int
    letters: tuple[str, str, str, str]  # left, right, top, bottom


def _views(radiological: bool) -> tuple[_View, ...]:
    lr = (1, ("L", "R")) if not radiological else (-1, ("R", "L"))
    return (
        _View("sagittal", 0, 1, -1, 2, ("A", "P", "S", "I")),
        _View("coronal", 1, 0, lr[0], 2, (*lr[1], "S", "I")),
        _View("axial", 2, 0, lr[0], 1, (*lr[1], "A", "P")),
    )


def _plane(volume: np.ndarray, view: _View, index: int) -> np.ndarray:
    """The slice as displayed, a view of ``volume``: rows top→bottom, columns left→right
    (trailing axes kept)."""
    # Basic indexing: np.take would first copy a strided volume whole.
    plane = volume[(slice(None),) * view.fixed + (index,)]
    # After removing the fixed axis the remaining RAS axes keep their order.
    remaining = [a for a in range(3) if a != view.fixed]
    plane = np.moveaxis(plane, [remaining.index(view.up), remaining.index(view.across)], [0, 1])
    plane = plane[::-1]
    return plane[:, ::-1] if view.across_sign < 0 else plane


def _to_ras(voxel_sizes, ornt):
    """A function giving views of volumes on the closest canonical RAS+ axes, as nibabel's
    ``as_closest_canonical`` reorients data (``ornt`` from ``io_orientation``; None keeps
    the array axes), the voxel sizes on those axes, and the permutation and signs that take
    a vector's components along the array axes to the RAS+ axes."""
    voxel_sizes = np.asarray(voxel_sizes, float)[:3]
    if ornt is None:
        return np.asarray, voxel_sizes, np.arange(3), np.ones(3)
    perm = np.argsort(ornt[:, 0]).astype(int)
    return lambda volume: apply_orientation(volume, ornt), voxel_sizes[perm], perm, ornt[perm, 1]


def _orientation(affine: np.ndarray) -> np.ndarray:
    """nibabel's ``io_orientation`` of ``affine`` (which reads only its linear part, the same
    for the images of one protocol), remembered: computing it holds the interpreter lock."""
    # float64 whatever the affine's type: the key's bytes are read back as float64.
    linear = np.ascontiguousarray(np.asarray(affine)[:-1, :-1], np.float64)
    return _orientation_of(linear.tobytes(), linear.shape)


@lru_cache(maxsize=64)
def _orientation_of(linear: bytes, shape: tuple[int, int]) -> np.ndarray:
    affine = np.eye(shape[0] + 1, shape[1] + 1)
    affine[:-1, :-1] = np.frombuffer(linear).reshape(shape)
    ornt = io_orientation(affine)
    ornt.flags.writeable = False
    return ornt


def _percentile(values: np.ndarray, q: float) -> np.floating:
    """``np.percentile(values, q)`` (its default, linear method) of a 1-D float array without
    NaN, bit for bit, by one partition: numpy's own path sorts the two ranks through
    ``np.unique``, which imports ``numpy.ma``, a noticeable share of a small job's start.

    Parameters
    ----------
    values : (N,) float array, N ≥ 1, no NaN
    q : float
        Percentile in [0, 100].

    Returns
    -------
    numpy scalar of ``values``' type
    """
    n = values.size
    fraction = q / 100
    virtual = (n - 1) * fraction  # Hyndman & Fan's 7th method, numpy's rank of the percentile
    if virtual >= n - 1:
        return values.max()
    below = math.floor(virtual)
    ranked = np.partition(values, (below, below + 1))
    a, b = ranked[below], ranked[below + 1]
    gamma = virtual - below
    # numpy's lerp: from the nearer end, in the values' precision
    if gamma >= 0.5:
        return b - (b - a) * values.dtype.type(1 - gamma)
    return a + (b - a) * values.dtype.type(gamma)


def _nufo_palette(npeaks: int) -> np.ndarray:
    """uint8 colours of NuFO 0..npeaks: black, then viridis from dark blue to yellow."""
    stops = np.linspace(0.0, 1.0, len(_VIRIDIS))
    levels = np.linspace(0.0, 1.0, npeaks) if npeaks > 1 else np.array([0.5])
    colours = np.stack([np.interp(levels, stops, _VIRIDIS[:, c]) for c in range(3)], axis=1)
    return np.vstack([[0, 0, 0], colours]).round().astype(np.uint8)


def _centre(nufo: np.ndarray) -> tuple[int, int, int]:
    """Centre of the bounding box of the voxels with peaks (of the volume if none)."""
    occupied = nufo > 0
    if not occupied.any():
        return tuple(s // 2 for s in nufo.shape)
    spans = [np.flatnonzero(occupied.any(axis=tuple(a for a in range(3) if a != axis))) for axis in range(3)]
    return tuple((int(span[0]) + int(span[-1])) // 2 for span in spans)


@dataclass
class QcPicture:
    """The rendered picture, (H, W, 3) uint8 ``pixels``, and where its panels lie:
    ``panels["rgb coronal"]``, ``panels["nufo axial"]``, … are (left, top, right, bottom)
    pixel boxes."""

    pixels: np.ndarray
    panels: dict[str, tuple[int, int, int, int]]


@dataclass
class _Drawing:
    """What the picture draws on its supersampled canvas (``width`` × ``height``), in the
    terms of Pillow's ``ImageDraw`` and in the order drawn (:func:`_rasterized`): ``rectangles``
    as ``ImageDraw.rectangle`` (box, fill, outline, outline width), ``panels`` as pictures
    resized by nearest neighbour to (left, top, width, height), ``texts``, then the lines
    ``segments`` (L, 4) with ``widths`` (L,) and ``colours`` (L, 3)."""

    width: int
    height: int
    rectangles: list[tuple[tuple[int, int, int, int], tuple[int, int, int], tuple[int, int, int], int]]
    panels: list[tuple[np.ndarray, tuple[int, int, int, int]]]
    texts: list[Text]
    segments: np.ndarray
    widths: np.ndarray
    colours: np.ndarray


def render_qc_picture(rgb: np.ndarray, first_dirs: np.ndarray, nufo: np.ndarray, voxel_sizes, title: str, *,
                      affine: np.ndarray | None = None, directions_frame: Literal["world", "voxel"] = "world",
                      npeaks: int | None = None, radiological: bool = False) -> QcPicture:
    """The QC picture as an image; see :func:`write_qc_png` for the parameters."""
    rgb, first_dirs, nufo = np.asarray(rgb), np.asarray(first_dirs), np.asarray(nufo)
    spatial = nufo.shape
    if nufo.ndim != 3 or rgb.shape != (*spatial, 3) or first_dirs.shape != (*spatial, 3):
        raise ValueError(f"expected rgb (X, Y, Z, 3), first_dirs (X, Y, Z, 3) and nufo (X, Y, Z) on one grid, "
                         f"got {rgb.shape}, {first_dirs.shape} and {nufo.shape}")
    drawing, panels = _draw(lambda plane: plane(rgb), first_dirs, nufo, voxel_sizes, title, affine, directions_frame,
                            npeaks, radiological)
    return QcPicture(_rasterized(drawing), panels)


def render_peaks_qc_picture(directions: np.ndarray, amplitudes: np.ndarray, count: np.ndarray, voxel_sizes,
                            title: str, *, affine: np.ndarray | None = None,
                            directions_frame: Literal["world", "voxel"] = "world", npeaks: int | None = None,
                            radiological: bool = False) -> QcPicture:
    """The QC picture of peaks as they come from the search, without the volume's fODF
    metric maps: the colour of the three slices alone (the same pixels as
    :func:`render_qc_picture` of the ``rgb`` and NuFO maps); see
    :func:`write_peaks_qc_png` for the parameters."""
    from gpu.peaks.fodf_metrics import directional_colour, largest_afd_max

    directions, amplitudes, count = np.asarray(directions), np.asarray(amplitudes), np.asarray(count)
    spatial = count.shape
    if count.ndim != 3 or amplitudes.shape[:3] != spatial or amplitudes.ndim != 4 \
            or directions.shape != (*amplitudes.shape, 3):
        raise ValueError(f"expected directions (X, Y, Z, K, 3), amplitudes (X, Y, Z, K) and count (X, Y, Z) on one "
                         f"grid, got {directions.shape}, {amplitudes.shape} and {count.shape}")
    first_dirs, afd_max = directions[..., 0, :], amplitudes[..., 0]
    largest = largest_afd_max(afd_max, count)

    def colour(plane):
        return directional_colour(plane(first_dirs), plane(afd_max), plane(count), largest)

    drawing, panels = _draw(colour, first_dirs, count, voxel_sizes, title, affine, directions_frame, npeaks,
                            radiological)
    return QcPicture(_rasterized(drawing), panels)


def _draw(colour, first_dirs: np.ndarray, nufo: np.ndarray, voxel_sizes, title: str, affine, directions_frame,
          npeaks, radiological) -> tuple[_Drawing, dict[str, tuple[int, int, int, int]]]:
    """The drawing of the slices of ``first_dirs`` and ``nufo`` and its panels' boxes (in
    the reduced picture); ``colour(plane)`` gives the rgb map's slice (uint8) from
    ``plane``, the function that slices a volume of the grid."""
    if directions_frame not in ("world", "voxel"):
        raise ValueError(f"directions_frame must be 'world' or 'voxel', not {directions_frame!r}")
    spatial = nufo.shape
    npeaks = int(npeaks if npeaks is not None else max(int(nufo.max()), 1))
    ornt = _orientation(np.asarray(affine, float)) if affine is not None else None
    to_ras, sizes, perm, signs = _to_ras(voxel_sizes, ornt)
    if directions_frame == "world":
        perm, signs = np.arange(3), np.ones(3)
    ras_nufo = to_ras(nufo)
    centre = _centre(ras_nufo)
    views = _views(radiological)
    # Only the three slices are drawn: reorient colour channels and direction components there.
    rgb_planes, dir_planes, nufo_planes = [], [], []
    for view in views:
        def plane(volume, view=view):
            return _plane(to_ras(volume), view, centre[view.fixed])

        rgb_planes.append(colour(plane)[..., perm].astype(np.float32))
        dir_planes.append(plane(first_dirs)[..., perm] * signs)
        nufo_planes.append(plane(nufo))
    # rgb = 255·|d_1|·AFD_max / volume max with |d_1| = 1, so its norm gives the AFD weight.
    # Display contrast: the 99th percentile of that weight in the slices shows at full
    # brightness and line length.
    weights = [np.sqrt((p ** 2).sum(axis=-1)) / 255.0 for p in rgb_planes]
    positive = np.concatenate([w[w > 0] for w in weights])
    gain = 1.0 / float(_percentile(positive, 99)) if positive.size else 1.0

    s = _SUPERSAMPLE
    extent = np.array(ras_nufo.shape) * sizes  # mm along R, A, S
    scale = _PANEL * s / extent.max()  # pixels per mm, the same in every panel
    glyph_mm = extent.max() / _GLYPHS_ACROSS
    panel_w = [int(round(extent[v.across] * scale)) for v in views]
    panel_h = max(int(round(extent[v.up] * scale)) for v in views)
    big, small = _BIG, _SMALL
    line = 17 * s
    m = _MARGIN * s
    bar_w = 96 * s
    header = 2 * m + 3 * line
    row_h = panel_h + line + m
    legend = ("top: first-peak direction colour (red L-R, green A-P, blue S-I), lines: first peak projected on "
              "the slice; brightness and line length grow with AFD_max (99th percentile = full)")
    convention = "radiological (subject's left on the image's right)" if radiological else \
        "neurological (subject's left on the image's left)"
    axes = "axes reoriented to RAS+ from the affine" if ornt is not None else "array axes taken as RAS+"
    footer = f"{convention}; {axes}; slices cross at {_crossing(centre, spatial, ornt, affine)}"
    text_w = max(text_length(legend, small), text_length(footer, small), text_length(title, big))
    width = max(m + sum(w + m for w in panel_w) + bar_w, int(text_w) + 2 * m)
    height = header + 2 * row_h + 2 * line + m
    grey, white = (170, 170, 170), (235, 235, 235)
    texts = [Text((m, m), title, big, white), Text((m, m + line + 4 * s), legend, small, grey),
             Text((m, m + 2 * line + 4 * s), "bottom: NuFO, the number of peaks per voxel", small, grey)]
    pictures, segments, panels = [], [], {}
    palette = _nufo_palette(npeaks)
    x = m
    for view, w, rgb_plane, dir_plane, nufo_plane, weight in zip(views, panel_w, rgb_planes, dir_planes, nufo_planes,
                                                                  weights):
        h = int(round(extent[view.up] * scale))
        shown = np.minimum(rgb_plane * (gain * _MAP_BRIGHTNESS), 255.0).astype(np.uint8)
        for row, (kind, picture) in enumerate((("rgb", shown),
                                               ("nufo", palette[np.minimum(nufo_plane, npeaks)]))):
            top = header + row * row_h + line
            texts.append(Text((x, top - line), view.name, small, white))
            pictures.append((np.ascontiguousarray(picture), (x, top, w, h)))
            panels[f"{kind} {view.name}"] = tuple(v // s for v in (x, top, x + w, top + h))
            left, right, up, down = view.letters
            for text, xy, anchor in ((left, (x + 3 * s, top + h // 2), "lm"), (right, (x + w - 3 * s, top + h // 2), "rm"),
                                     (up, (x + w // 2, top + 2 * s), "mt"), (down, (x + w // 2, top + h - 2 * s), "mb")):
                texts.append(Text(xy, text, small, white, anchor, stroke=_OUTLINE))
        # Length ∝ √AFD: a voxel at a quarter of the 99th percentile still draws half a line.
        segments.append(_glyphs(dir_plane, np.sqrt(np.minimum(weight * gain, 1.0)), view, sizes, scale, glyph_mm,
                                (x, header + line)))
        x += w + m

    # Voxels per NuFO value, npeaks and above together (counting compares: bincount would
    # first copy the volume to intp).
    voxels = np.array([np.count_nonzero(nufo == value) for value in range(npeaks)] + [0])
    voxels[npeaks] = nufo.size - voxels.sum()
    rectangles = _colour_bar(palette, voxels, (x, header + row_h + line), panel_h, small, texts)
    texts.append(Text((m, height - m - line), footer, small, grey))
    lines, widths, colours = (np.concatenate(parts) for parts in zip(*segments))
    return _Drawing(width, height, rectangles, pictures, texts, lines, widths, colours), panels


def _rasterized(drawing: _Drawing) -> np.ndarray:
    """The reduced picture of ``drawing``: the rectangles by numpy, then one call of
    :func:`worker.qc_raster.rasterize` for the rest, which holds no interpreter lock (its
    ahead-of-time build, :mod:`gpu.ahead_of_time`, holds it)."""
    from gpu.ahead_of_time import compiled
    from gpu.cuda.compile_notice import notice_compile

    canvas = np.zeros((drawing.height, drawing.width, 3), np.uint8)
    for (x0, y0, x1, y1), fill, outline, width in drawing.rectangles:
        # ImageDraw.rectangle: the box's pixels inclusive, the outline inside it.
        canvas[y0:y1 + 1, x0:x1 + 1] = outline
        canvas[y0 + width:y1 - width + 1, x0 + width:x1 - width + 1] = fill
    offsets = np.cumsum([0] + [picture.size for picture, _ in drawing.panels])
    panel_table = np.array([(offset, *picture.shape[:2], *box)
                            for offset, (picture, box) in zip(offsets, drawing.panels)], np.int64)
    panels = np.concatenate([picture.ravel() for picture, _ in drawing.panels])
    args = (canvas, panels, panel_table, *text_arrays(drawing.texts), drawing.segments, drawing.widths,
            drawing.colours)
    rasterize = compiled("worker.qc_raster.rasterize", args)
    notice_compile(rasterize, args, "the QC picture's rasterizer", _RASTERIZER_COMPILE_SECONDS)
    return rasterize(*args)


def _nufo_label(value: int, percent: float) -> str:
    """The colour bar's label of NuFO ``value``, with its share of the voxels with peaks."""
    return str(value) if value == 0 else f"{value}   {percent:.0f} %"


def save_qc_glyph_store() -> Path:
    """Save the glyph store (:func:`worker.qc_text.save_glyph_store`) of what a picture
    draws: the glyphs at both font sizes, the orientation letters as placed (each side's
    anchor, outline and text), the colour bar's labels up to NuFO 8; returns its path."""
    anchors = ("lm", "rm", "mt", "mb")
    texts = [(letter, _SMALL, anchor, stroke) for letter in _ORIENTATION_LETTERS for anchor in anchors
             for stroke in (_OUTLINE, 0)]
    texts += [(_nufo_label(value, percent), _SMALL, "lm", 0) for value in range(9)
              for percent in (range(101) if value else (0,))]
    return save_glyph_store((_BIG, _SMALL), texts)


def warm_up_qc_picture() -> float:
    """Compile (or load from numba's cache) the rasterizer and render the glyphs of a small
    picture, so that a job's first picture waits for neither; returns
    the seconds taken."""
    started = time.perf_counter()
    shape = (4, 4, 4)
    drawing, _ = _draw(lambda plane: plane(np.zeros((*shape, 3), np.uint8)), np.full((*shape, 3), np.nan),
                       np.ones(shape, np.uint8), (2.0, 2.0, 2.0), "warm-up", np.eye(4), "world", None, False)
    _rasterized(drawing)
    return time.perf_counter() - started


def _crossing(centre, spatial, ornt, affine) -> str:
    """The slices' common voxel in the input's own indices, and its world position."""
    if ornt is None:
        return f"voxel {tuple(int(c) for c in centre)}"
    voxel = [0, 0, 0]
    for axis, (target, flip) in enumerate(ornt.astype(int)):
        voxel[axis] = spatial[axis] - 1 - centre[target] if flip < 0 else centre[target]
    world = np.asarray(affine, float)[:3] @ np.array([*voxel, 1.0])
    return f"voxel {tuple(voxel)}, world ({world[0]:.1f}, {world[1]:.1f}, {world[2]:.1f}) mm"


def _glyphs(dirs: np.ndarray, lengths: np.ndarray, view: _View, sizes, scale: float, glyph_mm: float,
            origin) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """First-peak directions as lines centred on voxels of a grid about ``glyph_mm`` apart,
    each ``0.85 * glyph_mm`` long times ``lengths`` (0..1) times the in-plane length of the
    direction: segments (L, 4), widths and colours, a black outline under each line first."""
    size_h, size_v = sizes[view.across], sizes[view.up]
    step_h = max(1, int(round(glyph_mm / size_h)))
    step_v = max(1, int(round(glyph_mm / size_v)))
    rows = np.arange(step_v // 2, dirs.shape[0], step_v)
    cols = np.arange(step_h // 2, dirs.shape[1], step_h)
    d = dirs[np.ix_(rows, cols)]
    keep = np.isfinite(d).all(axis=-1) & (np.abs(d).sum(axis=-1) > 0)
    r, c = np.nonzero(keep)
    d = d[r, c].astype(np.float64)
    full = 0.5 * 0.85 * min(step_h * size_h, step_v * size_v) * scale
    half = full * lengths[np.ix_(rows, cols)][r, c]
    # Screen x grows to the right, screen y downwards.
    dx = view.across_sign * d[:, view.across] * half
    dy = -d[:, view.up] * half
    cx = origin[0] + (cols[c] + 0.5) * size_h * scale
    cy = origin[1] + (rows[r] + 0.5) * size_v * scale
    colour = (np.abs(d) / np.abs(d).max(axis=1, keepdims=True) * 255.0).round().astype(np.uint8)
    segments = np.stack([cx - dx, cy - dy, cx + dx, cy + dy], axis=1)
    width = min(max(2 * _SUPERSAMPLE, int(round(full / 4))), 3 * _SUPERSAMPLE)
    n = len(segments)
    widths = np.repeat(np.array([width + 2 * _SUPERSAMPLE, width], np.int64), n)
    return np.concatenate([segments, segments]), widths, np.concatenate([np.zeros_like(colour), colour])


def _colour_bar(palette: np.ndarray, voxels: np.ndarray, origin, height: int, font: int, texts: list[Text]) -> list:
    """A discrete colour bar, one block per NuFO value from 0 at the bottom, each value
    labelled with its share of the volume's voxels with peaks (``voxels`` counts each value):
    its rectangles, its labels appended to ``texts``."""
    x, y = origin
    s = _SUPERSAMPLE
    levels = len(palette)
    block = min(height // levels, 40 * s)
    with_peaks = max(int(voxels[1:].sum()), 1)
    white, grey = (235, 235, 235), (170, 170, 170)
    rectangles = []
    for value, colour in enumerate(palette):
        top = y + (levels - 1 - value) * block
        box = (x, top, x + 16 * s, top + block - 2 * s)
        rectangles.append((box, tuple(int(c) for c in colour), (120, 120, 120), s))
        label = _nufo_label(value, 100.0 * voxels[value] / with_peaks)
        texts.append(Text((x + 22 * s, top + block // 2), label, font, white, "lm"))
    below = y + levels * block + 6 * s
    texts += [Text((x, below), "NuFO", font, white), Text((x, below + 15 * s), "% of voxels", font, grey),
              Text((x, below + 30 * s), "with peaks", font, grey)]
    return rectangles


def write_qc_png(path: Path, rgb: np.ndarray, first_dirs: np.ndarray, nufo: np.ndarray, voxel_sizes, title: str, *,
                 affine: np.ndarray | None = None, directions_frame: Literal["world", "voxel"] = "world",
                 npeaks: int | None = None, radiological: bool = False) -> Path:
    """Write the QC picture of a peaks result to ``path`` (PNG, atomically).

    Parameters
    ----------
    path : Path
        Where to write, e.g. ``OUT_PREFIX_qc.png``.
    rgb : (X, Y, Z, 3) uint8 array
        Directionally encoded colour map (:func:`gpu.peaks.fodf_metrics.fodf_metrics`).
    first_dirs : (X, Y, Z, 3) array
        First-peak unit directions in ``directions_frame``; NaN or 0 where none.
    nufo : (X, Y, Z) integer array
        Number of peaks per voxel.
    voxel_sizes : sequence of 3 floats
        Voxel sizes in mm along the array axes (the panels are drawn to scale).
    title : str
        First line of the picture, e.g. ``"wmfod.nii.gz: lmax 8, K = 3 peaks"``.
    affine : (4, 4) array, optional
        Voxel-to-world (RAS+) affine; the slices are reoriented to its closest canonical
        axes. Without it the array axes are taken as RAS+.
    directions_frame : {"world", "voxel"}
        Axes of ``first_dirs`` and of the ``rgb`` channels: "world" (scanner RAS+, where
        MRtrix3 defines SH coefficients, so sh2peaks and our peaks of an MRtrix3 FOD) or
        "voxel" (the array axes, e.g. a DIPY fit of b-vectors given along the image axes).
    npeaks : int, optional
        K, the top of the NuFO colour bar (default: the largest NuFO).
    radiological : bool
        Show the subject's left on the image's right.

    Returns
    -------
    Path
    """
    picture = render_qc_picture(rgb, first_dirs, nufo, voxel_sizes, title, affine=affine,
                                directions_frame=directions_frame, npeaks=npeaks, radiological=radiological)
    return write_png_atomic(Path(path), picture.pixels)


def write_peaks_qc_png(path: Path, directions: np.ndarray, amplitudes: np.ndarray, count: np.ndarray, voxel_sizes,
                       title: str, *, affine: np.ndarray | None = None,
                       directions_frame: Literal["world", "voxel"] = "world", npeaks: int | None = None,
                       radiological: bool = False) -> Path:
    """Write the QC picture of peaks as the search gives them (the same file as
    :func:`write_qc_png` of their fODF metric maps, without computing the maps).

    Parameters
    ----------
    path : Path
        Where to write, e.g. ``OUT_PREFIX_qc.png``.
    directions : (X, Y, Z, K, 3) array
        Unit peak directions in ``directions_frame``, by descending amplitude.
    amplitudes : (X, Y, Z, K) array
        FOD amplitude of each peak (any value past ``count``).
    count : (X, Y, Z) integer array
        Number of peaks per voxel (NuFO).
    voxel_sizes, title, affine, directions_frame, npeaks, radiological
        As for :func:`write_qc_png`.

    Returns
    -------
    Path
    """
    picture = render_peaks_qc_picture(directions, amplitudes, count, voxel_sizes, title, affine=affine,
                                      directions_frame=directions_frame, npeaks=npeaks, radiological=radiological)
    return write_png_atomic(Path(path), picture.pixels)
