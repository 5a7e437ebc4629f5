"""The CUDA device the kernels use: whether one is usable, its name, and its context.

CUDA is initialised lazily, on the first call that needs it, so a parent process that forks
workers never holds a CUDA context. These ask the driver (:mod:`gpu.cuda.driver`), not
numba, which a CPU-only or a fresh GPU process need not import.
"""

from __future__ import annotations

import functools
import threading

from gpu.cuda import simulator
from gpu.cuda.driver import driver, driver_loads

__all__ = ["cuda_available", "device_name", "start_cuda_context"]


@functools.cache
def cuda_available() -> bool:
    """True when a real CUDA GPU is usable (never under the simulator). Initialises the
    driver, creating no context."""
    if simulator.simulator_active() or not driver_loads():
        return False
    try:
        return driver.device_count() > 0
    except Exception:  # a broken driver install raises various errors: no GPU then
        return False


def device_name() -> str:
    """A human-readable name of the device the CUDA backend runs on."""
    if simulator.simulator_active():
        return "numba CUDA simulator"
    return driver.device_name()


def start_cuda_context() -> None:
    """Create the CUDA context in a background thread, for a one-job process that will use
    the GPU: the driver's start-up then overlaps the imports and the read. Nothing under the
    simulator or where no driver loads; a failure is left to the job, which reports it when
    it needs the GPU."""
    if simulator.simulator_active() or not driver_loads():
        return

    def create() -> None:
        try:
            driver.ensure_context()
        except Exception:  # no usable GPU: the job says so, or runs on the CPU (auto)
            pass

    threading.Thread(target=create, name="cuda-context").start()
