"""Lossless coding of integer arrays (quantisation codes) with static rANS over independent chunks.

The alphabet and its radius are those of :mod:`gpu.compress.entropy_coding`: codes within
``±r`` are symbols of their own, the rarer ones beyond get one escape symbol per sign and
their values go, as int32 and in order, to a ``zstandard`` side stream; ``r`` is the smallest
radius that holds all but a tenth of a percent of the codes, at most ``MAX_RADIUS``. Symbol
``s = clip(code, −r−1, r+1) + r + 1``.

The symbols are coded by range asymmetric numeral systems (rANS; Duda 2013, "Asymmetric
numeral systems", Sec. 4.1, in Giesen's ryg_rans formulation) with a static order-0 model:
frequencies ``f_s`` summing to ``M = 2^15`` (:func:`quantise_frequencies`), cumulative starts
``b_s``. The 32-bit state ``x`` stays in ``[2^16, 2^32)``; encoding ``s`` first moves the low
16 bits of ``x`` out as a word while ``x ≥ f_s · 2^17`` (once at most), then
``x ← ⌊x / f_s⌋ · M + (x mod f_s) + b_s``; decoding inverts it with ``slot = x mod M``,
``s = lut[slot]``, ``x ← f_s · ⌊x / M⌋ + slot − b_s`` and, while ``x < 2^16``, reads a word in.
The symbols are cut into chunks of :func:`default_chunk` symbols (the last one shorter), each coded alone from the
state ``2^16``, in reverse, its final state then flushed as two words: a chunk decodes forward
on its own, and ends at state ``2^16`` with all its words read, which checks it. So one chunk
is one CUDA thread's (:mod:`gpu.compress.chunked_rans_cuda`) or one ``prange`` iteration's
work, and both backends write the same bytes.

Stream layout (little-endian): ``u32 n, u32 r, u32 chunk, u32 len(frequencies),
u32 len(escapes), u32 len(sizes)``; the zstd-compressed uint16 frequencies of the ``2r + 3``
symbols (all zero when ``n = 0``); the zstd-compressed int32 escaped values (empty when there
are none); the zstd-compressed uint32 word counts of the ``⌈n / chunk⌉`` chunks; then each
chunk's uint16 words, chunks in order, a chunk's words in decoding order (its final state's
low then high half first). A stream of one distinct symbol, or none, codes no chunk: its
sizes and words are empty.
"""

from __future__ import annotations

import math
import struct
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable

import numpy as np
from numba import get_num_threads, njit, prange

from gpu.compress.rans_chunk import decode_chunk, encode_chunk
from gpu.compress.rans_parameters import CHUNK, CHUNK_BYTES, MAX_RADIUS, PROB_BITS, PROB_SCALE, SPAN, SPARSE_CHUNK
from gpu.cpu_parallel import run_parallel_loop
from gpu.cuda.compile_notice import notice_compile
from gpu.cuda.backend import resolve_backend

__all__ = ["encode_integers", "encode_streams", "decode_integers", "clipped_histogram", "quantise_frequencies",
           "default_chunk", "CHUNK", "MAX_RADIUS", "PROB_BITS"]

_HEADER = struct.Struct("<6I")
#: streams of fewer codes are coded and decoded on one thread (:func:`_run`)
SHORT_STREAM = 1 << 16
_TAIL_SHARE = 1e-3  # as gpu.compress.entropy_coding
_INT32 = np.iinfo(np.int32)
_ZSTD_LEVEL = 9  # docs/decisions/compress-rans-side-streams.md


# --- the model, shared by both backends (host, a few thousand entries) ---


