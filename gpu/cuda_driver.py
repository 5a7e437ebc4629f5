"""The few CUDA driver calls a job needs to run kernels numba compiled earlier, through
ctypes, without importing numba.

A fresh process that imports ``numba.cuda`` and loads cached kernels through its
dispatchers spends about two seconds before the first launch (imports, typing tables,
unpickling); the driver itself needs a fraction of that to create a context and load a
cubin. :mod:`gpu.cubin_cache` keeps the cubins numba built; this module moves arrays and
launches them. It uses the device's primary context, the one numba uses too, so arrays and
kernels of both can be mixed in one process (:class:`DeviceArray` has the
``__cuda_array_interface__``).

Launch arguments follow numba's kernel ABI: an array is passed as its data model's fields,
flattened (meminfo, parent, nitems, itemsize, data, shape..., strides...), a scalar as its
C type.

Memory is reused rather than allocated per array: device arrays come from the device's
stream-ordered pool (``cuMemAllocAsync``), host arrays the GPU reads or fills from page-locked
blocks kept in a :class:`HostBlockPool` (:func:`pinned_empty`), which the driver copies by DMA
instead of through a staging buffer of its own with the CPU.
"""

from __future__ import annotations

import bisect
import collections
import ctypes
import functools
import itertools
import math
import os
import struct
import sys
import threading
from typing import Callable, Sequence

import numpy as np

from gpu.cuda_runtime import simulator_active

__all__ = ["CudaDriverError", "library_name", "driver", "DeviceArray", "Event", "Kernel", "HostBlockPool", "pinned_pool",
           "pinned_empty", "host_empty", "to_device", "device_array", "device_full", "event", "load_kernel", "synchronize"]

# What the device's memory pool keeps reserved after a synchronisation instead of giving it
# back (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD): above a peaks run's arrays (about 400 MB for
# 553k voxels at lmax 8), so a process's next run allocates nothing from the driver, while
# 12 processes sharing an 80 GB GPU keep at most 12 GiB between them.
DEVICE_POOL_KEEP_BYTES = 1 << 30
# Free page-locked blocks a process keeps for its next arrays: a peaks job's input and
# results (about 130 MB for 553k voxels at lmax 8) fit; beyond it blocks go back to the OS,
# so a worker's pinned memory stays flat however its inputs' sizes vary.
PINNED_KEEP_BYTES = 256 << 20
PINNED_KEEP_BLOCKS = 32


class CudaDriverError(RuntimeError):
    """A CUDA driver call failed; the message names the call and the driver's error."""


def library_name() -> str:
    """The driver library: ``$NUMBA_CUDA_DRIVER`` when set (as numba honours it), else libcuda."""
    return os.environ.get("NUMBA_CUDA_DRIVER") or ("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")


class _Driver:
    """libcuda, initialised once per process, with the primary context of device 0 (after
    ``CUDA_VISIBLE_DEVICES``) current on every thread that calls :meth:`ensure_context`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lib: ctypes.CDLL | None = None
        self._context = ctypes.c_void_p()
        self.memory_pools = False  # device arrays from the device's stream-ordered pool

    def _call(self, name: str, *args) -> None:
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
                self._call("cuInit", 0)
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
        self._call("cuDeviceGetCount", ctypes.byref(count))
        return count.value

    def ensure_context(self) -> "_Driver":
        """Load the driver, create the primary context if needed, make it current here."""
        with self._lock:
            self._load()
            if not self._context:
                device = ctypes.c_int()
                self._call("cuDeviceGet", ctypes.byref(device), 0)
                self._call("cuDevicePrimaryCtxRetain", ctypes.byref(self._context), device)
                self._device = device
                self._call("cuCtxSetCurrent", self._context)
                self.memory_pools = self._keep_pool_memory()
        self._call("cuCtxSetCurrent", self._context)
        return self

    def created_context(self) -> bool:
        """Make the primary context current here if this process has created it, and say
        whether it has; never creates one (a parent that forks workers stays GPU-free)."""
        with self._lock:
            created = bool(self._context)
        if created:
            self._call("cuCtxSetCurrent", self._context)
        return created

    def _keep_pool_memory(self) -> bool:
        """Whether the device allocates from its stream-ordered pool (CUDA 11.2 drivers and
        later); if so, raise the pool's release threshold to DEVICE_POOL_KEEP_BYTES."""
        supported = ctypes.c_int()
        if not hasattr(self._lib, "cuMemAllocAsync"):
            return False
        # CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED
        self._call("cuDeviceGetAttribute", ctypes.byref(supported), 115, self._device)
        if not supported.value:
            return False
        pool, threshold = ctypes.c_void_p(), ctypes.c_uint64(DEVICE_POOL_KEEP_BYTES)
        try:
            self._call("cuDeviceGetDefaultMemPool", ctypes.byref(pool), self._device)
            self._call("cuMemPoolSetAttribute", pool, 4, ctypes.byref(threshold))  # CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
        except CudaDriverError:  # a pool that frees at every synchronisation is no gain
            return False
        return True

    def compute_capability(self) -> tuple[int, int]:
        self.ensure_context()
        major, minor = ctypes.c_int(), ctypes.c_int()
        # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
        self._call("cuDeviceGetAttribute", ctypes.byref(major), 75, self._device)
        self._call("cuDeviceGetAttribute", ctypes.byref(minor), 76, self._device)
        return major.value, minor.value

    def device_name(self) -> str:
        self.ensure_context()
        name = ctypes.create_string_buffer(256)
        self._call("cuDeviceGetName", name, 256, self._device)
        return name.value.decode()


