"""Lossless coding of integer arrays (quantisation codes) with a range coder: the streams of
version-2 archives, which :func:`decode_integers` still reads (version 3 codes them by
:mod:`gpu.compress.chunked_rans`; :func:`encode_integers` stays as their writer, which the
tests check the reader and the new coder's sizes against).

Order-0 model: the codes' own histogram, stored beside the coded words, drives a range coder
(``constriction``, Bamler 2022, its ``queue.RangeEncoder`` with a ``Categorical`` model). Codes
within ``±L`` are symbols of their own; the rarer ones beyond get one escape symbol per sign
and their values go, as int32, to a ``zstandard`` side stream. ``L`` is the smallest radius
that holds all but a tenth of a percent of the codes (at most ``MAX_RADIUS``), so the
histogram stays small while the heavy-tailed core codes still code well.

Stream layout (little-endian): ``u32 n, u32 L, u32 len(counts), u32 len(escapes)``, then the
zstd-compressed uint32 counts of the ``2L + 3`` symbols, the zstd-compressed int32 escaped
values, and the range coder's uint32 words.
"""

from __future__ import annotations

import struct

import numpy as np

__all__ = ["encode_integers", "decode_integers", "MAX_RADIUS"]

MAX_RADIUS = 4095
_HEADER = struct.Struct("<4I")
_TAIL_SHARE = 1e-3


def _radius(codes: np.ndarray) -> int:
    if codes.size == 0:
        return 0
    magnitude = np.abs(codes)
    radius = int(np.quantile(magnitude, 1 - _TAIL_SHARE, method="higher"))
    return min(radius, MAX_RADIUS, int(magnitude.max()))


def _model(counts: np.ndarray):
    import constriction

    return constriction.stream.model.Categorical(counts.astype(np.float64), perfect=False)


def encode_integers(codes: np.ndarray) -> bytes:
    """Code an integer array (any shape, read in C order) into bytes.

    Parameters
    ----------
    codes : array of integers, values within int32

    Returns
    -------
    bytes
        The stream :func:`decode_integers` reads back exactly.
    """
    import zstandard
    import constriction

    codes = np.asarray(codes).ravel().astype(np.int64)
    radius = _radius(codes)
    symbols = np.clip(codes, -radius - 1, radius + 1) + radius + 1
    escaped = codes[(codes < -radius) | (codes > radius)].astype("<i4")
    counts = np.bincount(symbols, minlength=2 * radius + 3).astype("<u4")
    words = np.zeros(0, np.uint32)
    if np.count_nonzero(counts) > 1:
        encoder = constriction.stream.queue.RangeEncoder()
        encoder.encode(symbols.astype(np.int32), _model(counts))
        words = encoder.get_compressed()
    zstd = zstandard.ZstdCompressor(level=19)
    count_blob = zstd.compress(counts.tobytes())
    escape_blob = zstd.compress(escaped.tobytes()) if escaped.size else b""
    return (_HEADER.pack(codes.size, radius, len(count_blob), len(escape_blob)) + count_blob + escape_blob
            + words.astype("<u4").tobytes())


def decode_integers(data: bytes) -> np.ndarray:
    """The int64 codes (flat) of a stream written by :func:`encode_integers`."""
    import zstandard
    import constriction

    size, radius, n_counts, n_escapes = _HEADER.unpack_from(data)
    at = _HEADER.size
    zstd = zstandard.ZstdDecompressor()
    counts = np.frombuffer(zstd.decompress(data[at:at + n_counts]), "<u4")
    at += n_counts
    escaped = (np.frombuffer(zstd.decompress(data[at:at + n_escapes]), "<i4") if n_escapes
               else np.zeros(0, np.int32))
    at += n_escapes
    if len(counts) != 2 * radius + 3:
        raise ValueError("damaged integer stream: histogram length does not match its radius")
    present = np.flatnonzero(counts)
    if size == 0:
        return np.zeros(0, np.int64)
    if len(present) == 1:
        symbols = np.full(size, present[0], np.int64)
    else:
        words = np.frombuffer(data[at:], "<u4").astype(np.uint32)
        symbols = constriction.stream.queue.RangeDecoder(words).decode(_model(counts), size).astype(np.int64)
    codes = symbols - radius - 1
    outside = (symbols == 0) | (symbols == 2 * radius + 2)
    if np.count_nonzero(outside) != escaped.size:
        raise ValueError("damaged integer stream: escape count does not match")
    codes[outside] = escaped
    return codes