def _radius(hist: np.ndarray, n: int) -> int:
    """The radius of :mod:`gpu.compress.entropy_coding` (``min(q, MAX_RADIUS, max |code|)``, ``q``
    numpy's ``quantile(|codes|, 1 − 10⁻³, method="higher")``) from the histogram ``hist``
    (SPAN,) of the codes clipped to ±(MAX_RADIUS + 1): the magnitudes clipped to
    MAX_RADIUS + 1 have the same order statistic up to MAX_RADIUS."""
    if n == 0:
        return 0
    magnitude = hist[MAX_RADIUS + 1:].copy()
    magnitude[1:] += hist[MAX_RADIUS::-1]
    # numpy's virtual index of the "higher" method, in the same float arithmetic
    rank = math.ceil((n - 1) * (1 - _TAIL_SHARE))
    return min(int(np.searchsorted(np.cumsum(magnitude), rank + 1)), MAX_RADIUS)


def _symbol_counts(hist: np.ndarray, radius: int) -> np.ndarray:
    """The counts (2r + 3,) of the symbols of radius ``r`` from the clipped histogram."""
    centre = MAX_RADIUS + 1
    counts = np.empty(2 * radius + 3, np.int64)
    counts[0] = hist[:centre - radius].sum()
    counts[1:-1] = hist[centre - radius:centre + radius + 1]
    counts[-1] = hist[centre + radius + 1:].sum()
    return counts


@njit(cache=True)
def _first(counts, freq, a, b, give):  # pragma: no cover - compiled
    """Whether symbol ``a`` takes the next unit before ``b`` (``give``), or gives it back first.

    A unit more for ``s`` saves ``c_s · log2((f_s + 1) / f_s) ≈ c_s / (f_s + ½)`` bits, a unit
    less costs ``c_s · log2(f_s / (f_s − 1)) ≈ c_s / (f_s − ½)``: compared as exact integer
    cross products, ties to the lower symbol, so every machine picks the same."""
    if give:
        left = counts[a] * (2 * freq[b] + 1)
        right = counts[b] * (2 * freq[a] + 1)
        if left != right:
            return left > right
    else:
        left = counts[a] * (2 * freq[b] - 1)
        right = counts[b] * (2 * freq[a] - 1)
        if left != right:
            return left < right
    return a < b


@njit(cache=True)
def _sift_down(heap, size, at, counts, freq, give):  # pragma: no cover - compiled
    while True:
        best = at
        for child in (2 * at + 1, 2 * at + 2):
            if child < size and _first(counts, freq, heap[child], heap[best], give):
                best = child
        if best == at:
            return
        heap[at], heap[best] = heap[best], heap[at]
        at = best


@njit(cache=True)
def _quantise(counts, scale):  # pragma: no cover - compiled
    n = counts.sum()
    freq = np.zeros(counts.shape[0], np.int64)
    if n == 0:
        return freq
    present = np.flatnonzero(counts)
    for s in present:
        freq[s] = max(1, counts[s] * scale // n)
    left = scale - freq.sum()
    give = left > 0
    heap = present if give else present[freq[present] > 1]
    size = heap.shape[0]
    for at in range(size // 2 - 1, -1, -1):
        _sift_down(heap, size, at, counts, freq, give)
    for _ in range(abs(left)):
        s = heap[0]
        if give:
            freq[s] += 1
        else:
            freq[s] -= 1
            if freq[s] == 1:  # no unit left to give back
                size -= 1
                heap[0] = heap[size]
        _sift_down(heap, size, 0, counts, freq, give)
    return freq


def quantise_frequencies(counts) -> np.ndarray:
    """Integer frequencies summing to ``2^PROB_BITS`` from symbol counts, near the smallest
    coded size ``Σ c_s · log2(M / f_s)``.

    Each present symbol starts at ``max(1, ⌊c_s · M / n⌋)``; the difference to ``M`` is then
    handed out (or taken back) one unit at a time to the symbol where it saves the most bits
    (costs the fewest), by exact integer comparisons with ties to the lower symbol (a greedy
    descent of the convex cost), so the table is the same on every machine.

    Parameters
    ----------
    counts : (K,) non-negative integers, K ≤ 2^PROB_BITS

    Returns
    -------
    (K,) int64: 0 for absent symbols, at least 1 for present ones; all zero when every count is.
    """
    counts = np.asarray(counts, dtype=np.int64)
    if counts.shape[0] > PROB_SCALE or (counts < 0).any():
        raise ValueError(f"cannot give {counts.shape[0]} symbols frequencies summing to {PROB_SCALE}")
    return _quantise(counts, PROB_SCALE)


def _starts(freq: np.ndarray) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(freq)[:-1])).astype(np.int64)


