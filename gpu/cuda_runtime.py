"""Which CUDA device, if any, the kernels can use.

CUDA is initialised lazily, on the first call that needs it, so a parent process that forks
workers never holds a CUDA context.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys

__all__ = ["cuda_available", "simulator_active", "device_name", "resolve_backend"]


def simulator_active() -> bool:
    """True when numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) stands in for a GPU."""
    from numba import config

    return bool(config.ENABLE_CUDASIM)


def _driver_loads() -> bool:
    """Whether the NVIDIA driver library loads. Without it no GPU is usable, and a CPU-only
    machine need not import ``numba.cuda`` to learn that."""
    if os.environ.get("NUMBA_CUDA_DRIVER"):  # a driver at a custom path: numba's lookup decides
        return True
    names = {"win32": ("nvcuda.dll",), "linux": ("libcuda.so.1", "libcuda.so")}.get(sys.platform, ())
    for name in names:
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        return True
    return False


@functools.cache
def cuda_available() -> bool:
    """True when a real CUDA GPU is usable (never under the simulator)."""
    if simulator_active() or not _driver_loads():
        return False
    try:
        from numba import cuda

        return bool(cuda.is_available()) and len(cuda.gpus) > 0
    except Exception:  # a missing driver or toolkit raises various errors: no GPU then
        return False


def device_name() -> str:
    """A human-readable name of the device the CUDA backend runs on."""
    if simulator_active():
        return "numba CUDA simulator"
    from numba import cuda

    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


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
