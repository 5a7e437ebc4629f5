"""numba's CUDA simulator running a block's GPU threads on reused Python threads, in
turns, with a block barrier that waits instead of polling.

The simulator runs each GPU thread of a block as a Python thread that it creates, starts
and joins for every block of every launch; all of them run at once, contending for the
interpreter lock, and its block manager finds the moment every live thread has reached
``cuda.syncthreads()`` by polling the threads in a loop that never sleeps. Here a pool of
worker threads, kept for the process, runs the GPU threads: a block takes as many idle
workers as it has threads (starting more only when too few are idle), and its GPU threads
take turns, one running until it reaches a barrier or returns, then handing over to the
next; the last to arrive at a barrier lets the others through. Turns are one of the
interleavings the simulator's threads may run in; if a turn lasts long enough to suggest
a thread waits on the others without a barrier (a spin loop, which the interpreter's
preemption lets through in the simulator), the block's other runnable threads run beside
it until the next barrier.

The semantics are the simulator's. The kernel API finds the running GPU thread's state
(``threadIdx``, ``blockIdx``, the lane, the block's barrier) on
``threading.current_thread()``, so a worker is a ``BlockThread`` that carries the state of
the GPU thread it runs. Each GPU thread runs in a fresh ``contextvars`` context, as a new
thread starts in one, so context state that a kernel sets (NumPy's error state, which the
simulator's debug mode sets) does not reach the next GPU thread of the worker. A barrier
waits for the threads of the block that are still running (threads that returned take no
part), and when one thread raises, the others stop at their next barrier and the launch
raises the first thread's exception, once every thread of the block has stopped.

Why turns: docs/decisions/cuda-simulator-turns.md.
"""

from __future__ import annotations

import collections
import contextvars
import os
import sys
import threading

import numpy as np

__all__ = ["install"]

# a turn without a handover for this long lets the block's other runnable threads run
_STALL_SECONDS = 0.2


def install() -> None:
    """Replace the simulator's block manager (a no-op unless ``numba.cuda`` is the
    simulator, i.e. ``NUMBA_ENABLE_CUDASIM=1``)."""
    from numba.core import config

    if not config.ENABLE_CUDASIM:
        return
    from numba.cuda.simulator import kernel

    if getattr(kernel.BlockManager, "reuses_threads", False):
        return
    kernel.BlockManager = _manager_class(kernel)


def _manager_class(kernel):
    from numba.cuda.simulator.kernelapi import Dim3

    class Worker(kernel.BlockThread):
        """A pooled thread that runs one GPU thread at a time and, while it does, is that
        GPU thread for the kernel API (``BlockThread``'s attributes and barrier methods)."""

        def __init__(self):
            threading.Thread.__init__(self, name="cuda-simulator-worker", daemon=True)
            # held but while the GPU thread it runs has its turn
            self.gate = threading.Lock()
            self.gate.acquire()

        @classmethod
        def idle(cls):
            """A worker of the pool that runs no GPU thread, started if none is idle."""
            try:
                return _idle.pop()
            except IndexError:
                worker = cls()
                worker.start()
                return worker

        def start_gpu_thread(self, block, blockIdx, threadIdx):
            """Run GPU thread ``threadIdx`` of ``block`` (block ``blockIdx``) at its first turn."""
            self._manager, self.debug = block, block._debug
            self.blockIdx, self.threadIdx = Dim3(*blockIdx), Dim3(*threadIdx)
            x, y, _ = block._block_dim
            self.thread_id = threadIdx[0] + x * (threadIdx[1] + y * threadIdx[2])
            block.ready.append(self.gate)

        def run(self):
            while True:
                self.gate.acquire()
                block = self._manager
                try:
                    error = contextvars.Context().run(self._run_kernel)
                except BaseException:  # SystemExit ends the thread, as it ends the simulator's
                    block.finished(None)
                    raise
                self._manager = None
                _idle.append(self)
                block.finished(error)

        def _run_kernel(self):
            """The exception the kernel raised, its message prefixed with the thread and
            block as the simulator's ``BlockThread`` does, with its traceback; else None."""
            try:
                if self.debug:
                    np.seterr(divide="raise")
                self._manager._f(*self._manager.args)
            except Exception as e:
                where = f"tid={list(self.threadIdx)} ctaid={list(self.blockIdx)}"
                return type(e)(f"{where}: {e}" if str(e) else where), sys.exc_info()[2]
            return None

        def syncthreads(self):
            block = self._manager
            with block.lock:
                if block.failed is not None:
                    raise RuntimeError("abort flag set on syncthreads call")
                block.waiting.append(self.gate)
                block.hand_over()
            self.gate.acquire()
            if block.failed is not None:
                raise RuntimeError("abort flag set on syncthreads clear")

    class BlockManager(kernel.BlockManager):
        reuses_threads = True

        def run(self, grid_point, *args):
            self.args = args
            self.lock = threading.Lock()
            self.ready = collections.deque()  # the gates of the threads waiting for a turn
            self.waiting = []  # the gates of the threads at the barrier
            self.failed = None
            self.turns = 0
            self.done = threading.Lock()
            self.done.acquire()
            points = list(np.ndindex(*self._block_dim))
            self.alive = len(points)
            for point in points:
                Worker.idle().start_gpu_thread(self, grid_point, point)
            with self.lock:
                self.hand_over()
            seen = -1
            while not self.done.acquire(timeout=_STALL_SECONDS):
                with self.lock:
                    if self.turns == seen:
                        self.open_all()
                    seen = self.turns
            if self.failed is not None:
                error, trace = self.failed
                raise error.with_traceback(trace)

        def hand_over(self):
            """A thread stopped, at the barrier or returned: let the barrier's threads
            through once every live thread waits there, and give the next thread its turn
            (the caller holds ``lock``)."""
            if self.alive and len(self.waiting) == self.alive:
                self.ready.extend(self.waiting)
                self.waiting = []
            if self.ready:
                self.turns += 1
                self.ready.popleft().release()

        def open_all(self):
            """Let every thread waiting for a turn run at once (the caller holds ``lock``)."""
            while self.ready:
                self.ready.popleft().release()

        def finished(self, error):
            """A GPU thread of the block returned, or raised ``error``."""
            with self.lock:
                self.alive -= 1
                if error is not None and self.failed is None:
                    self.failed = error
                    self.ready.extend(self.waiting)
                    self.waiting = []
                    self.open_all()
                self.hand_over()
                if not self.alive:
                    self.done.release()

    return BlockManager


# the workers waiting for a GPU thread to run (list.append and list.pop are atomic)
_idle: list = []

# a forked child has none of the parent's threads
os.register_at_fork(after_in_child=_idle.clear)