def _exclusive_sum(sizes: np.ndarray) -> np.ndarray:
    """Offsets (len + 1,) of back-to-back parts of ``sizes``."""
    return np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)


# --- CPU loops: one prange iteration per chunk (or per thread's share, for the histogram) ---


@njit(parallel=True, cache=True)
def _clipped_histogram(codes, parts):  # pragma: no cover - compiled
    n = codes.shape[0]
    rows = np.zeros((parts, SPAN), np.int64)
    share = (n + parts - 1) // parts
    for p in prange(parts):
        for i in range(p * share, min(n, (p + 1) * share)):
            rows[p, min(max(np.int64(codes[i]), -MAX_RADIUS - 1), MAX_RADIUS + 1) + MAX_RADIUS + 1] += 1
    hist = np.zeros(SPAN, np.int64)
    for p in range(parts):
        hist += rows[p]
    return hist


@njit(parallel=True, cache=True)
def _encode_chunks(codes, radius, freq, start, chunk, regions, sizes, escapes):  # pragma: no cover - compiled
    n = codes.shape[0]
    cap = regions.shape[0] // sizes.shape[0]  # chunk + 2 words, or n + 2 for one short chunk
    for c in prange(sizes.shape[0]):
        sizes[c], escapes[c] = encode_chunk(codes, c * chunk, min(n, (c + 1) * chunk), radius, freq, start, regions,
                                            (c + 1) * cap)


@njit(parallel=True, cache=True)
def _compact_words(regions, sizes, offsets, words):  # pragma: no cover - compiled
    cap = regions.shape[0] // sizes.shape[0]  # chunk + 2 words, or n + 2 for one short chunk
    for c in prange(sizes.shape[0]):
        end = (c + 1) * cap
        words[offsets[c]:offsets[c + 1]] = regions[end - sizes[c]:end]


@njit(parallel=True, cache=True)
def _move_escapes(codes, radius, chunk, offsets, escaped, into_codes):  # pragma: no cover - compiled
    """The codes beyond ±radius (coded, or decoded as the escape symbols ±(radius + 1)) to
    ``escaped`` in order, chunk ``c``'s from ``offsets[c]``, or, with ``into_codes``, back."""
    n = codes.shape[0]
    for c in prange(offsets.shape[0] - 1):
        at = offsets[c]
        if at == offsets[c + 1]:
            continue
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            if codes[i] < -radius or codes[i] > radius:
                if into_codes:
                    codes[i] = escaped[at]
                else:
                    escaped[at] = codes[i]
                at += 1


@njit(parallel=True, cache=True)
def _decode_chunks(words, offsets, lut, freq, start, radius, chunk, out, escapes, failed):  # pragma: no cover
    n = out.shape[0]
    for c in prange(escapes.shape[0]):
        escapes[c], failed[c] = decode_chunk(words, offsets[c], offsets[c + 1], lut, freq, start, radius, c * chunk,
                                             min(n, (c + 1) * chunk), out)


# --- the stream ---


def _host_codes(codes) -> np.ndarray:
    """``codes`` as a flat C-ordered int32 host array, refused where they do not fit."""
    codes = np.asarray(codes)
    if codes.dtype.kind not in "iu":
        raise ValueError(f"codes must be integers, got an array of {codes.dtype}")
    if codes.dtype != np.int32 and codes.size:
        low, high = int(codes.min()), int(codes.max())
        if low < _INT32.min or high > _INT32.max:
            raise ValueError(f"codes must lie within int32, got values from {low} to {high}")
    return np.ascontiguousarray(codes, dtype=np.int32).reshape(-1)


