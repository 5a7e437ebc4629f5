"""Large arrays between pageable host memory and the device through two reused page-locked
buffers: while the GPU copies one piece by DMA, host threads copy the next (or the last)
piece between the other buffer and the pageable array, so neither waits for the other and
the page faults of a fresh destination are taken on several cores.

The driver's own copy from or to pageable memory stages through one buffer on one thread,
and a page-locked array of the volume's size costs more to allocate than a one-off copy
(docs/decisions/compress-staged-copy.md).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from gpu.cuda.host_memory import pinned_empty

__all__ = ["copy_to_host", "copy_to_device", "PIECE_BYTES"]

#: bytes a piece; the two pieces' page-locked buffers stay in the process's pool between calls
PIECE_BYTES = 32 << 20
#: host threads copying a piece in or out
_COPIERS = max(1, min(12, len(os.sched_getaffinity(0))))
_pool = ThreadPoolExecutor(max_workers=_COPIERS, thread_name_prefix="staged-copy")


def copy_to_host(device) -> np.ndarray:
    """A host copy of the C-contiguous CuPy array ``device``, once the work queued on the
    current stream has made it."""
    import cupy

    out = np.empty(device.shape, device.dtype)
    piece = max(1, PIECE_BYTES // device.dtype.itemsize)
    if device.size <= piece:
        device.get(out=out)
        return out
    source, target = device.reshape(-1), out.reshape(-1)
    buffers = [pinned_empty(piece, device.dtype) for _ in range(2)]
    stream = cupy.cuda.Stream(non_blocking=True)
    stream.wait_event(cupy.cuda.get_current_stream().record())
    pending: list[list] = [[], []]
    for k, start in enumerate(range(0, source.size, piece)):
        which = k % 2
        _wait(pending[which])  # the buffer's last piece is out
        stop = min(start + piece, source.size)
        staged = buffers[which][:stop - start]
        source[start:stop].get(out=staged, stream=stream, blocking=False)
        pending[which] = _split_copy(staged, target[start:stop], stream.record())
    _wait(pending[0] + pending[1])
    return out


def copy_to_device(host: np.ndarray):
    """A CuPy copy of the host array ``host`` (made C-contiguous), ordered before the work
    queued next on the current stream."""
    import cupy

    piece = max(1, PIECE_BYTES // host.dtype.itemsize)
    if host.size <= piece:
        return cupy.asarray(host)
    source = np.ascontiguousarray(host).reshape(-1)
    out = cupy.empty(host.shape, host.dtype)
    target = out.reshape(-1)
    buffers = [pinned_empty(piece, host.dtype) for _ in range(2)]
    current = cupy.cuda.get_current_stream()
    stream = cupy.cuda.Stream(non_blocking=True)
    stream.wait_event(current.record())  # after ``out``'s allocation on the current stream
    uploaded = [None, None]
    for k, start in enumerate(range(0, source.size, piece)):
        which = k % 2
        if uploaded[which] is not None:  # the buffer's last piece is on the device
            uploaded[which].synchronize()
        stop = min(start + piece, source.size)
        staged = buffers[which][:stop - start]
        _wait(_split_copy(source[start:stop], staged))
        target[start:stop].set(staged, stream=stream)
        uploaded[which] = stream.record()
    current.wait_event(stream.record())
    for event in uploaded:  # the buffers go back to the pool only once read
        if event is not None:
            event.synchronize()
    return out


def _split_copy(source: np.ndarray, target: np.ndarray, ready=None) -> list:
    """Copy ``source`` into ``target`` on the copier threads, each part once the event
    ``ready`` (if any) has fired; the parts' futures."""
    bounds = np.linspace(0, source.size, _COPIERS + 1).astype(int)

    def part(lo: int, hi: int) -> None:
        if ready is not None:
            ready.synchronize()
        np.copyto(target[lo:hi], source[lo:hi])

    return [_pool.submit(part, lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]


def _wait(futures: list) -> None:
    for future in futures:
        future.result()
