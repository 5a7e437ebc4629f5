"""Host memory the GPU reads or fills: page-locked blocks, reused.

The driver copies page-locked memory to and from the device by DMA; pageable memory it
copies through a staging buffer of its own with the CPU. Allocating page-locked memory is
slow, so blocks are kept in a :class:`HostBlockPool` and reused for the next arrays.
"""

from __future__ import annotations

import bisect
import collections
import ctypes
import itertools
import math
import threading
from typing import Callable

import numpy as np

from gpu.cuda.driver import CudaDriverError, driver
from gpu.cuda.simulator import simulator_active

__all__ = ["HostBlockPool", "pinned_pool", "pinned_empty", "host_empty"]

# Free page-locked blocks a process keeps for its next arrays: a peaks job's input and
# results on a whole-brain volume fit; beyond it blocks go back to the OS, so a worker's
# pinned memory stays flat however its inputs' sizes vary
# (docs/decisions/pinned-host-transfers.md).
PINNED_KEEP_BYTES = 256 << 20
PINNED_KEEP_BLOCKS = 32


class _Lease:
    """One pooled block while arrays view it: numpy keeps it as their ``base`` (through the
    array interface), and when the last view is gone its finaliser gives the block back."""

    def __init__(self, pool: "HostBlockPool", size: int, ptr: int, shape: tuple[int, ...], dtype: np.dtype,
                 strides: tuple[int, ...]) -> None:
        self._pool, self._size, self._ptr = pool, size, ptr
        self.__array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": dtype.str,
                                    "strides": strides, "version": 3}

    def __del__(self) -> None:
        self._pool._give_back(self._size, self._ptr)


class HostBlockPool:
    """Host memory blocks reused for numpy arrays: :meth:`empty` views a free block that fits
    (the smallest, if at most twice the size asked for) or a new one from ``allocate(nbytes)
    -> address``; the block comes back when the array and all its views are gone. Of the
    free blocks at most ``keep_bytes`` and ``keep_blocks`` stay, the least recently
    returned go first, to ``free(address)`` (a block larger than ``keep_bytes`` at once).

    Thread-safe, and safe from finalisers, which may run on any thread, also inside a
    locked section of this pool: a returned block is queued without a lock and put on the
    free list by whoever holds the lock next, or at once when nobody does."""

    PAGE = 4096  # sizes are rounded up to pages: what page-locking takes anyway

    def __init__(self, allocate: Callable[[int], int], free: Callable[[int], None], keep_bytes: int,
                 keep_blocks: int) -> None:
        self._allocate, self._free = allocate, free
        self.keep_bytes, self.keep_blocks = keep_bytes, keep_blocks
        self._lock = threading.Lock()
        self._returned: collections.deque = collections.deque()  # (size, address); append and popleft are atomic
        self._free_list: list[tuple[int, int, int]] = []  # (size, address, when returned), by size
        self._free_bytes = 0
        self._clock = itertools.count()
        self.allocated = 0  # blocks taken from ``allocate``
        self.reused = 0  # arrays given a free block

    @property
    def free_blocks(self) -> list[tuple[int, int]]:
        """(size, address) of the blocks kept free, by size."""
        self._settle()
        with self._lock:
            return [(size, address) for size, address, _ in self._free_list]

    def empty(self, shape, dtype, order: str = "C") -> np.ndarray:
        """An uninitialised array as ``np.empty(shape, dtype, order=order)``, over a block of
        this pool."""
        if order not in ("C", "F"):
            raise ValueError(f"order must be 'C' or 'F', not {order!r}")
        dtype = np.dtype(dtype)
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)
        size = max(-(-math.prod(shape) * dtype.itemsize // self.PAGE), 1) * self.PAGE
        dims = shape if order == "C" else shape[::-1]
        strides = tuple(math.prod(dims[i + 1:]) * dtype.itemsize for i in range(len(dims)))
        lease = _Lease(self, size, self._take(size), shape, dtype, strides if order == "C" else strides[::-1])
        return np.asarray(lease)

    def _take(self, size: int) -> int:
        address = None
        with self._lock:
            evicted = self._drain()
            at = bisect.bisect_left(self._free_list, (size,))
            if at < len(self._free_list) and self._free_list[at][0] <= 2 * size:
                found, address, _ = self._free_list.pop(at)
                self._free_bytes -= found
                self.reused += 1
        for _, old, _ in evicted:
            self._free(old)
        self._settle()
        if address is None:
            address = self._allocate(size)
            with self._lock:
                self.allocated += 1
        return address

    def _give_back(self, size: int, address: int) -> None:
        self._returned.append((size, address))
        self._settle()

    def _settle(self) -> None:
        """Put the queued blocks on the free list, unless another holds the lock (it then
        does so itself when it lets go); free those beyond the bounds, outside the lock."""
        while self._returned:
            if not self._lock.acquire(blocking=False):
                return
            try:
                evicted = self._drain()
            finally:
                self._lock.release()
            for _, address, _ in evicted:
                self._free(address)

    def _drain(self) -> list[tuple[int, int, int]]:
        """Under the lock: the queued blocks onto the free list, and the least recently
        returned ones taken off it until it is within the bounds (returned, to be freed)."""
        evicted = []
        while self._returned:
            size, address = self._returned.popleft()
            if size > self.keep_bytes:  # kept, it would push out every other block
                evicted.append((size, address, 0))
                continue
            bisect.insort(self._free_list, (size, address, next(self._clock)))
            self._free_bytes += size
        while self._free_list and (self._free_bytes > self.keep_bytes or len(self._free_list) > self.keep_blocks):
            oldest = min(range(len(self._free_list)), key=lambda i: self._free_list[i][2])
            evicted.append(self._free_list.pop(oldest))
            self._free_bytes -= evicted[-1][0]
        return evicted


def _host_alloc(nbytes: int) -> int:
    address = ctypes.c_void_p()
    # CU_MEMHOSTALLOC_PORTABLE: page-locked for every context, not only the current one
    driver.call("cuMemHostAlloc", ctypes.byref(address), ctypes.c_size_t(nbytes), ctypes.c_uint(0x01))
    return address.value


def _host_free(address: int) -> None:
    driver.release("cuMemFreeHost", ctypes.c_void_p(address))


#: This process's page-locked host blocks (cuMemHostAlloc), kept for reuse.
pinned_pool = HostBlockPool(_host_alloc, _host_free, PINNED_KEEP_BYTES, PINNED_KEEP_BLOCKS)


def pinned_empty(shape, dtype, order: str = "C") -> np.ndarray:
    """``np.empty(shape, dtype, order=order)`` in page-locked memory of :data:`pinned_pool`,
    which the driver copies to and from the device by DMA (from pageable memory it copies
    through a staging buffer with the CPU); given back to the pool when the array and its
    views are gone. Plain ``np.empty`` under the CUDA simulator, where this process has no
    CUDA context yet (none is created for it), or when page-locked memory runs out."""
    if simulator_active() or not driver.created_context():
        return np.empty(shape, dtype, order=order)
    try:
        return pinned_pool.empty(shape, dtype, order)
    except CudaDriverError:
        return np.empty(shape, dtype, order=order)


def host_empty(backend: str) -> Callable[..., np.ndarray]:
    """How to allocate a host array that peaks backend ``backend`` (auto, cpu, cuda) reads or
    fills: :func:`pinned_empty` unless it is the CPU's (auto picks the CPU only without a
    GPU, where no context exists and pinned_empty is ``np.empty`` itself)."""
    return np.empty if backend == "cpu" else pinned_empty