driver = _Driver()


class _Lease:
    """One pooled block while arrays view it: numpy keeps it as their ``base`` (through the
    array interface), and when the last view is gone its finaliser gives the block back."""

    def __init__(self, pool: "HostBlockPool", size: int, ptr: int, shape: tuple[int, ...], dtype: np.dtype,
                 strides: tuple[int, ...]) -> None:
        self._pool, self._size, self._ptr = pool, size, ptr
        self.__array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": dtype.str,
                                    "strides": strides, "version": 3}

    def __del__(self) -> None:
        self._pool._give_back(self._size, self._ptr)


class HostBlockPool:
    """Host memory blocks reused for numpy arrays: :meth:`empty` views a free block that fits
    (the smallest, if at most twice the size asked for) or a new one from ``allocate(nbytes)
    -> address``; the block comes back when the array and all its views are gone. Of the
    free blocks at most ``keep_bytes`` and ``keep_blocks`` stay, the least recently
    returned go first, to ``free(address)`` (a block larger than ``keep_bytes`` at once).

    Thread-safe, and safe from finalisers, which may run on any thread, also inside a
    locked section of this pool: a returned block is queued without a lock and put on the
    free list by whoever holds the lock next, or at once when nobody does."""

    PAGE = 4096  # sizes are rounded up to pages: what page-locking takes anyway

    def __init__(self, allocate: Callable[[int], int], free: Callable[[int], None], keep_bytes: int,
                 keep_blocks: int) -> None:
        self._allocate, self._free = allocate, free
        self.keep_bytes, self.keep_blocks = keep_bytes, keep_blocks
        self._lock = threading.Lock()
        self._returned: collections.deque = collections.deque()  # (size, address); append and popleft are atomic
        self._free_list: list[tuple[int, int, int]] = []  # (size, address, when returned), by size
        self._free_bytes = 0
        self._clock = itertools.count()
        self.allocated = 0  # blocks taken from ``allocate``
        self.reused = 0  # arrays given a free block

    @property
    def free_blocks(self) -> list[tuple[int, int]]:
        """(size, address) of the blocks kept free, by size."""
        self._settle()
        with self._lock:
            return [(size, address) for size, address, _ in self._free_list]

    def empty(self, shape, dtype, order: str = "C") -> np.ndarray:
        """An uninitialised array as ``np.empty(shape, dtype, order=order)``, over a block of
        this pool."""
        if order not in ("C", "F"):
            raise ValueError(f"order must be 'C' or 'F', not {order!r}")
        dtype = np.dtype(dtype)
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)
        size = max(-(-math.prod(shape) * dtype.itemsize // self.PAGE), 1) * self.PAGE
        dims = shape if order == "C" else shape[::-1]
        strides = tuple(math.prod(dims[i + 1:]) * dtype.itemsize for i in range(len(dims)))
        lease = _Lease(self, size, self._take(size), shape, dtype, strides if order == "C" else strides[::-1])
        return np.asarray(lease)

    def _take(self, size: int) -> int:
        address = None
        with self._lock:
            evicted = self._drain()
            at = bisect.bisect_left(self._free_list, (size,))
            if at < len(self._free_list) and self._free_list[at][0] <= 2 * size:
                found, address, _ = self._free_list.pop(at)
                self._free_bytes -= found
                self.reused += 1
        for _, old, _ in evicted:
            self._free(old)
        self._settle()
        if address is None:
            address = self._allocate(size)
            with self._lock:
                self.allocated += 1
        return address

    def _give_back(self, size: int, address: int) -> None:
        self._returned.append((size, address))
        self._settle()

    def _settle(self) -> None:
        """Put the queued blocks on the free list, unless another holds the lock (it then
        does so itself when it lets go); free those beyond the bounds, outside the lock."""
        while self._returned:
            if not self._lock.acquire(blocking=False):
                return
            try:
                evicted = self._drain()
            finally:
                self._lock.release()
            for _, address, _ in evicted:
                self._free(address)

    def _drain(self) -> list[tuple[int, int, int]]:
        """Under the lock: the queued blocks onto the free list, and the least recently
        returned ones taken off it until it is within the bounds (returned, to be freed)."""
        evicted = []
        while self._returned:
            size, address = self._returned.popleft()
            if size > self.keep_bytes:  # kept, it would push out every other block
                evicted.append((size, address, 0))
                continue
            bisect.insort(self._free_list, (size, address, next(self._clock)))
            self._free_bytes += size
        while self._free_list and (self._free_bytes > self.keep_bytes or len(self._free_list) > self.keep_blocks):
            oldest = min(range(len(self._free_list)), key=lambda i: self._free_list[i][2])
            evicted.append(self._free_list.pop(oldest))
            self._free_bytes -= evicted[-1][0]
        return evicted


def _host_alloc(nbytes: int) -> int:
    address = ctypes.c_void_p()
    # CU_MEMHOSTALLOC_PORTABLE: page-locked for every context, not only the current one
    driver._call("cuMemHostAlloc", ctypes.byref(address), ctypes.c_size_t(nbytes), ctypes.c_uint(0x01))
    return address.value


def _host_free(address: int) -> None:
    driver.release("cuMemFreeHost", ctypes.c_void_p(address))


#: This process's page-locked host blocks (cuMemHostAlloc), kept for reuse.
pinned_pool = HostBlockPool(_host_alloc, _host_free, PINNED_KEEP_BYTES, PINNED_KEEP_BLOCKS)


def pinned_empty(shape, dtype, order: str = "C") -> np.ndarray:
    """``np.empty(shape, dtype, order=order)`` in page-locked memory of :data:`pinned_pool`,
    which the driver copies to and from the device by DMA (from pageable memory it copies
    through a staging buffer with the CPU); given back to the pool when the array and its
    views are gone. Plain ``np.empty`` under the CUDA simulator, where this process has no
    CUDA context yet (none is created for it), or when page-locked memory runs out."""
    if simulator_active() or not driver.created_context():
        return np.empty(shape, dtype, order=order)
    try:
        return pinned_pool.empty(shape, dtype, order)
    except CudaDriverError:
        return np.empty(shape, dtype, order=order)


def host_empty(backend: str) -> Callable[..., np.ndarray]:
    """How to allocate a host array that peaks backend ``backend`` (auto, cpu, cuda) reads or
    fills: :func:`pinned_empty` unless it is the CPU's (auto picks the CPU only without a
    GPU, where no context exists and pinned_empty is ``np.empty`` itself)."""
    return np.empty if backend == "cpu" else pinned_empty


class _Allocation:
    """Device memory, freed when the last array viewing it is gone.

    From the device's stream-ordered pool where it has one: every copy and launch here runs
    on the legacy default stream, so memory allocated and freed on it is never reused
    before the work queued on it is done, a free waits for nothing (cuMemFree synchronises
    the device), and the pool hands the next run's arrays the same memory without asking
    the OS (a size-keyed cache of our own would do the same for fewer sizes)."""

    def __init__(self, nbytes: int) -> None:
        self.ptr = ctypes.c_uint64()
        self.nbytes = nbytes
        self.pooled = driver.ensure_context().memory_pools
        size = ctypes.c_size_t(max(nbytes, 1))
        if self.pooled:
            driver._call("cuMemAllocAsync", ctypes.byref(self.ptr), size, None)
        else:
            driver._call("cuMemAlloc_v2", ctypes.byref(self.ptr), size)

    def __del__(self) -> None:
        if self.pooled:
            driver.release("cuMemFreeAsync", self.ptr, None)
        else:
            driver.release("cuMemFree_v2", self.ptr)


def _c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    """numpy's rule: dimensions of length 1 do not count, and an empty array is contiguous."""
    if 0 in shape:
        return True
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


class DeviceArray:
    """A strided view of device memory: the part of numba's ``DeviceNDArray`` the launch
    sequences use (``shape``, slicing, ``copy_to_host``)."""

    def __init__(self, allocation: _Allocation, ptr: int, shape: tuple[int, ...], strides: tuple[int, ...],
                 dtype: np.dtype) -> None:
        self._allocation = allocation
        self.ptr = ptr
        self.shape = shape
        self.strides = strides
        self.dtype = dtype

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_c_contiguous(self) -> bool:
        return _c_contiguous(self.shape, self.strides, self.dtype.itemsize)

    @functools.cached_property
    def numba_layout(self) -> str:
        """The layout letter numba gives this array's type: what picks the compiled kernel."""
        if self.is_c_contiguous:
            return "C"
        f_order = _c_contiguous(self.shape[::-1], self.strides[::-1], self.dtype.itemsize)
        return "F" if f_order else "A"

    def __getitem__(self, index) -> "DeviceArray":
        """Basic slicing with unit steps (``a[lo:hi]``, ``a[:, lo:hi]``): a view."""
        index = index if isinstance(index, tuple) else (index,)
        if len(index) > self.ndim:
            raise IndexError(f"{len(index)} indices for a {self.ndim}-d array")
        ptr, shape = self.ptr, list(self.shape)
        for axis, item in enumerate(index):
            if not isinstance(item, slice):
                raise TypeError("device arrays take slices only")
            start, stop, step = item.indices(shape[axis])
            if step != 1:
                raise ValueError("device array slices take unit steps only")
            ptr += start * self.strides[axis]
            shape[axis] = max(stop - start, 0)
        return DeviceArray(self._allocation, ptr, tuple(shape), self.strides, self.dtype)

    @property
    def T(self) -> "DeviceArray":
        """The transposed view (axes reversed), as numpy's ``.T``."""
        return DeviceArray(self._allocation, self.ptr, self.shape[::-1], self.strides[::-1], self.dtype)

    def copy_to_host(self, ary: np.ndarray | None = None) -> np.ndarray:
        """This array's contents in ``ary`` (C-contiguous, of this shape and dtype), as
        numba's ``copy_to_host(ary)``, or in a new C-ordered array of page-locked memory
        (:func:`pinned_empty`), which the driver fills by DMA."""
        if not self.is_c_contiguous:
            raise ValueError("copy_to_host takes a contiguous device array")
        if ary is None:
            host = pinned_empty(self.shape, self.dtype)
        elif ary.shape != self.shape or ary.dtype != self.dtype or not ary.flags.c_contiguous:
            raise ValueError(f"copy_to_host needs a C-contiguous {self.dtype} array of shape {self.shape}, "
                             f"not a {ary.dtype} array of shape {ary.shape}")
        else:
            host = ary
        if host.nbytes:
            driver.ensure_context()._call("cuMemcpyDtoH_v2", host.ctypes.data_as(ctypes.c_void_p),
                                          ctypes.c_uint64(self.ptr), ctypes.c_size_t(host.nbytes))
        return host

    @property
    def __cuda_array_interface__(self) -> dict:
        strides = None if self.is_c_contiguous else self.strides  # the interface's way to say C order
        return {"shape": self.shape, "strides": strides, "typestr": self.dtype.str,
                "data": (self.ptr, False), "version": 3, "stream": None}


def device_array(shape, dtype) -> DeviceArray:
    """Uninitialised C-ordered device memory."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)
    dtype = np.dtype(dtype)
    strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) * dtype.itemsize for i in range(len(shape)))
    allocation = _Allocation(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
    return DeviceArray(allocation, allocation.ptr.value, shape, strides, dtype)


def device_full(shape, dtype, value) -> DeviceArray:
    """C-ordered device memory of a 4-byte ``dtype``, every item ``value`` (its bits in
    ``dtype``: NaN as float32 is 0x7FC00000, as ``np.full`` makes it), filled on the device
    (cuMemsetD32) rather than made on the host and sent."""
    dtype = np.dtype(dtype)
    if dtype.itemsize != 4:
        raise ValueError(f"device_full fills 4-byte items, not {dtype}")
    pattern = int(np.array(value, dtype).view(np.uint32))
    array = device_array(shape, dtype)
    if array.size:
        driver._call("cuMemsetD32_v2", ctypes.c_uint64(array.ptr), ctypes.c_uint(pattern), ctypes.c_size_t(array.size))
    return array


def to_device(host: np.ndarray) -> DeviceArray:
    """A device copy of ``host`` in its own layout where it is C- or F-contiguous (as numba's
    ``cuda.to_device``), else made C-contiguous first."""
    fortran = host.flags.f_contiguous and not host.flags.c_contiguous
    host = host if fortran else np.ascontiguousarray(host)
    array = device_array(host.shape[::-1], host.dtype).T if fortran else device_array(host.shape, host.dtype)
    if host.nbytes:
        driver.ensure_context()._call("cuMemcpyHtoD_v2", ctypes.c_uint64(array.ptr),
                                      host.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(host.nbytes))
    return array


def synchronize() -> None:
    driver.ensure_context()._call("cuCtxSynchronize")


class Event:
    """A CUDA event on the default stream, as numba's ``cuda.event()``."""

    def __init__(self) -> None:
        self._event = ctypes.c_void_p()
        driver.ensure_context()._call("cuEventCreate", ctypes.byref(self._event), 0)

    def record(self) -> None:
        driver._call("cuEventRecord", self._event, None)

    def synchronize(self) -> None:
        driver._call("cuEventSynchronize", self._event)

    def elapsed_time(self, end: "Event") -> float:
        """Milliseconds from this event to ``end``."""
        ms = ctypes.c_float()
        driver._call("cuEventElapsedTime", ctypes.byref(ms), self._event, end._event)
        return ms.value

    def __del__(self) -> None:
        driver.release("cuEventDestroy_v2", self._event)


def event() -> Event:
    return Event()


# How each kernel parameter is packed: every one gets an 8-byte slot (struct format).
_SCALAR_FORMATS = {"int64": "q", "int32": "i4x", "uint64": "Q", "uint32": "I4x", "float32": "f4x", "float64": "d",
                   "bool": "?7x"}


def argument_type(value) -> str:
    """The numba type of a kernel argument, spelled as :mod:`gpu.cubin_cache` keys kernels:
    ``array(float32, 2d, C)`` for arrays (dtype, dimensions, numba layout), the scalar's type
    name otherwise (a Python int is int64 and a bool is bool, as numba types them)."""
    if isinstance(value, DeviceArray):
        return f"array({value.dtype.name}, {value.ndim}d, {value.numba_layout})"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int64" if isinstance(value, int) else np.dtype(type(value)).name
    if isinstance(value, (float, np.floating)):
        return "float64" if isinstance(value, float) else np.dtype(type(value)).name
    raise TypeError(f"no kernel argument type for {type(value).__name__}")


def _parameter_format(signature: Sequence[str]) -> str:
    """The struct format of a kernel's flattened parameters: an array is its data model's
    fields (meminfo, parent, nitems, itemsize, data, shape, strides), a scalar its C type."""
    parts = []
    for kind in signature:
        if kind.startswith("array("):
            ndim = int(kind.split(", ")[1].rstrip("d"))
            parts.append("QQqqQ" + "q" * (2 * ndim))
        else:
            parts.append(_SCALAR_FORMATS[kind])
    return "<" + "".join(parts)


class Kernel:
    """One compiled kernel, launched as numba's are: ``kernel[grid, block](*args)``.

    The parameters are packed into one buffer of 8-byte slots, reused by every launch (the
    driver copies them at the launch), with the pointer array to the slots built once."""

    def __init__(self, module: ctypes.c_void_p, function: ctypes.c_void_p, signature: Sequence[str]) -> None:
        self._module = module  # kept: unloading it would free the function
        self._function = function
        self.signature = tuple(signature)
        self._arrays = tuple(kind.startswith("array(") for kind in self.signature)
        self._format = struct.Struct(_parameter_format(self.signature))
        slots = self._format.size // 8
        self._buffer = ctypes.create_string_buffer(self._format.size)
        base = ctypes.addressof(self._buffer)
        self._pointers = (ctypes.c_void_p * slots)(*range(base, base + 8 * slots, 8))
        self._lock = threading.Lock()

    def __getitem__(self, config) -> "functools.partial":
        grid, block = config
        return functools.partial(self._launch, int(grid), int(block))

    def _launch(self, grid: int, block: int, *args) -> None:
        values: list = []
        for value, is_array in zip(args, self._arrays, strict=True):
            if is_array:
                values += (0, 0, value.size, value.dtype.itemsize, value.ptr, *value.shape, *value.strides)
            else:
                values.append(value)
        driver.ensure_context()
        with self._lock:  # one buffer per kernel
            self._format.pack_into(self._buffer, 0, *values)
            driver._call("cuLaunchKernel", self._function, grid, 1, 1, block, 1, 1, 0, None, self._pointers, None)


def load_kernel(cubin: bytes, entry: str, signature: Sequence[str]) -> Kernel:
    """Load ``cubin`` and return its kernel ``entry`` taking arguments of ``signature``."""
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    driver.ensure_context()._call("cuModuleLoadData", ctypes.byref(module), cubin)
    driver._call("cuModuleGetFunction", ctypes.byref(function), module, entry.encode())
    return Kernel(module, function, signature)
