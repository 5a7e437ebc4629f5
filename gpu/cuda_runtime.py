"""Which CUDA device, if any, the kernels can use.

CUDA is initialised lazily, on the first call that needs it, so a parent process that forks
workers never holds a CUDA context.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import threading

__all__ = ["cuda_available", "simulator_active", "device_name", "resolve_backend", "start_cuda_context"]


def simulator_active() -> bool:
    """True when numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) stands in for a GPU.
    Read from the environment as numba reads it, unless numba is loaded already: importing
    numba to learn this would cost the CUDA path the second it saves by not needing numba.
    A config module that another thread is still importing has no setting yet: the
    environment, which it reads, says the same."""
    enabled = getattr(sys.modules.get("numba.core.config"), "ENABLE_CUDASIM", None)
    if enabled is not None:
        return bool(enabled)
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0").strip() not in ("", "0")


def _driver_loads() -> bool:
    """Whether the NVIDIA driver library loads. Without it no GPU is usable, and a CPU-only
    machine need not import ``numba.cuda`` to learn that."""
    from gpu.cuda_driver import library_name

    try:
        ctypes.CDLL(library_name())
    except OSError:
        return False
    return True


@functools.cache
def cuda_available() -> bool:
    """True when a real CUDA GPU is usable (never under the simulator). Asks the driver
    (initialising it, creating no context), not numba, which would take a second to import."""
    if simulator_active() or not _driver_loads():
        return False
    from gpu.cuda_driver import driver

    try:
        return driver.device_count() > 0
    except Exception:  # a broken driver install raises various errors: no GPU then
        return False


def device_name() -> str:
    """A human-readable name of the device the CUDA backend runs on."""
    if simulator_active():
        return "numba CUDA simulator"
    from gpu.cuda_driver import driver

    return driver.device_name()


def resolve_backend(backend: str) -> str:
    """Map ``auto|cpu|cuda`` to the backend that will run.

    ``auto`` picks CUDA when a real GPU is present, else CPU. ``cuda`` without a GPU is an
    error unless the simulator is active (tests run the kernels there).
    """
    if backend not in ("auto", "cpu", "cuda"):
        raise ValueError(f"backend must be auto, cpu or cuda, not {backend!r}")
    if backend == "auto":
        return "cuda" if cuda_available() else "cpu"
    if backend == "cuda" and not (cuda_available() or simulator_active()):
        raise RuntimeError(
            "backend 'cuda' was requested but no CUDA GPU is usable here "
            "(install numba-cuda and an NVIDIA driver, or use --backend cpu)"
        )
    return backend


def start_cuda_context() -> None:
    """Create the CUDA context in a background thread, for a one-job process that will use
    the GPU: the driver's fraction of a second then overlaps the imports and the read.
    Nothing under the simulator or where no driver loads; a failure is left to the job,
    which reports it when it needs the GPU."""
    if simulator_active() or not _driver_loads():
        return
    from gpu.cuda_driver import driver

    def create() -> None:
        try:
            driver.ensure_context()
        except Exception:  # no usable GPU: the job says so, or runs on the CPU (auto)
            pass

    threading.Thread(target=create, name="cuda-context").start()
