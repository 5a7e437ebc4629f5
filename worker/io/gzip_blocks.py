"""gzip files compressed in independent blocks on the process's leaf pool (pigz's scheme).

What the caller hands over is a sequence of buffers (an image's header and its data array)
whose concatenation is the file's content. Each is cut into 1 MiB blocks, views into it, not
copies; each block is deflated by ISA-L at level 1 with the 32 KiB before it as its
dictionary and ends on a byte boundary (``Z_SYNC_FLUSH``), so blocks compress in any order
and on any thread, outside the interpreter lock, and the file inflates to the buffers
whatever the thread count (gzip mtime 0; one buffer gives the deflate stream
``isal.igzip_threaded`` writes). ISA-L does not promise one encoding of a block: the
compressed bytes have been seen to differ, rarely, for the same content
(docs/decisions/parallel-gzip.md). The writing stage of a peaks job
writes some twenty files at once from a thread pool on a many-core host; there, every
copy of a whole image into a ``bytes`` object (``BytesIO``, ``header + payload``, one
``bytes(block)`` per block) held the lock and made the other writers wait.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path

from isal import isal_zlib

from gpu.cpu_blocks import leaf_pool

__all__ = ["GZIP_BLOCK", "write_gzip"]

#: Bytes of content per independently compressed block.
GZIP_BLOCK = 1 << 20
_WINDOW = 32 << 10
# Deflate at level 1 grows incompressible data by well under 10 % (isal.igzip_threaded's bound).
_COMPRESSED_BOUND = GZIP_BLOCK + max(GZIP_BLOCK // 10, 500)
# gzip header (RFC 1952): magic, deflate, no flags, mtime 0, no extra flags, OS unknown.
_HEADER = struct.pack("<BBBBIBB", 0x1F, 0x8B, 8, 0, 0, 0, 0xFF)
_LEVEL = 1

_compressors = threading.local()


def _compress(blocks: "list[memoryview]", start: int, stop: int) -> list[tuple[bytes, int, int]]:
    """Blocks ``start:stop`` deflated, each with the 32 KiB before it as its dictionary and
    sync-flushed, with their CRC-32 and length; each thread keeps one reusable ISA-L stream
    and output buffer."""
    compressor = getattr(_compressors, "stream", None)
    if compressor is None:
        compressor = _compressors.stream = isal_zlib._ParallelCompress(buffersize=_COMPRESSED_BOUND, level=_LEVEL)
    done = []
    for index in range(start, stop):
        zdict = blocks[index - 1][-_WINDOW:] if index else memoryview(b"")
        done.append((*compressor.compress_and_crc(blocks[index], zdict), len(blocks[index])))
    return done


def _blocks(parts: Sequence) -> "list[memoryview]":
    """Each part cut every :data:`GZIP_BLOCK` bytes, as views (a small header is a block of
    its own: a block that spanned two parts would have to be copied)."""
    blocks: list[memoryview] = []
    for part in parts:
        view = memoryview(part).cast("B")
        blocks += [view[i:i + GZIP_BLOCK] for i in range(0, len(view), GZIP_BLOCK)]
    return blocks


# docs/decisions/parallel-gzip.md, docs/decisions/writer-thread-pool.md
def write_gzip(path: Path, parts: Sequence, threads: int | None = None) -> None:
    """Write the concatenation of ``parts`` (buffers: bytes, C-contiguous arrays) to the gzip
    file ``path``, its blocks compressed in ``threads`` runs of consecutive blocks side by
    side on the leaf pool (default: one per MiB, at most 4 and no more than this process's
    cores; with one, on the calling thread).

    The calling thread writes the runs in order as they finish, combining their CRCs: it
    holds the interpreter lock only to hand the runs over and write them.
    """
    blocks = _blocks(parts)
    if threads is None:
        threads = min(4, len(os.sched_getaffinity(0)), len(blocks))
    threads = max(1, min(threads, len(blocks)))
    bounds = [len(blocks) * j // threads for j in range(threads + 1)]
    if threads == 1:
        runs = [_compress(blocks, 0, len(blocks))]
    else:
        pool = leaf_pool()
        runs = [pool.submit(_compress, blocks, a, b) for a, b in zip(bounds, bounds[1:])]
    crc = size = 0
    try:
        with open(path, "wb") as out:
            out.write(_HEADER)
            for run in runs:
                for compressed, block_crc, length in (run if isinstance(run, list) else run.result()):
                    crc = isal_zlib.crc32_combine(crc, block_crc, length)
                    size += length
                    out.write(compressed)
            out.write(isal_zlib.compress(b"", wbits=-15))  # the final, empty deflate block
            out.write(struct.pack("<II", crc, size & 0xFFFFFFFF))
    finally:
        for run in runs:
            if isinstance(run, Future):
                run.cancel()