def _zstd(array: np.ndarray) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor(level=_ZSTD_LEVEL).compress(array.tobytes()) if array.size else b""


def _run(loop, n: int, *args):
    """``loop(*args)`` for a stream of ``n`` codes on the parallel-loop thread, saying first
    when it compiles (a new install's first compression: ``fibertensor warmup --family
    compress`` does it ahead). A short stream's loops run on one thread: waking every thread
    of the team for a few thousand codes cost up to tens of milliseconds a stream on a
    16-core host."""
    notice_compile(loop, args, "the compression CPU loops", None)
    return run_parallel_loop(loop, *args, threads=1 if n < SHORT_STREAM else None)


def _histogram_cpu(codes: np.ndarray) -> np.ndarray:
    """:func:`_clipped_histogram` of flat host ``codes``, a part per thread that runs it; a
    short stream's counted by numpy in this thread (the hand-off to the parallel-loop thread
    cost ~0.2 ms, several times the counting, and the encoder's search prices ~90 short
    streams an encode)."""
    n = codes.shape[0]
    if n < SHORT_STREAM:
        # int64 first, wrapping as the loop's np.int64(code) does
        clipped = np.clip(codes.astype(np.int64, copy=False), -MAX_RADIUS - 1, MAX_RADIUS + 1)
        return np.bincount(clipped + (MAX_RADIUS + 1), minlength=SPAN)
    return _run(_clipped_histogram, n, codes, get_num_threads())


def clipped_histogram(codes, backend: str = "cpu") -> np.ndarray:
    """The histogram (SPAN,) int64 of integer ``codes`` (any shape; on the CUDA backend an
    int32 device array) clipped to ±(MAX_RADIUS + 1): the counts the coder's model starts from."""
    if resolve_backend(backend) == "cuda":
        from gpu.compress import chunked_rans_cuda

        return chunked_rans_cuda.clipped_histogram_cuda(chunked_rans_cuda.device_codes(codes))
    codes = np.ascontiguousarray(codes).reshape(-1)
    if codes.dtype.kind not in "iu":
        raise ValueError(f"codes must be integers, got an array of {codes.dtype}")
    return _histogram_cpu(codes)


def default_chunk(n: int, bits: int | None = None) -> int:
    """Symbols per chunk for a stream of ``n`` symbols whose words take about ``bits``:
    CHUNK, doubled up to SPARSE_CHUNK while a chunk would code fewer than CHUNK_BYTES (its
    4-byte final state a larger share)."""
    chunk = CHUNK
    if bits is not None and n:
        while chunk < SPARSE_CHUNK and chunk < n and bits * chunk < 8 * CHUNK_BYTES * n:
            chunk *= 2
    return chunk


