"""One pool of threads per process for work that releases the interpreter lock: compiled
passes over blocks of a volume's rows, and gzip blocks.

The threads live as long as the process: a pool made per call starts its threads when work
is submitted, and on a many-core host writing a job's outputs from a pool of threads, each
new thread waits for the interpreter lock before it runs (docs/decisions/writer-thread-pool.md).
Only leaf work goes here, work that waits for nothing else in the pool.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

__all__ = ["leaf_pool", "run_in_blocks"]

_lock = threading.Lock()
_pool: tuple[int, ThreadPoolExecutor] | None = None


def leaf_pool() -> ThreadPoolExecutor:
    """This process's pool, one thread per core; a forked child makes its own (the parent's
    threads do not exist there)."""
    global _pool
    with _lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(max_workers=len(os.sched_getaffinity(0)),
                                                     thread_name_prefix="leaf"))
        return _pool[1]


def run_in_blocks(function: Callable[..., Any], sliced: Sequence, shared: Sequence = (),
                  block_rows: int = 1 << 16) -> list:
    """``function(*blocks, *shared)`` for each block of ``block_rows`` rows of the ``sliced``
    arrays (along their first axes; each has the first one's rows, or none, and is then
    passed whole) on the pool; the results in block order. Each block must write only its
    own rows."""
    rows = len(sliced[0])
    pool = leaf_pool()
    done = [pool.submit(function, *(a[start:start + block_rows] if len(a) == rows else a for a in sliced), *shared)
            for start in range(0, rows, block_rows)]
    return [future.result() for future in done]
