"""The one thread of a process that runs the CPU backends' numba parallel loops.

Each ``prange`` loop already runs on every numba thread, so two jobs' loops gain nothing by
running at the same moment; and numba's OpenMP threading layer keeps a team of worker
threads per calling thread, built on its first parallel call and torn down when that thread
ends, and peaks jobs prepare on short-lived threads. So every loop runs on one long-lived
thread per process, one at a time, in the order called.

A loop's first call with new argument types compiles it (seconds) or loads it from numba's
on-disk cache. That step runs apart, just before the call, on the same thread, holding an
exclusive lock on a file beside the loop's cache files: of several processes sharing the
cache (a worker's job processes, a batch's, pytest-xdist's), one compiles and the others
wait, then load what it saved. Without it, numba writes a function's index before its data,
and a process loading in between runs whatever data file the index names: after a source
change (an upgrade, regenerated loops), the old version's machine code. Cold-cache CI runs,
whose two test processes compiled the loops at once into one cache, also segfaulted in
numba's parallel runtime (never with a warm cache; not reproduced outside pytest).
"""

from __future__ import annotations

import fcntl
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import gpu.numba_cache  # noqa: F401 - numba's cache shared safely by processes

__all__ = ["run_parallel_loop"]

_runner: ThreadPoolExecutor | None = None
_runner_pid = -1
_runner_lock = threading.Lock()


def _the_runner() -> ThreadPoolExecutor:
    global _runner, _runner_pid
    with _runner_lock:
        # a forked child inherits the executor but not its thread: it makes its own
        if _runner is None or _runner_pid != os.getpid():
            _runner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="numba-parallel")
            _runner_pid = os.getpid()
        return _runner


def _load(loop, args: tuple) -> None:
    """Compile numba ``loop`` (an ``njit`` dispatcher) for ``args``'s types, or load it from its
    on-disk cache, under the cache's lock, unless this process already has it."""
    sig = tuple(loop.typeof_pyval(a) for a in args)
    if sig in loop.overloads:
        return
    cache_path = getattr(loop._cache, "_cache_path", None)  # none: the loop has no disk cache
    if cache_path is None:
        loop.compile(sig)
        return
    os.makedirs(cache_path, exist_ok=True)
    name = f"{loop.py_func.__module__}.{loop.py_func.__qualname__}.lock"
    with open(os.path.join(cache_path, name), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        loop.compile(sig)


def _load_and_run(loop: Callable[..., Any], args: tuple, threads: int | None) -> Any:
    _load(loop, args)
    if threads is None:
        return loop(*args)
    import numba

    every = numba.get_num_threads()
    numba.set_num_threads(min(threads, every))  # this thread's loops only
    try:
        return loop(*args)
    finally:
        numba.set_num_threads(every)


def run_parallel_loop(loop: Callable[..., Any], *args: Any, threads: int | None = None) -> Any:
    """``loop(*args)`` on the process's parallel-loop thread, compiled or loaded
    first (see the module docstring), on at most ``threads`` of numba's threads (default
    all); its result, or its exception."""
    return _the_runner().submit(_load_and_run, loop, args, threads).result()
