"""The one thread of a process that runs the CPU backends' numba parallel loops.

Each ``prange`` loop already runs on every numba thread, so two jobs' loops gain nothing by
running at the same moment; and numba's OpenMP threading layer keeps a team of worker
threads per calling thread, built on its first parallel call and torn down when that thread
ends. Peaks jobs prepare their engine on short-lived threads: with loops called from them,
a CI run segfaulted twice in an OpenMP worker thread (cold cache, a job's prepare thread in
the loop while another waited), once even with the loops taken one at a time under a lock.
So every loop runs on one long-lived thread per process, one at a time, in the order called.
A cold-cache run crashed once more with this in place (not understood, never with a warm
cache): the test session compiles the loops first (tests/conftest.py), as images do.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

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


def run_parallel_loop(loop: Callable[..., Any], *args: Any) -> Any:
    """``loop(*args)`` on the process's parallel-loop thread; its result, or its exception."""
    return _the_runner().submit(loop, *args).result()