def _coded_bits(counts: np.ndarray, freq: np.ndarray) -> int:
    """About ``Σ c_s · log2(M / f_s)`` bits, in integer arithmetic so that every machine picks
    the same chunk from it: per symbol the smaller of two upper bounds in 1/1024 bit,
    ``(P − ⌊log2 f⌋)·1024`` and ``⌈(M − f)·1478 / f⌉`` (``log2(1 + u) ≤ u / ln 2``, tight
    where ``f`` is near ``M``)."""
    present = freq > 0
    f = freq[present].astype(np.int64)
    log2_floor = np.frexp(f)[1].astype(np.int64) - 1  # exact: f < 2^53
    by_bits = (PROB_BITS - log2_floor) * 1024
    by_ratio = -(-(PROB_SCALE - f) * 1478 // f)
    # at most 2^32 symbols of at most 15,360 a symbol: the sum stays within int64
    total = int((counts[present].astype(np.int64) * np.minimum(by_bits, by_ratio)).sum())
    return -(-total // 1024)


def encode_integers(codes, backend: str = "cpu", *, chunk: int | None = None) -> bytes:
    """Code an integer array (any shape, read in C order) into bytes.

    Parameters
    ----------
    codes : array of integers within int32; on the CUDA backend also a flat-able int32
        device array (numba or CuPy), which stays on the device
    backend : ``cpu``, ``cuda`` or ``auto``; the stream is the same byte for byte
    chunk : symbols per independently coded chunk (the stream records it); default
        :func:`default_chunk` of the stream's length and coded size

    Returns
    -------
    bytes
        The stream :func:`decode_integers` reads back exactly (layout in the module docstring).
    """
    return _joined(*_coded_parts(codes, backend, chunk, _zstd))


def encode_streams(streams: Iterable[tuple[object, str]]) -> list[bytes]:
    """:func:`encode_integers` of each ``(codes, backend)``, the same bytes: the streams coded
    on the GPU in turn in this thread, those coded on the host in turn on another (a short
    stream's host coding is mostly hand-offs and small numpy calls, which then run while
    this thread waits for the device), and each stream's side streams compressed on host
    threads while the next streams are coded (zstd releases the interpreter; an encoder's
    side streams at level 9 took longer than its device coding)."""
    streams = list(streams)
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="rans-side-streams") as pool, \
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="rans-host-streams") as host:
        def coded(codes, backend):
            return _coded_parts(codes, backend, None, lambda array: pool.submit(_zstd, array))

        on_host = {k: host.submit(coded, codes, backend) for k, (codes, backend) in enumerate(streams)
                   if resolve_backend(backend) != "cuda"}
        parts = {k: coded(codes, backend) for k, (codes, backend) in enumerate(streams) if k not in on_host}
        parts.update({k: future.result() for k, future in on_host.items()})
        return [_joined(*parts[k]) for k in range(len(streams))]


def _coded_parts(codes, backend: str, chunk: int | None, compress) -> tuple:
    """A stream's header numbers, its side streams as ``compress`` returns them (bytes, or
    futures of bytes) and its words."""
    if chunk is not None and not 1 <= chunk < 2**31:
        raise ValueError(f"chunk must be a positive number of symbols below 2^31, got {chunk}")
    on_cuda = resolve_backend(backend) == "cuda"
    if on_cuda:
        from gpu.compress import chunked_rans_cuda

        if not chunked_rans_cuda.is_device_array(codes):
            codes = _host_codes(codes)
        codes = chunked_rans_cuda.device_codes(codes)
    else:
        codes = _host_codes(codes)
    n = codes.shape[0]
    if n >= 2**32:
        raise ValueError(f"a stream holds fewer than 2^32 codes, got {n}")
    if on_cuda:
        hist = chunked_rans_cuda.clipped_histogram_cuda(codes)
    else:
        hist = _histogram_cpu(codes)
    radius = _radius(hist, n)
    counts = _symbol_counts(hist, radius)
    freq = quantise_frequencies(counts)
    chunk = default_chunk(n, _coded_bits(counts, freq)) if chunk is None else chunk
    if np.count_nonzero(freq) > 1:
        if on_cuda:
            sizes, words, escaped = chunked_rans_cuda.encode_chunks_cuda(codes, radius, freq, _starts(freq), chunk)
        else:
            sizes, words, escaped = _encode_cpu(codes, radius, freq, chunk)
    else:  # one distinct symbol, or none: nothing to code, and every code or none escaped
        sizes = np.zeros(0, np.int64)
        words = np.zeros(0, np.uint16)
        escaped = np.zeros(0, np.int32)
        if freq[0] or freq[-1]:
            escaped = codes.copy_to_host() if on_cuda else codes
    # a view of ``escaped`` keeps its (page-locked, pooled) memory until it is compressed
    blobs = [compress(freq.astype("<u2")), compress(escaped.astype("<i4", copy=False)), compress(sizes.astype("<u4"))]
    return n, radius, chunk, blobs, words


