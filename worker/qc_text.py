"""The QC picture's text as masks for :func:`worker.qc_raster.rasterize`, with no FreeType
rendering per job once its glyphs are known.

Pillow's default font (Aileron, which ``ImageFont.load_default`` gives with its basic
layout) renders a string glyph by glyph: each glyph's bitmap, rendered at the pen's origin,
is placed at the pen position rounded to whole pixels, the pen advancing by the glyph's
hinted advance plus kerning, each bitmap laid over those before it (``font_render`` in
Pillow's ``_imagingft.c``). So a string anchored at its left and ascender (Pillow's
default anchor) is composed here from glyph masks rendered once per process, which gives
Pillow's mask of the whole string; texts with another anchor or an outline (orientation
letters, colour-bar labels: few distinct strings) are rendered whole by Pillow, once.

The glyph store (:func:`save_glyph_store`, made by ``fibertensor warmup``) holds Pillow's
masks of the printable ASCII glyphs and of given whole texts, their advances and the
ascender, at given sizes, in the kernel cache folder: a process that finds what it draws
there does not load Pillow, which a fresh process's small job notices
(docs/decisions/cpu-ahead-of-time.md). What the store lacks Pillow renders, as above.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import os
import tempfile
import threading
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import numpy as np

from gpu.cuda.cache_folder import kernel_cache_dir

__all__ = ["Text", "default_font", "text_length", "text_arrays", "save_glyph_store"]

#: The characters whose glyphs the store holds: printable ASCII.
STORE_CHARACTERS = "".join(map(chr, range(32, 127)))


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


class _Atlas:
    """Masks one after the other in one growing uint8 buffer, the ``masks`` that
    :func:`worker.qc_raster.rasterize` reads: appended under a lock, so that an offset once
    given never changes and a buffer handed out is never written below its length."""

    def __init__(self) -> None:
        self._buffer = np.zeros(1 << 16, np.uint8)
        self._size = 0
        self._lock = threading.Lock()

    def add(self, mask: np.ndarray) -> int:
        with self._lock:
            offset, end = self._size, self._size + mask.size
            if end > self._buffer.size:
                grown = np.zeros(max(2 * self._buffer.size, end), np.uint8)
                grown[:offset] = self._buffer[:offset]
                self._buffer = grown
            self._buffer[offset:end] = mask.ravel()
            self._size = end
            return offset

    def buffer(self) -> np.ndarray:
        with self._lock:
            return self._buffer[:self._size]


_ATLAS = _Atlas()


def _pillow_mask(text: str, size: int, anchor: str | None, stroke: int) -> tuple[np.ndarray, int, int]:
    """Pillow's mask of ``text`` and its top-left pixel's x, y from the anchor point."""
    from PIL import Image, ImageDraw

    font = default_font(size)
    left, top, right, bottom = font.getbbox(text, anchor=anchor, stroke_width=stroke)
    image = Image.new("L", (max(right - left, 1), max(bottom - top, 1)))
    ImageDraw.Draw(image).text((-left, -top), text, fill=255, font=font, anchor=anchor, stroke_width=stroke)
    return np.asarray(image), left, top


def _pillow_advance(char: str, following: str, size: int) -> int:
    font = default_font(size)
    if not following:
        return round(font.getlength(char) * 64)
    return round(font.getlength(char + following) * 64) - round(font.getlength(following) * 64)


def _pillow_ascender(size: int) -> int:
    font = default_font(size)
    return font.getbbox("x", anchor="la")[1] - font.getbbox("x", anchor="ls")[1]


# Unbounded: the keys are glyphs and short labels (orientation letters, NuFO shares), few.
@lru_cache(maxsize=None)
def _rendered(text: str, size: int, anchor: str | None, stroke: int) -> np.ndarray:
    """Pillow's mask of ``text`` (from the glyph store where it has it), stored in the atlas:
    (1, 5) int64 [offset, rows, cols, and its top-left pixel's x, y from the anchor point]."""
    store = _glyph_store()
    stored = store.mask(text, size, anchor, stroke) if store else None
    mask, left, top = stored if stored is not None else _pillow_mask(text, size, anchor, stroke)
    return _frozen(np.array([[_ATLAS.add(mask), *mask.shape, left, top]], np.int64))


@lru_cache(maxsize=None)
def _advance(char: str, following: str, size: int) -> int:
    """The pen's advance over ``char`` before ``following`` ('' at the end), kerning
    included, in FreeType's 26.6 fixed point (``getlength`` is a multiple of 1/64)."""
    store = _glyph_store()
    stored = store.advance(char, following, size) if store else None
    return stored if stored is not None else _pillow_advance(char, following, size)


@lru_cache(maxsize=None)
def _ascender(size: int) -> int:
    """Pixels from the ascender line down to the baseline."""
    store = _glyph_store()
    stored = store.ascender(size) if store else None
    return stored if stored is not None else _pillow_ascender(size)


class _GlyphStore:
    """The glyph store's content: Pillow's masks by (text, size, anchor, stroke), each
    character's advance before each other (and before the end), the ascender, by size."""

    def __init__(self, arrays) -> None:
        meta = json.loads(bytes(arrays["meta"]).decode())
        self._chars = {char: i for i, char in enumerate(meta["chars"])}
        self._sizes = {size: i for i, size in enumerate(meta["sizes"])}
        self._keys = {tuple(key): i for i, key in enumerate(meta["masks"])}
        self._table, self._buffer = arrays["table"], arrays["buffer"]
        self._advances, self._ascenders = arrays["advances"], arrays["ascenders"]

    def mask(self, text: str, size: int, anchor: str | None, stroke: int) -> tuple[np.ndarray, int, int] | None:
        row = self._keys.get((text, size, anchor, stroke))
        if row is None:
            return None
        offset, rows, cols, left, top = self._table[row].tolist()
        return self._buffer[offset:offset + rows * cols].reshape(rows, cols), left, top

    def advance(self, char: str, following: str, size: int) -> int | None:
        i, j = self._chars.get(char), len(self._chars) if not following else self._chars.get(following)
        if i is None or j is None or size not in self._sizes:
            return None
        return int(self._advances[self._sizes[size], i, j])

    def ascender(self, size: int) -> int | None:
        return int(self._ascenders[self._sizes[size]]) if size in self._sizes else None


def _glyph_store_path() -> Path:
    """The store's file: keyed by Pillow's version (its version file read, as loading Pillow
    would take longer than what the store saves) and this module's source."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    spec = importlib.util.find_spec("PIL")
    if spec and spec.origin:
        version = Path(spec.origin).with_name("_version.py")
        digest.update(version.read_bytes() if version.is_file() else b"")
    return kernel_cache_dir() / "qc" / f"glyphs-{digest.hexdigest()[:16]}.npz"


@lru_cache(maxsize=1)
def _glyph_store() -> _GlyphStore | None:
    try:
        with np.load(_glyph_store_path()) as arrays:
            return _GlyphStore({name: arrays[name] for name in arrays.files})
    except (OSError, ValueError, KeyError):  # none made yet, or one being replaced
        return None


def save_glyph_store(sizes: tuple[int, ...], texts: list[tuple[str, int, str | None, int]]) -> Path:
    """Render with Pillow, and save as the glyph store (module docstring), the glyphs of
    :data:`STORE_CHARACTERS` at ``sizes`` with their advances and ascenders, and the whole
    ``texts`` (text, size, anchor, stroke); returns the store's path. A store of other
    glyphs and texts is replaced."""
    keys = [(char, size, "ls", 0) for size in sizes for char in STORE_CHARACTERS] + [tuple(t) for t in texts]
    keys = list(dict.fromkeys(keys))
    meta = {"chars": STORE_CHARACTERS, "sizes": list(sizes), "masks": [list(key) for key in keys]}
    path = _glyph_store_path()
    with contextlib.suppress(OSError, ValueError, KeyError), np.load(path) as stored:
        if json.loads(bytes(stored["meta"]).decode()) == meta:  # already saved: a warm-up again is quick
            return path
    masks = [_pillow_mask(*key) for key in keys]
    sizes_of_masks = [mask.size for mask, _, _ in masks]
    offsets = np.concatenate([[0], np.cumsum(sizes_of_masks)[:-1]]).astype(np.int64)
    table = np.array([(offset, *mask.shape, left, top) for offset, (mask, left, top) in zip(offsets, masks)], np.int64)
    n = len(STORE_CHARACTERS)
    advances = np.array([[[_pillow_advance(char, following, size) for following in (*STORE_CHARACTERS, "")]
                          for char in STORE_CHARACTERS] for size in sizes], np.int64).reshape(len(sizes), n, n + 1)
    data = io.BytesIO()
    np.savez(data, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8), table=table.reshape(-1, 5),
             buffer=np.concatenate([mask.ravel() for mask, _, _ in masks]).astype(np.uint8), advances=advances,
             ascenders=np.array([_pillow_ascender(size) for size in sizes], np.int64))
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(handle, "wb") as file:
        file.write(data.getvalue())
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)  # readers see the old store or the new one, whole
    _glyph_store.cache_clear()
    return path


@lru_cache(maxsize=1024)
def _composed(text: str, size: int) -> tuple[np.ndarray, int]:
    """The glyph masks of ``text`` anchored left at the ascender, (n, 5) rows as
    :func:`_rendered` gives, and the string's length in 26.6."""
    ascender = _ascender(size)
    rows, pen = [], 0
    for i, char in enumerate(text):
        offset, height, width, left, top = _rendered(char, size, "ls", 0)[0].tolist()
        # PIXEL() of _imagingft.c: the 26.6 pen position rounded to the nearest pixel.
        rows.append((offset, height, width, ((pen + 32) >> 6) + left, ascender + top))
        pen += _advance(char, text[i + 1:i + 2], size)
    return _frozen(np.array(rows, np.int64).reshape(-1, 5)), pen


def _frozen(array: np.ndarray) -> np.ndarray:
    """``array`` made read-only: the caches hand out the same array to every caller."""
    array.flags.writeable = False
    return array


def text_length(text: str, size: int) -> float:
    """``FreeTypeFont.getlength`` of the default font at ``size``, from cached advances."""
    return _composed(text, size)[1] / 64


def _pieces(text: Text, stroked: bool) -> np.ndarray:
    if stroked:
        return _rendered(text.text, text.size, text.anchor, text.stroke)
    if text.anchor is None:
        return _composed(text.text, text.size)[0]
    return _rendered(text.text, text.size, text.anchor, 0)


def text_arrays(texts: list[Text]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``masks``, ``pieces`` and ``texts`` arguments of
    :func:`worker.qc_raster.rasterize` that draw ``texts`` in order, each outline before its
    text (as ``ImageDraw.text``)."""
    placed, drawn, count = [np.zeros((0, 5), np.int64)], [], 0
    for text in texts:
        # ImageDraw.text draws the outline, then the text unless it has the outline's colour.
        passes = ((True,) if text.fill == text.stroke_fill else (True, False)) if text.stroke else (False,)
        for stroked in passes:
            pieces = _pieces(text, stroked)
            placed.append(pieces + np.array([0, 0, 0, *text.xy], np.int64))
            drawn.append((count, count + len(pieces), *(text.stroke_fill if stroked else text.fill)))
            count += len(pieces)
    # The atlas is read after every mask is in it.
    return _ATLAS.buffer(), np.concatenate(placed), np.array(drawn, np.int64).reshape(-1, 5)
