"""numba.cuda kernels of :mod:`gpu.compress.chunked_rans`, and their thin launchers.

``clipped_histogram_kernel``: the histogram of the codes clipped to ±(MAX_RADIUS + 1), a
block's in shared memory, then added to the grid's. ``encode_chunks_kernel`` and
``decode_chunks_kernel``: one thread per chunk, the arithmetic of the CPU loops in int64 (the
state stays below 2^32, its products below 2^48), so both write the same words. The encoder
writes a chunk's words at the end of the chunk's own region of ``chunk + 2`` words (a symbol
moves one word at most, the final state two), ``compact_words_kernel`` moves them in chunk
order. ``gather_escapes_kernel`` and ``fill_escapes_kernel``: one block per chunk that holds
escapes, a block-wide prefix sum of the escape flags (Hillis & Steele 1986) a tile at a time,
so the escaped values keep their order. The per-chunk offsets are exclusive prefix sums of a
few thousand counts, taken on the host. Array reads are cast to int64 first, so the simulator
(numpy scalar rules) computes what the compiled kernel does.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from gpu.compress.rans_parameters import (MAX_RADIUS, PROB_BITS, PROB_SCALE, RENORM_SHIFT, SPAN, STATE_LOWER,
                                          WORD_BITS, WORD_MASK)

__all__ = ["clipped_histogram_kernel", "encode_chunks_kernel", "compact_words_kernel", "gather_escapes_kernel",
           "decode_chunks_kernel", "fill_escapes_kernel", "fill_kernel", "is_device_array", "device_codes",
           "device_output", "clipped_histogram_cuda", "encode_chunks_cuda", "decode_chunks_cuda",
           "fill_escapes_cuda", "fill_cuda"]

_BLOCK = 256
_HISTOGRAM_BLOCKS = 256  # each block adds its non-zero bins to the grid's: few blocks, long strides
_MAX_BLOCKS = 4096
# one thread per chunk: a warp a block spreads the chunks over the most multiprocessors
_CHUNK_THREADS = 32
_SCAN = 256  # threads of a prefix-sum block, and the tile it scans


@cuda.jit
def clipped_histogram_kernel(codes, hist):
    local = cuda.shared.array(SPAN, np.uint32)
    tid = cuda.threadIdx.x
    for b in range(tid, SPAN, cuda.blockDim.x):
        local[b] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), codes.shape[0], cuda.gridsize(1)):
        code = min(max(np.int64(codes[i]), -MAX_RADIUS - 1), MAX_RADIUS + 1)
        cuda.atomic.add(local, code + MAX_RADIUS + 1, 1)
    cuda.syncthreads()
    for b in range(tid, SPAN, cuda.blockDim.x):
        if local[b]:
            cuda.atomic.add(hist, b, local[b])


@cuda.jit
def encode_chunks_kernel(codes, radius, freq, start, chunk, regions, sizes, escapes):
    c = cuda.grid(1)
    if c >= sizes.shape[0]:
        return
    lo = c * chunk
    cap = regions.shape[0] // sizes.shape[0]  # chunk + 2 words, or n + 2 for one short chunk
    pos = (c + 1) * cap
    x = np.int64(STATE_LOWER)
    count = 0
    for i in range(min(codes.shape[0], lo + chunk) - 1, lo - 1, -1):
        code = np.int64(codes[i])
        if code < -radius:
            s = 0
            count += 1
        elif code > radius:
            s = 2 * radius + 2
            count += 1
        else:
            s = code + radius + 1
        f = np.int64(freq[s])
        if x >= f << RENORM_SHIFT:
            pos -= 1
            regions[pos] = x & WORD_MASK
            x >>= WORD_BITS
        x = ((x // f) << PROB_BITS) + x % f + np.int64(start[s])
    regions[pos - 1] = x >> WORD_BITS
    regions[pos - 2] = x & WORD_MASK
    sizes[c] = (c + 1) * cap - (pos - 2)
    escapes[c] = count


@cuda.jit
def compact_words_kernel(regions, sizes, offsets, words):
    c = cuda.blockIdx.x
    size = np.int64(sizes[c])
    source = (c + 1) * (regions.shape[0] // sizes.shape[0]) - size
    target = np.int64(offsets[c])
    for k in range(cuda.threadIdx.x, size, cuda.blockDim.x):
        words[target + k] = regions[source + k]


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


@cuda.jit
def gather_escapes_kernel(codes, radius, chunk, offsets, escaped):
    c = cuda.blockIdx.x
    at = np.int64(offsets[c])
    if at == offsets[c + 1]:
        return
    rank = cuda.shared.array(_SCAN, np.int32)
    tid = cuda.threadIdx.x
    end = min(codes.shape[0], (c + 1) * chunk)
    for tile in range(c * chunk, end, _SCAN):
        i = tile + tid
        flag = 0
        if i < end and (codes[i] < -radius or codes[i] > radius):
            flag = 1
        rank[tid] = flag
        cuda.syncthreads()
        _inclusive_scan(rank, tid)
        if flag:
            escaped[at + rank[tid] - 1] = codes[i]
        at += rank[_SCAN - 1]
        cuda.syncthreads()


@cuda.jit
def decode_chunks_kernel(words, offsets, lut, freq, start, radius, chunk, out, escapes, failed):
    c = cuda.grid(1)
    if c >= escapes.shape[0]:
        return
    p = np.int64(offsets[c])
    end = np.int64(offsets[c + 1])
    x = np.int64(words[p]) | (np.int64(words[p + 1]) << WORD_BITS)
    p += 2
    top = 2 * radius + 2
    count = 0
    bad = False
    for i in range(c * chunk, min(out.shape[0], (c + 1) * chunk)):
        slot = x & (PROB_SCALE - 1)
        s = np.int64(lut[slot])
        x = np.int64(freq[s]) * (x >> PROB_BITS) + slot - np.int64(start[s])
        if x < STATE_LOWER:
            if p == end:
                bad = True
                break
            x = (x << WORD_BITS) | np.int64(words[p])
            p += 1
        out[i] = s - radius - 1
        if s == 0 or s == top:
            count += 1
    escapes[c] = count
    failed[c] = 1 if bad or x != STATE_LOWER or p != end else 0


@cuda.jit
def fill_escapes_kernel(out, radius, chunk, offsets, escaped):
    c = cuda.blockIdx.x
    at = np.int64(offsets[c])
    if at == offsets[c + 1]:
        return
    rank = cuda.shared.array(_SCAN, np.int32)
    tid = cuda.threadIdx.x
    end = min(out.shape[0], (c + 1) * chunk)
    for tile in range(c * chunk, end, _SCAN):
        i = tile + tid
        flag = 0
        if i < end and (out[i] == -radius - 1 or out[i] == radius + 1):
            flag = 1
        rank[tid] = flag
        cuda.syncthreads()
        _inclusive_scan(rank, tid)
        if flag:
            out[i] = escaped[at + rank[tid] - 1]
        at += rank[_SCAN - 1]
        cuda.syncthreads()


@cuda.jit
def fill_kernel(out, value):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = value


def _grid(n: int, block: int, most: int = _MAX_BLOCKS) -> int:
    return max(1, min(most, (n + block - 1) // block))


def _exclusive_sum(counts: np.ndarray) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(counts))).astype(np.int64)


def is_device_array(a) -> bool:
    """Whether ``a`` lives on the GPU (a numba device array, or a CuPy one)."""
    return hasattr(a, "copy_to_host") or hasattr(a, "__cuda_array_interface__")


def device_codes(codes):
    """A flat int32 device view of ``codes`` (a device array, or an int32 host array copied over)."""
    if not is_device_array(codes):
        return cuda.to_device(np.ascontiguousarray(codes, dtype=np.int32).reshape(-1))
    if not hasattr(codes, "copy_to_host"):
        codes = cuda.as_cuda_array(codes)
    if codes.dtype != np.int32:
        raise ValueError(f"device codes must be int32, got {codes.dtype}; cast them on the device first")
    return codes.reshape(-1)


def device_output(out, n: int):
    """``out`` checked as a flat int32 device array of ``n`` codes, or a new one."""
    if out is None:
        return cuda.device_array(n, dtype=np.int32)
    if not hasattr(out, "copy_to_host"):
        out = cuda.as_cuda_array(out)
    if out.dtype != np.int32 or out.shape != (n,):
        raise ValueError(f"out must be an int32 device array of shape ({n},), got {out.dtype} {out.shape}")
    return out


def clipped_histogram_cuda(codes) -> np.ndarray:
    """The histogram (SPAN,) int64 of the device codes clipped to ±(MAX_RADIUS + 1)."""
    hist = cuda.to_device(np.zeros(SPAN, np.uint32))
    if codes.shape[0]:
        clipped_histogram_kernel[_grid(codes.shape[0], _BLOCK, _HISTOGRAM_BLOCKS), _BLOCK](codes, hist)
    return hist.copy_to_host().astype(np.int64)


def encode_chunks_cuda(codes, radius: int, freq: np.ndarray, start: np.ndarray, chunk: int):
    """The device codes coded with the model ``freq``/``start`` (int64): per-chunk word counts
    (int64), the words back to back (uint16) and the escaped codes in order (int32), on the host."""
    chunks = -(-codes.shape[0] // chunk)
    regions = cuda.device_array(chunks * (min(chunk, codes.shape[0]) + 2), dtype=np.uint16)
    d_sizes = cuda.device_array(chunks, dtype=np.int64)
    d_escapes = cuda.device_array(chunks, dtype=np.int64)
    encode_chunks_kernel[_grid(chunks, _CHUNK_THREADS), _CHUNK_THREADS](
        codes, radius, cuda.to_device(freq), cuda.to_device(start), chunk, regions, d_sizes, d_escapes)
    sizes = d_sizes.copy_to_host()
    offsets = _exclusive_sum(sizes)
    words = cuda.device_array(int(offsets[-1]), dtype=np.uint16)
    compact_words_kernel[chunks, _BLOCK](regions, d_sizes, cuda.to_device(offsets), words)
    escape_offsets = _exclusive_sum(d_escapes.copy_to_host())
    escaped = np.zeros(0, np.int32)
    if escape_offsets[-1]:
        d_escaped = cuda.device_array(int(escape_offsets[-1]), dtype=np.int32)
        gather_escapes_kernel[chunks, _SCAN](codes, radius, chunk, cuda.to_device(escape_offsets), d_escaped)
        escaped = d_escaped.copy_to_host()
    return sizes, words.copy_to_host(), escaped


def decode_chunks_cuda(words: np.ndarray, offsets: np.ndarray, lut: np.ndarray, freq: np.ndarray,
                       start: np.ndarray, radius: int, chunk: int, out):
    """Decode every chunk into the device array ``out``: the escape symbols each chunk decoded
    (int64) and whether it failed its check (bool), on the host."""
    chunks = len(offsets) - 1
    d_escapes = cuda.device_array(chunks, dtype=np.int64)
    d_failed = cuda.device_array(chunks, dtype=np.uint8)
    decode_chunks_kernel[_grid(chunks, _CHUNK_THREADS), _CHUNK_THREADS](
        cuda.to_device(np.ascontiguousarray(words)), cuda.to_device(offsets), cuda.to_device(lut),
        cuda.to_device(freq), cuda.to_device(start), radius, chunk, out, d_escapes, d_failed)
    return d_escapes.copy_to_host(), d_failed.copy_to_host().astype(bool)


def fill_escapes_cuda(out, radius: int, chunk: int, offsets: np.ndarray, escaped: np.ndarray) -> None:
    """Replace the escape codes (±(radius + 1)) in the device array ``out`` by ``escaped`` in
    order, chunk ``c``'s from ``offsets[c]``."""
    fill_escapes_kernel[len(offsets) - 1, _SCAN](out, radius, chunk, cuda.to_device(offsets),
                                                 cuda.to_device(escaped))


def fill_cuda(out, escaped, value: int) -> None:
    """The device array ``out`` set to ``escaped`` (host, when not None), else to ``value``."""
    if escaped is not None:
        out.copy_to_device(np.ascontiguousarray(escaped, dtype=np.int32))
    else:
        fill_kernel[_grid(out.shape[0], _BLOCK), _BLOCK](out, value)