def _joined(n: int, radius: int, chunk: int, blobs: list, words: np.ndarray) -> bytes:
    blobs = [blob if isinstance(blob, bytes) else blob.result() for blob in blobs]
    return b"".join([_HEADER.pack(n, radius, chunk, *map(len, blobs)), *blobs,
                     memoryview(words.astype("<u2", copy=False))])  # one copy of the words, not two


def _encode_cpu(codes, radius, freq, chunk):
    """Per-chunk word counts, the words back to back, and the escaped codes in order."""
    chunks = -(-codes.shape[0] // chunk)
    regions = np.empty(chunks * (min(chunk, codes.shape[0]) + 2), np.uint16)
    sizes = np.empty(chunks, np.int64)
    escapes = np.empty(chunks, np.int64)
    _run(_encode_chunks, codes.shape[0], codes, radius, freq, _starts(freq), chunk, regions, sizes, escapes)
    offsets = _exclusive_sum(sizes)
    words = np.empty(offsets[-1], np.uint16)
    _run(_compact_words, codes.shape[0], regions, sizes, offsets, words)
    escape_offsets = _exclusive_sum(escapes)
    escaped = np.empty(escape_offsets[-1], np.int32)
    if escaped.size:
        _run(_move_escapes, codes.shape[0], codes, radius, chunk, escape_offsets, escaped, False)
    return sizes, words, escaped


def _damaged(why: str) -> ValueError:
    return ValueError(f"damaged integer stream: {why}")


def _unzstd(blob: bytes, dtype: str, what: str) -> np.ndarray:
    import zstandard

    if not blob:
        return np.zeros(0, dtype)
    try:
        raw = zstandard.ZstdDecompressor().decompress(blob)
    except zstandard.ZstdError as error:
        raise _damaged(f"its {what} do not decompress ({error})") from None
    if len(raw) % np.dtype(dtype).itemsize:
        raise _damaged(f"its {what} are not whole {np.dtype(dtype).name} values")
    return np.frombuffer(raw, dtype)


def _parse(data: bytes):
    """The parts of a stream, checked against each other: (n, radius, chunk, freq, escaped,
    sizes, words)."""
    if len(data) < _HEADER.size:
        raise _damaged(f"{len(data)} bytes are shorter than its {_HEADER.size}-byte header")
    n, radius, chunk, *lengths = _HEADER.unpack_from(data)
    if radius > MAX_RADIUS or chunk == 0:
        raise _damaged(f"radius {radius} (at most {MAX_RADIUS}) or chunk {chunk} (at least 1) is out of range")
    at = _HEADER.size
    if at + sum(lengths) > len(data):
        raise _damaged(f"its parts add up to {at + sum(lengths)} bytes, more than its {len(data)}")
    parts = []
    for length, dtype, what in zip(lengths, ("<u2", "<i4", "<u4"), ("frequencies", "escaped codes", "chunk sizes")):
        parts.append(_unzstd(data[at:at + length], dtype, what))
        at += length
    freq, escaped, sizes = parts[0].astype(np.int64), parts[1].astype(np.int32), parts[2].astype(np.int64)
    if len(freq) != 2 * radius + 3:
        raise _damaged(f"{len(freq)} frequencies for radius {radius}, not {2 * radius + 3}")
    if freq.sum() != (PROB_SCALE if n else 0):
        raise _damaged(f"its frequencies sum to {freq.sum()}, not {PROB_SCALE if n else 0}")
    chunks = -(-n // chunk) if np.count_nonzero(freq) > 1 else 0
    if len(sizes) != chunks or (sizes < 2).any() or (sizes > chunk + 2).any():
        raise _damaged(f"{len(sizes)} chunk sizes for {chunks} chunks of at most {chunk + 2} words")
    if len(data) - at != 2 * sizes.sum():
        raise _damaged(f"{len(data) - at} bytes of words where the chunk sizes say {2 * sizes.sum()}")
    words = np.frombuffer(data, "<u2", offset=at) if at % 2 == 0 else np.frombuffer(data[at:], "<u2")
    return n, radius, chunk, freq, escaped, sizes, words


def decode_integers(data: bytes, backend: str = "cpu", out=None):
    """The codes of a stream written by :func:`encode_integers`.

    Parameters
    ----------
    data : bytes-like stream
    backend : ``cpu``, ``cuda`` or ``auto``
    out : optional flat int32 array of the stream's length to decode into (a device array on
        the CUDA backend)

    Returns
    -------
    (n,) int32 array: ``out`` where given; else on the host on the CPU backend, a device array on the CUDA
    backend (numba's under the simulator).

    Raises
    ------
    ValueError
        When the stream is damaged: parts whose lengths do not add up, a frequency table
        that does not sum to 2^15, a chunk that does not decode back to its initial state,
        escaped values that do not match the escape symbols.
    """
    n, radius, chunk, freq, escaped, sizes, words = _parse(bytes(data) if not isinstance(data, bytes) else data)
    on_cuda = resolve_backend(backend) == "cuda"
    if on_cuda:
        from gpu.compress import chunked_rans_cuda

        target = chunked_rans_cuda.device_output(out, n)  # on a GPU a view of ``out``, which is returned
    elif out is None:
        target = np.empty(n, np.int32)
    elif out.dtype != np.int32 or out.shape != (n,) or not out.flags.c_contiguous:
        raise ValueError(f"out must be a contiguous int32 array of shape ({n},), got {out.dtype} {out.shape}")
    else:
        target = out
    _decode_into(target, on_cuda, radius, chunk, freq, escaped, sizes, words)
    return target if out is None else out


def _decode_into(out, on_cuda: bool, radius: int, chunk: int, freq, escaped, sizes, words) -> None:
    """Decode a parsed stream into ``out`` (host, or a device array on the CUDA backend)."""
    n = out.shape[0]
    if np.count_nonzero(freq) <= 1:
        escapes = n if freq[0] or freq[-1] else 0
        if escaped.size != escapes:
            raise _damaged(f"{escaped.size} escaped codes for {escapes} escape symbols")
        if n == 0:
            return
        value = int(np.argmax(freq)) - radius - 1
        if on_cuda:
            from gpu.compress import chunked_rans_cuda

            chunked_rans_cuda.fill_cuda(out, escaped if escapes else None, value)
        else:
            out[:] = escaped if escapes else value
        return
    offsets = _exclusive_sum(sizes)
    if on_cuda:
        from gpu.compress import chunked_rans_cuda

        symbols, failed = chunked_rans_cuda.decode_chunks_cuda(words, offsets, freq, _starts(freq), escaped, radius,
                                                               chunk, out)
    else:
        symbols, failed = _decode_cpu(words, offsets, freq, escaped, radius, chunk, out)
    if failed < len(sizes):
        raise _damaged(f"chunk {failed} of {len(sizes)} does not decode back to its initial state")
    if symbols != escaped.size:
        raise _damaged(f"{escaped.size} escaped codes for {symbols} escape symbols")


def _decode_cpu(words, offsets, freq, escaped, radius, chunk, out) -> tuple[int, int]:
    """Decode every chunk into ``out``, the escape symbols replaced by ``escaped`` in order
    where the counts agree: the number of escape symbols decoded and the first chunk that
    failed its check (the number of chunks when none did)."""
    if not words.flags.aligned:
        words = words.copy()
    chunks = len(offsets) - 1
    lut = np.repeat(np.arange(len(freq), dtype=np.uint16), freq)
    escapes = np.empty(chunks, np.int64)
    failed = np.empty(chunks, np.bool_)
    _run(_decode_chunks, out.shape[0], words, offsets, lut, freq, _starts(freq), radius, chunk, out, escapes, failed)
    first_failed = int(np.argmax(failed)) if failed.any() else chunks
    if first_failed == chunks and escaped.size and escapes.sum() == escaped.size:
        _run(_move_escapes, out.shape[0], out, radius, chunk, _exclusive_sum(escapes), escaped, True)
    return int(escapes.sum()), first_failed
