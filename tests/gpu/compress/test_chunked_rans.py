"""The chunked rANS streams: exact round trips, near the order-0 entropy, the same bytes from the
CPU loops and the CUDA kernels (in the simulator: small inputs, small chunks), and damaged
streams refused."""

from __future__ import annotations

import heapq
import struct

import numpy as np
import pytest
import zstandard

from gpu.compress import entropy_coding
from gpu.compress.chunked_rans import (CHUNK, MAX_RADIUS, PROB_BITS, _radius, decode_integers, encode_integers,
                                       quantise_frequencies)
from gpu.compress.rans_parameters import SPAN

HEADER = struct.Struct("<6I")


def entropy_bytes(codes: np.ndarray) -> float:
    _, counts = np.unique(codes, return_counts=True)
    return float(-(counts * np.log2(counts / counts.sum())).sum() / 8)


def heavy_tailed(n: int, seed: int) -> np.ndarray:
    """Gaussian codes with a Student-t tail, some beyond MAX_RADIUS and some at int32's ends."""
    rng = np.random.default_rng(seed)
    codes = np.rint(rng.standard_t(1.5, n) * 4).clip(-(2**31), 2**31 - 1).astype(np.int64)
    codes[rng.integers(0, n, 8)] = [2**31 - 1, -(2**31), 3 * MAX_RADIUS, -3 * MAX_RADIUS, MAX_RADIUS + 1,
                                    -MAX_RADIUS - 1, 10**6, -(10**6)]
    return codes


def round_trip(codes, chunk=CHUNK, backend="cpu") -> bytes:
    stream = encode_integers(codes, backend, chunk=chunk)
    decoded = decode_integers(stream, backend)
    if backend == "cuda":
        decoded = decoded.copy_to_host()
    assert decoded.dtype == np.int32
    np.testing.assert_array_equal(decoded, np.asarray(codes).ravel())
    return stream


@pytest.mark.parametrize("sigma", [0.3, 3.0, 40.0, 900.0])
def test_gaussian_codes_round_trip(sigma):
    codes = np.rint(np.random.default_rng(1).normal(0, sigma, 50_000)).astype(np.int64)
    round_trip(codes.reshape(50, 1000))
    round_trip(codes, chunk=4096)


def test_heavy_tailed_codes_round_trip_with_their_escapes():
    codes = heavy_tailed(70_001, 2)
    stream = round_trip(codes, chunk=5000)
    n, radius, chunk = HEADER.unpack_from(stream)[:3]
    assert (n, chunk) == (70_001, 5000) and 0 < radius <= MAX_RADIUS
    escaped = parts(stream)[1]
    assert escaped.size >= 50 and np.array_equal(escaped, codes[np.abs(codes) > radius])


@pytest.mark.parametrize("codes", [np.zeros(0, int), np.zeros(17, int), np.array([-5]), np.full(40_000, 7),
                                   np.full(5, 2**31 - 1), np.full(3, -(2**31)),
                                   np.array([-(2**31), 2**31 - 1] * 50, np.int64), np.arange(-3000, 3000) * 7,
                                   np.array([3, 4], np.uint8)])
def test_edge_cases_round_trip(codes):
    stream = round_trip(codes, chunk=256)
    if len(np.unique(codes)) <= 1:  # nothing coded: the header, the model and the escapes only
        lengths = HEADER.unpack_from(stream)[3:]
        assert lengths[2] == 0 and len(stream) == HEADER.size + sum(lengths)


