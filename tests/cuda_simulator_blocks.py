"""numba's CUDA simulator running a block's GPU threads on reused Python threads, with a
block barrier that waits instead of polling.

The simulator runs each GPU thread of a block as a Python thread that it creates, starts
and joins for every block of every launch, and its block manager finds the moment every
live thread has reached ``cuda.syncthreads()`` by polling the threads in a loop that never
sleeps: it holds the interpreter lock against the very threads it waits for. Here a pool
of worker threads, kept for the process, runs the GPU threads (a block takes as many idle
workers as it has threads, starting more only when too few are idle), and the last thread
to arrive at a barrier releases the others, as a barrier does.

The semantics are the simulator's. The kernel API finds the running GPU thread's state
(``threadIdx``, ``blockIdx``, the lane, the block's barrier) on
``threading.current_thread()``, so a worker is a ``BlockThread`` that carries the state of
the GPU thread it runs, set before the kernel starts and cleared after it returns. Each
GPU thread runs in a fresh ``contextvars`` context, as a new thread starts in one, so
context state that a kernel sets (NumPy's error state, which the simulator's debug mode
sets) does not reach the next GPU thread of the worker. A barrier waits for the threads
of the block that are still running (threads that returned take no part), and when one
thread raises, the others stop at their next barrier and the launch raises the first
thread's exception, once every thread of the block has stopped.
"""

from __future__ import annotations

import contextvars
import os
import queue
import sys
import threading

import numpy as np

__all__ = ["install"]


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
            self._gpu_threads = queue.SimpleQueue()

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
            self._gpu_threads.put((block, blockIdx, threadIdx))

        def run(self):
            while True:
                self._manager, blockIdx, threadIdx = self._gpu_threads.get()
                self.blockIdx, self.threadIdx = Dim3(*blockIdx), Dim3(*threadIdx)
                dim = self._manager._block_dim
                self.thread_id = threadIdx[0] + dim[0] * (threadIdx[1] + dim[1] * threadIdx[2])
                self.debug = self._manager._debug
                error = contextvars.Context().run(self._run_kernel)
                block, self._manager = self._manager, None
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
            with block.cond:
                if block.failed is not None:
                    raise RuntimeError("abort flag set on syncthreads call")
                block.arrived += 1
                if block.arrived == block.alive:
                    block.release()
                else:
                    passage = block.passage
                    block.cond.wait_for(lambda: block.passage != passage or block.failed is not None)
                if block.failed is not None:
                    raise RuntimeError("abort flag set on syncthreads clear")

    class BlockManager(kernel.BlockManager):
        reuses_threads = True

        def release(self):
            """Let every thread waiting at the barrier through (the caller holds ``cond``)."""
            self.arrived = 0
            self.passage += 1
            self.cond.notify_all()

        def finished(self, error):
            """A GPU thread of the block returned, or raised ``error``."""
            with self.cond:
                self.alive -= 1
                if error is not None and self.failed is None:
                    self.failed = error
                    self.cond.notify_all()
                elif self.alive and self.arrived == self.alive:
                    self.release()
                elif not self.alive:
                    self.cond.notify_all()

        def run(self, grid_point, *args):
            self.cond = threading.Condition()
            self.arrived = self.passage = 0
            self.failed = None
            self.args = args
            points = list(np.ndindex(*self._block_dim))
            self.alive = len(points)
            for point in points:
                Worker.idle().start_gpu_thread(self, grid_point, point)
            with self.cond:
                self.cond.wait_for(lambda: not self.alive)
            if self.failed is not None:
                error, trace = self.failed
                raise error.with_traceback(trace)

    return BlockManager


# the workers waiting for a GPU thread to run (list.append and list.pop are atomic)
_idle: list = []


# a forked child has none of the parent's threads
os.register_at_fork(after_in_child=_idle.clear)
