"""numba.cuda kernels of :mod:`gpu.compress.chunked_rans`, and the launch sequences of a call.

``clipped_histogram_kernel``: the histogram of the codes clipped to ±(MAX_RADIUS + 1), a
block's in shared memory, then added to the grid's; ``quantize_histogram_kernel``: the
quantiser's codes counted so in its own pass. ``encode_chunks_kernel`` and
``decode_chunks_kernel``: one thread per chunk, the arithmetic of the CPU loops in int64 (the
state stays below 2^32, its products below 2^48), so both write the same words. The encoder
writes a chunk's words at the end of the chunk's own region of ``chunk + 2`` words (a symbol
moves one word at most, the final state two), ``compact_words_kernel`` moves them in chunk
order. ``move_escapes_kernel``, out of the codes or back into them: one block per chunk that holds
escapes, a block-wide prefix sum of the escape flags (Hillis & Steele 1986) a tile at a time,
so the escaped values keep their order. ``lut_kernel`` builds the decoder's slot → symbol
table from the cumulative starts. Array reads are cast to int64 first, so the simulator
(numpy scalar rules) computes what the compiled kernel does.

A call's fixed cost is kept apart from its size: what the kernels read goes to the device
in one copy from one page-locked buffer, into one device buffer that also holds their
scratch arrays; device memory comes from the device's stream-ordered pool; a chunk's offset
among the words or the escaped values (a prefix sum over the chunks before it) is summed on
the device by the block that needs it; a decode reads back, once at its end, only the
two numbers its checks need, which its chunks' threads gather with atomics: the escape
symbols decoded, and the first chunk that failed its check; and on a GPU the kernels launch
from their cubins (:mod:`gpu.compress.cuda_kernels`), their arrays views of the device
buffers (:class:`gpu.cuda.device_arrays.DeviceArray`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from gpu.compress.cuda_kernels import compress_kernels, launch_view
from gpu.compress.rans_chunk import decode_chunk, encode_chunk
from gpu.compress.rans_parameters import MAX_RADIUS, PROB_SCALE, SPAN
from gpu.cuda import device_arrays
from gpu.cuda.simulator import simulator_active

__all__ = ["clipped_histogram_kernel", "quantize_histogram_kernel", "encode_chunks_kernel", "compact_words_kernel",
           "move_escapes_kernel", "lut_kernel", "decode_chunks_kernel", "fill_kernel", "is_device_array",
           "device_codes", "device_output", "clipped_histogram_cuda", "quantize_histogram_cuda", "encode_chunks_cuda",
           "decode_chunks_cuda", "fill_cuda"]

_BLOCK = 256
_HISTOGRAM_BLOCKS = 256  # each block adds its non-zero bins to the grid's: few blocks, long strides
_MAX_BLOCKS = 4096
# one thread per chunk: a warp a block spreads the chunks over the most multiprocessors
_CHUNK_THREADS = 32
_SCAN = 256  # threads of a prefix-sum block, and the tile it scans
# lut slots a thread fills: one search for its first slot, then a walk along the symbols
_LUT_SLOTS = 64
_ALIGN = 8  # bytes: the parts of a packed buffer start where an int64 may
# the two numbers a decode reads back: escape symbols decoded, first chunk that failed
_ESCAPE_TOTAL, _FIRST_FAILED = 0, 1


@cuda.jit(device=True)
def clear_bins(local, tid):
    """A block's shared histogram (SPAN bins) zeroed by its threads together."""
    for b in range(tid, SPAN, cuda.blockDim.x):
        local[b] = 0
    cuda.syncthreads()


@cuda.jit(device=True)
def count_code(local, code):
    """One code counted in its clipped bin of the block's shared histogram."""
    cuda.atomic.add(local, min(max(np.int64(code), -MAX_RADIUS - 1), MAX_RADIUS + 1) + MAX_RADIUS + 1, 1)


