"""libcuda through ctypes: the driver loaded and initialised once per process, the device's
primary context, and error checking of every call.

The primary context is the one numba uses too, so arrays and kernels of both can be mixed in
one process. Why a fresh process drives the GPU through this binding rather than through
numba: docs/decisions/cubin-driver-path.md.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading

__all__ = ["CudaDriverError", "library_name", "driver_loads", "driver"]

# What the device's memory pool keeps reserved after a synchronisation instead of giving it
# back (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD): above a peaks run's arrays on a whole-brain
# volume, so a process's next run allocates nothing from the driver, while twelve processes
# sharing one GPU keep at most twelve times this (docs/decisions/pinned-host-transfers.md).
DEVICE_POOL_KEEP_BYTES = 1 << 30


class CudaDriverError(RuntimeError):
    """A CUDA driver call failed; the message names the call and the driver's error."""


def library_name() -> str:
    """The driver library: ``$NUMBA_CUDA_DRIVER`` when set (as numba honours it), else libcuda."""
    return os.environ.get("NUMBA_CUDA_DRIVER") or ("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")


def driver_loads() -> bool:
    """Whether the NVIDIA driver library loads. Without it no GPU is usable, and a CPU-only
    machine need not import ``numba.cuda`` to learn that."""
    try:
        ctypes.CDLL(library_name())
    except OSError:
        return False
    return True


class _Driver:
    """libcuda, initialised once per process, with the primary context of device 0 (after
    ``CUDA_VISIBLE_DEVICES``) current on every thread that calls :meth:`ensure_context`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lib: ctypes.CDLL | None = None
        self._context = ctypes.c_void_p()
        self.memory_pools = False  # device arrays from the device's stream-ordered pool

    def call(self, name: str, *args) -> None:
        rc = getattr(self._lib, name)(*args)
        if rc != 0:
            message = ctypes.c_char_p()
            self._lib.cuGetErrorString(rc, ctypes.byref(message))
            text = message.value.decode() if message.value else "unknown error"
            raise CudaDriverError(f"{name} failed: {text} (CUDA error {rc})")

    def _load(self) -> None:
        if self._lib is None:
            self._lib = ctypes.CDLL(library_name())
            try:
                self.call("cuInit", 0)
            except CudaDriverError:
                self._lib = None
                raise

    def release(self, function: str, *args) -> None:
        """Free a resource from a finaliser: no lock (a finaliser may run inside a locked
        section), the context made current first (the finaliser's thread may have none),
        errors ignored (at interpreter exit the context may already be gone)."""
        try:
            self._lib.cuCtxSetCurrent(self._context)
            getattr(self._lib, function)(*args)
        except Exception:
            pass

    def device_count(self) -> int:
        """Visible CUDA devices; initialises the driver but creates no context."""
        with self._lock:
            self._load()
        count = ctypes.c_int()
        self.call("cuDeviceGetCount", ctypes.byref(count))
        return count.value

    def ensure_context(self) -> "_Driver":
        """Load the driver, create the primary context if needed, make it current here."""
        with self._lock:
            self._load()
            if not self._context:
                device = ctypes.c_int()
                self.call("cuDeviceGet", ctypes.byref(device), 0)
                self.call("cuDevicePrimaryCtxRetain", ctypes.byref(self._context), device)
                self._device = device
                self.call("cuCtxSetCurrent", self._context)
                self.memory_pools = self._keep_pool_memory()
        self.call("cuCtxSetCurrent", self._context)
        return self

    def created_context(self) -> bool:
        """Make the primary context current here if this process has created it, and say
        whether it has; never creates one (a parent that forks workers stays GPU-free)."""
        with self._lock:
            created = bool(self._context)
        if created:
            self.call("cuCtxSetCurrent", self._context)
        return created

    def _keep_pool_memory(self) -> bool:
        """Whether the device allocates from its stream-ordered pool (CUDA 11.2 drivers and
        later); if so, raise the pool's release threshold to DEVICE_POOL_KEEP_BYTES."""
        supported = ctypes.c_int()
        if not hasattr(self._lib, "cuMemAllocAsync"):
            return False
        # CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED
        self.call("cuDeviceGetAttribute", ctypes.byref(supported), 115, self._device)
        if not supported.value:
            return False
        pool, threshold = ctypes.c_void_p(), ctypes.c_uint64(DEVICE_POOL_KEEP_BYTES)
        try:
            self.call("cuDeviceGetDefaultMemPool", ctypes.byref(pool), self._device)
            self.call("cuMemPoolSetAttribute", pool, 4, ctypes.byref(threshold))  # CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
        except CudaDriverError:  # a pool that frees at every synchronisation is no gain
            return False
        return True

    def compute_capability(self) -> tuple[int, int]:
        self.ensure_context()
        major, minor = ctypes.c_int(), ctypes.c_int()
        # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
        self.call("cuDeviceGetAttribute", ctypes.byref(major), 75, self._device)
        self.call("cuDeviceGetAttribute", ctypes.byref(minor), 76, self._device)
        return major.value, minor.value

    def device_name(self) -> str:
        self.ensure_context()
        name = ctypes.create_string_buffer(256)
        self.call("cuDeviceGetName", name, 256, self._device)
        return name.value.decode()


driver = _Driver()
