"""A :class:`gpu.cuda.host_memory.HostBlockPool` over ordinary host memory (``np.empty`` blocks
standing in for ``cuMemHostAlloc``'s), for tests of the pool and of what allocates from it."""

import threading

import numpy as np

from gpu.cuda.host_memory import HostBlockPool


class Memory:
    """allocate/free of real host memory, recording what is live."""

    def __init__(self):
        self.live: dict[int, np.ndarray] = {}
        self.freed: list[int] = []
        self.lock = threading.Lock()

    def allocate(self, nbytes: int) -> int:
        block = np.empty(nbytes, np.uint8)
        with self.lock:
            self.live[block.ctypes.data] = block
        return block.ctypes.data

    def free(self, address: int) -> None:
        with self.lock:
            del self.live[address]
            self.freed.append(address)


def pool(keep_bytes=1 << 30, keep_blocks=100) -> tuple[HostBlockPool, Memory]:
    memory = Memory()
    return HostBlockPool(memory.allocate, memory.free, keep_bytes, keep_blocks), memory