@cuda.jit(device=True)
def add_bins(local, hist, tid):
    """The block's shared histogram added to the grid's (its non-zero bins), once every
    thread of the block has counted."""
    cuda.syncthreads()
    for b in range(tid, SPAN, cuda.blockDim.x):
        if local[b]:
            cuda.atomic.add(hist, b, local[b])


@cuda.jit(cache=True)
def clipped_histogram_kernel(codes, hist):
    local = cuda.shared.array(SPAN, np.uint32)
    tid = cuda.threadIdx.x
    clear_bins(local, tid)
    for i in range(cuda.grid(1), codes.shape[0], cuda.gridsize(1)):
        count_code(local, codes[i])
    add_bins(local, hist, tid)


@cuda.jit(cache=True)
def quantize_histogram_kernel(x, ref, use_ref, inv_step, codes, keep, counts):
    """The quantiser's codes (as ``quantize_cuda.quantize_kernel``, kept where ``keep``) counted as
    ``clipped_histogram_kernel`` counts them: ``counts[:SPAN]``, and ``counts[SPAN]`` set where a code
    would not fit in 32 bits."""
    local = cuda.shared.array(SPAN, np.uint32)
    tid = cuda.threadIdx.x
    clear_bins(local, tid)
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = x[i] - ref[i] if use_ref else x[i]
        u = v * inv_step
        if abs(u) >= 2147483647.0:
            counts[SPAN] = 1
            u = 0.0
        code = np.int32(math.floor(u + 0.5))
        if keep:
            codes[i] = code
        count_code(local, code)
    add_bins(local, counts, tid)


@cuda.jit(cache=True)
def encode_chunks_kernel(codes, radius, freq, start, chunk, regions, sizes, escapes):
    c = cuda.grid(1)
    if c >= sizes.shape[0]:
        return
    cap = regions.shape[0] // sizes.shape[0]  # chunk + 2 words, or n + 2 for one short chunk
    sizes[c], escapes[c] = encode_chunk(codes, c * chunk, min(codes.shape[0], (c + 1) * chunk), radius, freq, start,
                                        regions, (c + 1) * cap)


@cuda.jit(device=True)
def _inclusive_scan(rank, tid):
    """``rank[:_SCAN]`` (shared) replaced by its inclusive prefix sum, the block's threads together."""
    step = 1
    while step < _SCAN:
        below = rank[tid - step] if tid >= step else 0
        cuda.syncthreads()
        rank[tid] += below
        cuda.syncthreads()
        step *= 2


@cuda.jit(device=True)
def _sum_before(counts, c, total, tid):
    """``counts[:c]`` summed by the block's threads together (``total``: shared int64, one item).

    A block that needs its chunk's offset sums the counts before it itself, ``c / blockDim``
    reads a thread, rather than reading offsets that a scan kernel wrote first: for the
    chunk counts streams have, less than that kernel's launch would add to every call."""
    if tid == 0:
        total[0] = 0
    part = np.int64(0)
    for k in range(tid, c, cuda.blockDim.x):
        part += np.int64(counts[k])
    cuda.syncthreads()
    cuda.atomic.add(total, 0, part)
    cuda.syncthreads()
    return total[0]


