"""numba's CUDA simulator with a block barrier that waits instead of polling.

The simulator runs each GPU thread of a block as a Python thread, and its block manager
finds the moment every live thread has reached ``cuda.syncthreads()`` by polling the
threads in a loop that never sleeps: it holds the interpreter lock against the very
threads it waits for, so a kernel with many barriers (warp-shuffle stand-ins, block
reductions) spends most of its CPU time in that loop, the more so when other processes
share the cores. Here the last thread to arrive releases the others, as a barrier does.

The semantics are the simulator's: a barrier waits for the threads of the block that are
still running (threads that returned take no part), and when one thread raises, the others
stop at their next barrier and the launch raises the first thread's exception.
"""

from __future__ import annotations

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

    if getattr(kernel.BlockManager, "waits_without_polling", False):
        return
    kernel.BlockManager = _manager_class(kernel)


def _manager_class(kernel):
    class BlockThread(kernel.BlockThread):
        """A GPU thread whose ``syncthreads`` is a barrier over the block's live threads."""

        def run(self):
            super().run()  # keeps an exception in self.exception, as the simulator's does
            block = self._manager
            with block.cond:
                block.alive -= 1
                if self.exception is not None and block.failed is None:
                    block.failed = self
                    block.cond.notify_all()
                elif block.alive and block.arrived == block.alive:
                    block.release()

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
        waits_without_polling = True

        def release(self):
            """Let every thread waiting at the barrier through (the caller holds ``cond``)."""
            self.arrived = 0
            self.passage += 1
            self.cond.notify_all()

        def run(self, grid_point, *args):
            self.cond = threading.Condition()
            self.arrived = self.passage = 0
            self.failed = None

            def target():
                self._f(*args)

            threads = [BlockThread(target, self, grid_point, point, self._debug)
                       for point in np.ndindex(*self._block_dim)]
            self.alive = len(threads)
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if self.failed is not None:
                error, trace = self.failed.exception
                raise error.with_traceback(trace)

    return BlockManager