def parts(stream: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The frequencies, escaped codes and chunk sizes of a stream."""
    at = HEADER.size
    found = []
    for length, dtype in zip(HEADER.unpack_from(stream)[3:], ("<u2", "<i4", "<u4")):
        blob = stream[at:at + length]
        found.append(np.frombuffer(zstandard.ZstdDecompressor().decompress(blob) if blob else b"", dtype))
        at += length
    return tuple(found)


@pytest.mark.parametrize("n", [2, 255, 256, 257, 3 * 256 + 1])
def test_lengths_around_the_chunk_size(n):
    codes = np.random.default_rng(n).integers(-20, 21, n)
    codes[0] = 21  # two distinct symbols at least
    stream = round_trip(codes, chunk=256)
    sizes = parts(stream)[2]
    assert len(sizes) == -(-n // 256)
    assert len(stream) == HEADER.size + sum(HEADER.unpack_from(stream)[3:]) + 2 * sizes.sum()


def test_a_chunk_longer_than_the_codes_codes_them_as_one():
    codes = np.arange(-50, 50)
    stream = round_trip(codes, chunk=2**31 - 1)
    assert HEADER.unpack_from(stream)[2] == 2**31 - 1 and len(parts(stream)[2]) == 1


def test_radius_is_the_range_coders():
    rng = np.random.default_rng(3)
    for codes in (heavy_tailed(20_000, 4), np.rint(rng.normal(0, 3, 9999)).astype(np.int64), np.array([7]),
                  np.arange(-6000, 6000), np.full(10, 10**7), rng.integers(-5000, 5000, 1001)):
        clipped = np.clip(codes, -MAX_RADIUS - 1, MAX_RADIUS + 1) + MAX_RADIUS + 1
        assert _radius(np.bincount(clipped, minlength=SPAN), codes.size) == entropy_coding._radius(codes)


def test_coded_size_is_near_the_entropy_and_the_range_coders():
    codes = np.rint(np.random.default_rng(5).normal(0, 3, 1_000_000)).astype(np.int32)
    stream = round_trip(codes)
    assert len(stream) <= 1.005 * entropy_bytes(codes) + 200
    assert len(stream) <= 1.005 * len(entropy_coding.encode_integers(codes))


def optimal_frequencies(counts: np.ndarray) -> np.ndarray:
    """The frequencies of the smallest coded size: from one per present symbol, each further
    unit to the symbol it saves the most bits (the cost is convex and separable, so greedy is
    optimal), in floating point."""
    freq = (counts > 0).astype(np.int64)
    heap = [(-c * np.log2(2.0), s) for s, c in enumerate(counts) if c]
    heapq.heapify(heap)
    for _ in range(2**PROB_BITS - len(heap)):
        _, s = heapq.heappop(heap)
        freq[s] += 1
        heapq.heappush(heap, (-counts[s] * np.log2((freq[s] + 1) / freq[s]), s))
    return freq


@pytest.mark.parametrize("seed", [0, 1])
def test_frequencies_sum_to_the_scale_at_the_smallest_size(seed):
    rng = np.random.default_rng(seed)
    gaussian = np.bincount(np.rint(rng.normal(0, 3, 10**6)).astype(np.int64) + 40)
    for counts in (np.concatenate([rng.integers(1, 10**6, 50), np.ones(3000, np.int64), np.zeros(7, np.int64)]),
                   gaussian, rng.integers(1, 50, 8000), rng.integers(0, 10**9, 200)):
        freq = quantise_frequencies(counts)
        assert freq.sum() == 2**PROB_BITS and (freq[counts > 0] >= 1).all() and (freq[counts == 0] == 0).all()
        coded, best = (-(counts * np.log2(np.maximum(f, 1) / 2**PROB_BITS)).sum()
                       for f in (freq, optimal_frequencies(counts)))
        # the integer comparisons weigh a unit by c / (f ± ½), not by the log ratio: a few
        # millionths of the size off the optimum where many symbols have small counts
        assert best <= coded <= best * (1 + 1e-5)
    assert quantise_frequencies([0, 9, 0]).tolist() == [0, 2**PROB_BITS, 0]
    assert quantise_frequencies([1, 1, 1]).tolist() == [10923, 10923, 10922]  # ties to the lower symbol
    assert quantise_frequencies([0, 0]).tolist() == [0, 0]


def test_decoder_honours_the_stream_chunk_and_writes_into_out():
    codes = heavy_tailed(3000, 7)
    out = np.full(3000, -1, np.int32)
    assert decode_integers(encode_integers(codes, chunk=300), out=out) is out
    np.testing.assert_array_equal(out, codes)
    with pytest.raises(ValueError, match="out must be"):
        decode_integers(encode_integers(codes), out=np.empty(2999, np.int32))


@pytest.mark.parametrize("codes", [heavy_tailed(3001, 8), np.rint(np.random.default_rng(9).normal(0, 3, 2048)),
                                   np.full(300, -(2**31)), np.full(300, 4), np.zeros(0, np.int32)])
def test_cuda_kernels_write_the_cpu_bytes(codes):
    codes = codes.astype(np.int32)
    cpu = encode_integers(codes, "cpu", chunk=256)
    assert encode_integers(codes, "cuda", chunk=256) == cpu
    from numba import cuda

    assert encode_integers(cuda.to_device(codes), "cuda", chunk=256) == cpu
    np.testing.assert_array_equal(decode_integers(cpu, "cuda").copy_to_host(), codes)
    out = cuda.device_array(codes.size, np.int32)
    assert decode_integers(cpu, "cuda", out=out) is out
    np.testing.assert_array_equal(out.copy_to_host(), decode_integers(cpu, "cpu"))


def test_cuda_chunk_offsets_are_summed_on_the_device(monkeypatch):
    """Hundreds of chunks, most holding escapes: each block sums the word and escape counts of
    the chunks before it, so the stream and the decoded codes equal the CPU's, whose offsets
    are numpy's prefix sums."""
    import gpu.compress.chunked_rans_cuda as kernels

    monkeypatch.setattr(kernels, "_SCAN", 32)  # fewer simulated threads a block; any width scans the same
    rng = np.random.default_rng(12)
    codes = np.rint(rng.normal(0, 5, 3200)).astype(np.int32)
    far = rng.random(codes.size) < 0.1
    codes[far] = rng.integers(-10**6, 10**6, far.sum())  # beyond MAX_RADIUS: escaped
    cpu = encode_integers(codes, "cpu", chunk=16)
    escape_counts = np.add.reduceat(np.abs(codes) > HEADER.unpack_from(cpu)[1], np.arange(0, codes.size, 16))
    assert parts(cpu)[2].size == 200 and (escape_counts > 0).sum() > 140
    assert encode_integers(codes, "cuda", chunk=16) == cpu
    np.testing.assert_array_equal(decode_integers(cpu, "cuda").copy_to_host(), codes)


@pytest.mark.parametrize("freq", [[0, 5, 0, 0, 32763, 0], [2**PROB_BITS], [1] * 4096 + [2**PROB_BITS - 4097, 0, 1]])
def test_cuda_lut_is_the_repeated_symbols(freq):
    from numba import cuda

    from gpu.compress import chunked_rans_cuda as kernels

    freq = np.array(freq, np.int64)
    start = np.concatenate(([0], np.cumsum(freq)[:-1]))
    lut = cuda.device_array(2**PROB_BITS, np.uint16)
    threads = -(-(2**PROB_BITS) // kernels._LUT_SLOTS)
    kernels.lut_kernel[-(-threads // 256), 256](cuda.to_device(freq), cuda.to_device(start), lut)
    np.testing.assert_array_equal(lut.copy_to_host(), np.repeat(np.arange(freq.size), freq))


def test_cuda_names_the_cpus_failing_chunk():
    stream = bytearray(encode_integers(heavy_tailed(2000, 13), chunk=256))
    sizes = parts(bytes(stream))[2]
    words_at = len(stream) - 2 * int(sizes.sum())
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    for c in (5, 2):
        stream[words_at + 2 * int(offsets[c]) + 20] ^= 0x33
    messages = []
    for backend in ("cpu", "cuda"):
        with pytest.raises(ValueError, match="initial state") as error:
            decode_integers(bytes(stream), backend)
        messages.append(str(error.value))
    assert messages[0] == messages[1] and "chunk 2 of 8" in messages[0]


def damaged(stream: bytes, at: int, value: int) -> bytes:
    return stream[:at] + struct.pack("<I", value) + stream[at + 4:]


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_damaged_streams_are_refused(backend):
    codes = heavy_tailed(2000, 10)
    stream = encode_integers(codes, chunk=256)
    n, radius, chunk, freq_bytes, escape_bytes, sizes_bytes = HEADER.unpack_from(stream)
    words_at = HEADER.size + freq_bytes + escape_bytes + sizes_bytes
    zstd = zstandard.ZstdCompressor()
    freq, escaped, _ = parts(stream)
    freq = freq.copy()
    freq[radius + 1] += 1
    bad_table = (HEADER.pack(n, radius, chunk, len(zstd.compress(freq.tobytes())), escape_bytes, sizes_bytes)
                 + zstd.compress(freq.tobytes()) + stream[HEADER.size + freq_bytes:])
    fewer = zstd.compress(escaped[:-1].tobytes())
    bad_escapes = (HEADER.pack(n, radius, chunk, freq_bytes, len(fewer), sizes_bytes)
                   + stream[HEADER.size:][:freq_bytes] + fewer + stream[HEADER.size + freq_bytes + escape_bytes:])
    flipped = bytearray(stream)
    flipped[words_at + 40] ^= 0x5A
    cases = {
        "shorter than its": stream[:10],
        "parts add up": damaged(stream, 12, 10**6),
        "radius": damaged(stream, 4, MAX_RADIUS + 1),
        "frequencies for radius": damaged(stream, 4, radius - 1),
        "sum to": bad_table,
        "chunk sizes for": damaged(stream, 8, 512),
        "bytes of words": stream[:-2],
        "do not decompress": stream[:HEADER.size] + b"\0" * 8 + stream[HEADER.size + 8:],
        "initial state": bytes(flipped),
        "escaped codes for": bad_escapes,
    }
    for message, stream_ in cases.items():
        with pytest.raises(ValueError, match=f"damaged integer stream: .*{message}"):
            decode_integers(stream_, backend)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="within int32"):
        encode_integers(np.array([2**31]))
    with pytest.raises(ValueError, match="integers"):
        encode_integers(np.array([0.5]))
    with pytest.raises(ValueError, match="chunk"):
        encode_integers(np.arange(4), chunk=0)


def test_default_chunk_is_short_enough_for_many_chunks_in_flight():
    from gpu.compress.chunked_rans import default_chunk

    assert default_chunk(0) == default_chunk(1000) == default_chunk(58_060_800) == default_chunk(10**9) == 4096
    assert default_chunk(58_060_800, bits=2 * 58_060_800) == CHUNK == 4096
    stream = encode_integers(np.arange(-3, 10_000) % 7)
    assert int.from_bytes(stream[8:12], "little") == 4096  # the header records it


def test_sparse_streams_take_longer_chunks():
    """Where a chunk would code under a kilobyte, chunks grow (up to 65,536 symbols), so the
    4-byte final state of each does not outweigh what it codes."""
    from gpu.compress import entropy_coding
    from gpu.compress.chunked_rans import default_chunk

    assert default_chunk(10_600_000, bits=4 * 10_600_000) == 4096
    assert default_chunk(10_600_000, bits=50_000) == 65536
    codes = np.zeros(1_000_000, np.int32)
    codes[np.random.default_rng(5).choice(codes.size, 300, replace=False)] = 1
    stream = encode_integers(codes)
    assert int.from_bytes(stream[8:12], "little") == 65536
    np.testing.assert_array_equal(decode_integers(stream), codes)
    # the range coder's stream (order-0, one state in all): ours within 16 chunks' final states,
    # the longer header and the word counts' zstd frame of it
    assert len(stream) <= len(entropy_coding.encode_integers(codes)) + 16 * 4 + 64


def test_coded_bits_are_the_per_symbol_integer_bounds():
    """The size estimate that picks a stream's chunk, summed symbol by symbol as its docstring
    states it, so every machine picks the same chunk."""
    from gpu.compress.chunked_rans import _coded_bits

    def by_symbol(counts, freq):
        total = 0
        for s in np.flatnonzero(freq):
            f = int(freq[s])
            total += int(counts[s]) * min((PROB_BITS - (f.bit_length() - 1)) * 1024, -(-(2**PROB_BITS - f) * 1478 // f))
        return -(-total // 1024)

    rng = np.random.default_rng(14)
    for k in (2, 23, 2001, 8193):
        counts = (rng.pareto(1.0, k) * 1000).astype(np.int64) * (rng.random(k) < 0.7)
        counts[[0, -1]] += [1, 2**31]
        freq = quantise_frequencies(counts)
        assert _coded_bits(counts, freq) == by_symbol(counts, freq)


def test_streams_coded_together_are_the_streams_coded_alone():
    """encode_streams compresses side streams on threads while the next streams are coded:
    the same bytes as encode_integers, in order, on both backends (CUDA in the simulator)."""
    from gpu.compress.chunked_rans import encode_streams

    streams = [heavy_tailed(9000, 1), np.full(300, 7), np.zeros(0, np.int64), heavy_tailed(70_000, 2)]
    assert encode_streams([(s, "cpu") for s in streams]) == [encode_integers(s) for s in streams]
    assert encode_streams([(streams[0], "cuda"), (streams[1], "cpu")]) == [encode_integers(s) for s in streams[:2]]


@pytest.mark.parametrize("n", [5000, 70_000])  # numpy counts below SHORT_STREAM, the parallel loop above
def test_the_clipped_histogram_counts_every_code_once(n):
    from gpu.compress.chunked_rans import SHORT_STREAM, clipped_histogram

    assert (n < SHORT_STREAM) == (n == 5000)
    codes = heavy_tailed(n, 4)
    expected = np.bincount(np.clip(codes, -MAX_RADIUS - 1, MAX_RADIUS + 1) + MAX_RADIUS + 1, minlength=SPAN)
    np.testing.assert_array_equal(clipped_histogram(codes), expected)


def test_state_divmod_is_the_integer_quotient_and_remainder():
    """Every frequency, with states at and next to its multiples up to 2^32 (where the float
    product falls just below a whole quotient) and random ones."""
    from numba import njit

    from gpu.compress.rans_chunk import state_divmod

    @njit(cache=False)
    def divmods(x, f):
        q = np.empty_like(x)
        r = np.empty_like(x)
        for i in range(x.shape[0]):
            q[i], r[i] = state_divmod(x[i], f[i])
        return q, r

    rng = np.random.default_rng(3)
    f = np.repeat(np.arange(1, 2**PROB_BITS + 1, dtype=np.int64), 8)
    top = (2**32 - 1) // f * f  # the largest multiple below 2^32
    kinds = np.stack([top, top - 1, top - f, top - f + 1, f, f - 1, rng.integers(2**16, 2**32, f.size),
                      rng.integers(0, 2**32 // f, f.size) * f], axis=1)
    x = kinds[np.arange(f.size), np.tile(np.arange(8), f.size // 8)]  # each frequency with each kind of state
    q, r = divmods(x.astype(np.int64), f)
    np.testing.assert_array_equal(q, x // f)
    np.testing.assert_array_equal(r, x % f)


def test_streams_keep_their_bytes():
    """Version-3 streams written by the coder as released: the same bytes from this one (the
    archives' format, and readers elsewhere, depend on them)."""
    import hashlib

    rng = np.random.default_rng(5)
    cases = [np.rint(rng.normal(0, s, 300_000)).astype(np.int32) for s in (0.3, 3.0, 40.0, 900.0)]
    cases.append(np.rint(rng.standard_t(1.5, 200_000) * 4).clip(-(2**31), 2**31 - 1).astype(np.int32))
    digest = hashlib.sha256()
    for codes in cases:
        digest.update(encode_integers(codes, "cpu"))
    assert digest.hexdigest() == "a71aa9ce74b9f9c96573e0946fa34bd2bb2972aaf9088eabd8768586f214942e"