@cuda.jit(cache=True)
def compact_words_kernel(regions, sizes, words):
    c = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    total = cuda.shared.array(1, np.int64)
    target = _sum_before(sizes, c, total, tid)
    size = np.int64(sizes[c])
    source = (c + 1) * (regions.shape[0] // sizes.shape[0]) - size
    for k in range(tid, size, cuda.blockDim.x):
        words[target + k] = regions[source + k]


@cuda.jit(cache=True)
def move_escapes_kernel(codes, radius, chunk, escapes, escaped, into_codes):
    """The codes beyond ±radius (coded, or decoded as the escape symbols ±(radius + 1)) to
    ``escaped`` in order, or, with ``into_codes``, ``escaped`` back into them; reads and
    writes nothing past ``escaped``'s end, where a damaged stream's counts would lead (the
    call then refuses the stream)."""
    c = cuda.blockIdx.x
    if escapes[c] == 0:
        return
    rank = cuda.shared.array(_SCAN, np.int32)
    total = cuda.shared.array(1, np.int64)
    tid = cuda.threadIdx.x
    at = _sum_before(escapes, c, total, tid)
    end = min(codes.shape[0], (c + 1) * chunk)
    for tile in range(c * chunk, end, _SCAN):
        i = tile + tid
        flag = 0
        if i < end and (codes[i] < -radius or codes[i] > radius):
            flag = 1
        rank[tid] = flag
        cuda.syncthreads()
        _inclusive_scan(rank, tid)
        if flag and at + rank[tid] <= escaped.shape[0]:
            if into_codes:
                codes[i] = escaped[at + rank[tid] - 1]
            else:
                escaped[at + rank[tid] - 1] = codes[i]
        at += rank[_SCAN - 1]
        cuda.syncthreads()


@cuda.jit(cache=True)
def lut_kernel(freq, start, lut):
    """``lut[slot]``: the symbol ``s`` with ``start[s] ≤ slot < start[s] + freq[s]``, as
    ``np.repeat(arange, freq)``; ``_LUT_SLOTS`` consecutive slots a thread."""
    first = cuda.grid(1) * _LUT_SLOTS
    if first >= lut.shape[0]:
        return
    # the last symbol starting at or before the slot: an absent symbol starts where the next does
    lo = 0
    hi = freq.shape[0] - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if np.int64(start[mid]) <= first:
            lo = mid
        else:
            hi = mid - 1
    for slot in range(first, min(lut.shape[0], first + _LUT_SLOTS)):
        while slot >= np.int64(start[lo]) + np.int64(freq[lo]):
            lo += 1
        lut[slot] = lo


@cuda.jit(cache=True)
def decode_chunks_kernel(words, offsets, lut, freq, start, radius, chunk, out, escapes, summary):
    c = cuda.grid(1)
    if c >= escapes.shape[0]:
        return
    count, bad = decode_chunk(words, np.int64(offsets[c]), np.int64(offsets[c + 1]), lut, freq, start, radius,
                              c * chunk, min(out.shape[0], (c + 1) * chunk), out)
    escapes[c] = count
    if count:
        cuda.atomic.add(summary, _ESCAPE_TOTAL, count)
    if bad:
        cuda.atomic.min(summary, _FIRST_FAILED, np.int64(c))


@cuda.jit(cache=True)
def fill_kernel(out, value):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = value


def _grid(n: int, block: int, most: int = _MAX_BLOCKS) -> int:
    return max(1, min(most, (n + block - 1) // block))


def _device_empty(n: int, dtype):
    """``n`` uninitialised items of device memory. On a GPU from the device's stream-ordered
    pool (:mod:`gpu.cuda.device_arrays`), so that a call allocates nothing from the driver
    (each of numba's own arrays is a cudaMalloc, and its free waits for the device); numba's
    own under the simulator."""
    return compress_kernels().api.device_array(n, dtype)


def _device_zeros(n: int, dtype):
    """``n`` zeros of a 4-byte ``dtype`` on the device, set there on a GPU (no copy)."""
    return compress_kernels().full(n, dtype, 0)


def _host_empty(n: int, dtype) -> np.ndarray:
    """``n`` items of page-locked host memory, reused (:func:`gpu.cuda.device_arrays.pinned_array`),
    which the driver copies by DMA; plain numpy under the simulator."""
    return np.empty(n, dtype) if simulator_active() else device_arrays.pinned_array(n, dtype)


def _layout(parts) -> tuple[list[int], int]:
    """Byte offsets of ``parts`` ((count, dtype) pairs) back to back, each on an _ALIGN-byte
    boundary, and the bytes they end at."""
    starts, at = [], 0
    for count, dtype in parts:
        at = -(-at // _ALIGN) * _ALIGN
        starts.append(at)
        at += count * np.dtype(dtype).itemsize
    return starts, at


def _views(buffer, parts, starts) -> list:
    """Typed views of the byte array ``buffer`` (host, or a numba device array) at ``starts``.

    A device view on a GPU points into the buffer's memory at the part's offset."""
    if isinstance(buffer, np.ndarray) or simulator_active():
        return [buffer[at:at + count * np.dtype(dtype).itemsize].view(dtype)
                for (count, dtype), at in zip(parts, starts)]
    from gpu.cuda.device_arrays import DeviceArray

    return [DeviceArray(buffer, buffer.ptr + at, (count,), (np.dtype(dtype).itemsize,), np.dtype(dtype))
            for (count, dtype), at in zip(parts, starts)]


def _upload(host_parts, scratch) -> list:
    """The arrays ``host_parts`` and uninitialised ``scratch`` arrays ((count, dtype) pairs) in
    one device buffer, the former sent in one copy from one page-locked buffer: device views
    of all, in order."""
    parts = [(a.size, a.dtype) for a in host_parts] + [(count, np.dtype(dtype)) for count, dtype in scratch]
    starts, total = _layout(parts)
    sent = starts[len(host_parts) - 1] + host_parts[-1].nbytes
    host = _host_empty(sent, np.uint8)
    for view, part in zip(_views(host, parts, starts), host_parts):
        view[:] = part
    device = _device_empty(total, np.uint8)
    _views(device, [(sent, np.uint8)], [0])[0].copy_to_device(host)
    return _views(device, parts, starts)


def is_device_array(a) -> bool:
    """Whether ``a`` lives on the GPU (a numba device array, or a CuPy one)."""
    return hasattr(a, "copy_to_host") or hasattr(a, "__cuda_array_interface__")


def device_codes(codes):
    """A flat int32 device view of ``codes`` (a device array, or an int32 host array copied over)."""
    if not is_device_array(codes):
        host = np.ascontiguousarray(codes, dtype=np.int32).reshape(-1)
        codes = _device_empty(host.size, np.int32)
        if host.size:
            codes.copy_to_device(host)
        return codes
    codes = launch_view(codes)
    if codes.dtype != np.int32:
        raise ValueError(f"device codes must be int32, got {codes.dtype}; cast them on the device first")
    return codes.reshape(-1)


def device_output(out, n: int):
    """``out`` checked as a flat int32 device array of ``n`` codes, or a new one."""
    if out is None:
        return _device_empty(n, np.int32)
    out = launch_view(out)
    if out.dtype != np.int32 or out.shape != (n,):
        raise ValueError(f"out must be an int32 device array of shape ({n},), got {out.dtype} {out.shape}")
    return out


def clipped_histogram_cuda(codes) -> np.ndarray:
    """The histogram (SPAN,) int64 of the device codes clipped to ±(MAX_RADIUS + 1)."""
    hist = _device_zeros(SPAN, np.uint32)
    if codes.shape[0]:
        grid = _grid(codes.shape[0], _BLOCK, _HISTOGRAM_BLOCKS)
        compress_kernels()["clipped_histogram_kernel"][grid, _BLOCK](codes, hist)
    return hist.copy_to_host().astype(np.int64)


def quantize_histogram_cuda(values, step: float, reference=None, keep_codes: bool = True):
    """The quantiser's codes of the device arrays ``values − reference`` (None unless
    ``keep_codes``; a device array), their histogram as :func:`clipped_histogram_cuda` gives
    it, and whether a code would not fit in 32 bits, with one copy back."""
    x = launch_view(values, flat=True)
    ref = launch_view(reference, flat=True) if reference is not None else x
    codes = _device_empty(x.shape[0] if keep_codes else 1, np.int32)
    counts = _device_zeros(SPAN + 1, np.uint32)
    compress_kernels()["quantize_histogram_kernel"][_grid(x.shape[0], _BLOCK, _HISTOGRAM_BLOCKS), _BLOCK](
        x, ref, reference is not None, 1.0 / step, codes, keep_codes, counts)
    host = counts.copy_to_host()
    return (codes.reshape(values.shape) if keep_codes else None), host[:SPAN].astype(np.int64), bool(host[SPAN])


def encode_chunks_cuda(codes, radius: int, freq: np.ndarray, start: np.ndarray, chunk: int):
    """The device codes coded with the model ``freq``/``start`` (int64): per-chunk word counts
    (int64), the words back to back (uint16) and the escaped codes in order (int32), on the host.

    Two copies come back: the chunks' word and escape counts (the stream records the former,
    the latter size the escaped values), then the words and escaped values together."""
    n = codes.shape[0]
    chunks = -(-n // chunk)
    d_freq, d_start, d_counts, regions = _upload(
        [freq.astype(np.int64, copy=False), start.astype(np.int64, copy=False)],
        [(2 * chunks, np.int64), (chunks * (min(chunk, n) + 2), np.uint16)])
    d_sizes, d_escapes = d_counts[:chunks], d_counts[chunks:]
    kernels = compress_kernels()
    kernels["encode_chunks_kernel"][_grid(chunks, _CHUNK_THREADS), _CHUNK_THREADS](
        codes, radius, d_freq, d_start, chunk, regions, d_sizes, d_escapes)
    counts = d_counts.copy_to_host()
    sizes = counts[:chunks]
    parts = [(int(counts[chunks:].sum()), np.int32), (int(sizes.sum()), np.uint16)]
    starts, total = _layout(parts)
    coded = _device_empty(total, np.uint8)
    d_escaped, d_words = _views(coded, parts, starts)
    kernels["compact_words_kernel"][chunks, _SCAN](regions, d_sizes, d_words)
    if d_escaped.size:
        kernels["move_escapes_kernel"][chunks, _SCAN](codes, radius, chunk, d_escapes, d_escaped, False)
    host = _host_empty(total, np.uint8)
    coded.copy_to_host(host)
    escaped, words = _views(host, parts, starts)
    return sizes, words, escaped


def decode_chunks_cuda(words: np.ndarray, offsets: np.ndarray, freq: np.ndarray, start: np.ndarray,
                       escaped: np.ndarray, radius: int, chunk: int, out) -> tuple[int, int]:
    """Decode every chunk into the device array ``out``, the escape symbols replaced by
    ``escaped`` in order: the number of escape symbols decoded and the first chunk that failed
    its check (the number of chunks when none did), read back in one copy at the end.

    Where those show the stream damaged, ``out`` holds garbage."""
    chunks = len(offsets) - 1
    summary = np.array([0, chunks], np.int64)
    d_summary, d_offsets, d_freq, d_start, d_escaped, d_words, lut, d_escapes = _upload(
        [summary, offsets.astype(np.int64, copy=False), freq.astype(np.int64, copy=False),
         start.astype(np.int64, copy=False), escaped.astype(np.int32, copy=False), words],
        [(PROB_SCALE, np.uint16), (chunks, np.int64)])
    kernels = compress_kernels()
    kernels["lut_kernel"][_grid(PROB_SCALE // _LUT_SLOTS, _BLOCK), _BLOCK](d_freq, d_start, lut)
    kernels["decode_chunks_kernel"][_grid(chunks, _CHUNK_THREADS), _CHUNK_THREADS](
        d_words, d_offsets, lut, d_freq, d_start, radius, chunk, out, d_escapes, d_summary)
    if escaped.size:
        kernels["move_escapes_kernel"][chunks, _SCAN](out, radius, chunk, d_escapes, d_escaped, True)
    summary = d_summary.copy_to_host()
    return int(summary[_ESCAPE_TOTAL]), int(summary[_FIRST_FAILED])


def fill_cuda(out, escaped, value: int) -> None:
    """The device array ``out`` set to ``escaped`` (host, when not None), else to ``value``."""
    if escaped is not None:
        out.copy_to_device(np.ascontiguousarray(escaped, dtype=np.int32))
    else:
        compress_kernels()["fill_kernel"][_grid(out.shape[0], _BLOCK), _BLOCK](out, value)
