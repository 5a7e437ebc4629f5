"""Device arrays, copies, fills, streams and events through the driver: the part of numba's
``numba.cuda`` API (``device_array``, ``to_device``, ``copy_to_host``, ``copy_to_device``,
``pinned_array``, ``stream``, ``event``, ``synchronize``) that a launch sequence uses,
without importing numba. A copy given a stream is queued on it (``cuMemcpy*Async``), as
numba's is; without one it is done when the call returns.

Device memory comes from the device's stream-ordered pool (``cuMemAllocAsync``) where it
has one. :class:`DeviceArray` has the ``__cuda_array_interface__``, so numba and CuPy take
these arrays as they are.
"""

from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from gpu.cuda.driver import driver
from gpu.cuda.host_memory import pinned_empty

__all__ = ["DeviceArray", "device_array", "device_view", "device_full", "to_device", "pinned_array", "synchronize",
           "Stream", "stream", "Event", "event"]


def _release(name: str, *args) -> None:
    """``driver.release`` from a finaliser: at interpreter exit, where the module's globals may
    already be gone, nothing (the context's end frees what is left). Finalisers take it as a
    default argument, bound while the module is whole."""
    release = getattr(driver, "release", None)
    if release is not None:
        release(name, *args)


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
            driver.call("cuMemAllocAsync", ctypes.byref(self.ptr), size, None)
        else:
            driver.call("cuMemAlloc_v2", ctypes.byref(self.ptr), size)

    def __del__(self, _release=_release) -> None:
        if self.pooled:
            _release("cuMemFreeAsync", self.ptr, None)
        else:
            _release("cuMemFree_v2", self.ptr)


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

    def reshape(self, *shape) -> "DeviceArray":
        """A C-contiguous array's view in another shape of as many items (one ``-1`` allowed)."""
        shape = tuple(int(n) for n in (shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape))
        if -1 in shape:
            known = math.prod(n for n in shape if n != -1)
            shape = tuple(self.size // known if n == -1 and known else n for n in shape)
        if math.prod(shape) != self.size:
            raise ValueError(f"cannot reshape {self.size} items into {shape}")
        if not self.is_c_contiguous:
            raise ValueError("reshape takes a contiguous device array")
        return DeviceArray(self._allocation, self.ptr, shape, _c_strides(shape, self.dtype), self.dtype)

    @property
    def T(self) -> "DeviceArray":
        """The transposed view (axes reversed), as numpy's ``.T``."""
        return DeviceArray(self._allocation, self.ptr, self.shape[::-1], self.strides[::-1], self.dtype)

    def copy_to_host(self, ary: np.ndarray | None = None, stream=0) -> np.ndarray:
        """This array's contents in ``ary`` (C-contiguous, of this shape and dtype), as
        numba's ``copy_to_host(ary)``, or in a new C-ordered array of page-locked memory
        (:func:`pinned_empty`), which the driver fills by DMA; queued on ``stream`` where
        one is given (``ary`` is filled once it is done)."""
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
            _copy("cuMemcpyDtoH", stream, host.ctypes.data_as(ctypes.c_void_p), ctypes.c_uint64(self.ptr),
                  ctypes.c_size_t(host.nbytes))
        return host

    def copy_to_device(self, host: np.ndarray, stream=0) -> None:
        """Fill this C-contiguous array with ``host`` (of its shape and dtype), as numba's
        ``copy_to_device``; queued on ``stream`` where one is given."""
        host = np.ascontiguousarray(host)
        if not self.is_c_contiguous or host.shape != self.shape or host.dtype != self.dtype:
            raise ValueError(f"copy_to_device fills a contiguous {self.dtype} array of shape {self.shape} from one "
                             f"like it, not a {host.dtype} array of shape {host.shape}")
        if host.nbytes:
            _copy("cuMemcpyHtoD", stream, ctypes.c_uint64(self.ptr), host.ctypes.data_as(ctypes.c_void_p),
                  ctypes.c_size_t(host.nbytes))

    @property
    def __cuda_array_interface__(self) -> dict:
        strides = None if self.is_c_contiguous else self.strides  # the interface's way to say C order
        return {"shape": self.shape, "strides": strides, "typestr": self.dtype.str,
                "data": (self.ptr, False), "version": 3, "stream": None}


def _c_strides(shape: tuple[int, ...], dtype: np.dtype) -> tuple[int, ...]:
    # plain ints: every launch from a CuPy array views it anew, and np.prod cost ~18 µs a view
    strides, stride = [], dtype.itemsize
    for n in reversed(shape):
        strides.append(stride)
        stride *= n
    return tuple(reversed(strides))


def device_array(shape, dtype) -> DeviceArray:
    """Uninitialised C-ordered device memory."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)
    dtype = np.dtype(dtype)
    allocation = _Allocation(math.prod(shape) * dtype.itemsize)
    return DeviceArray(allocation, allocation.ptr.value, shape, _c_strides(shape, dtype), dtype)


def device_view(array) -> DeviceArray:
    """A :class:`DeviceArray` viewing the memory of any device array with the CUDA array
    interface (CuPy's, numba's), which it keeps alive; no copy, no synchronisation: the
    array's work must be queued on the legacy default stream, as CuPy's and ours are."""
    if isinstance(array, DeviceArray):
        return array
    interface = array.__cuda_array_interface__
    shape, dtype = tuple(interface["shape"]), np.dtype(interface["typestr"])
    strides = tuple(interface["strides"]) if interface.get("strides") else _c_strides(shape, dtype)
    return DeviceArray(array, interface["data"][0], shape, strides, dtype)


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
        driver.call("cuMemsetD32_v2", ctypes.c_uint64(array.ptr), ctypes.c_uint(pattern), ctypes.c_size_t(array.size))
    return array


def to_device(host: np.ndarray, stream=0) -> DeviceArray:
    """A device copy of ``host`` in its own layout where it is C- or F-contiguous (as numba's
    ``cuda.to_device``), else made C-contiguous first; queued on ``stream`` where one is
    given (``host`` must then stay as it is until the stream has copied it)."""
    fortran = host.flags.f_contiguous and not host.flags.c_contiguous
    host = host if fortran else np.ascontiguousarray(host)
    array = device_array(host.shape[::-1], host.dtype).T if fortran else device_array(host.shape, host.dtype)
    if host.nbytes:
        _copy("cuMemcpyHtoD", stream, ctypes.c_uint64(array.ptr), host.ctypes.data_as(ctypes.c_void_p),
              ctypes.c_size_t(host.nbytes))
    return array


def _copy(function: str, stream, *args) -> None:
    """``function`` (cuMemcpyHtoD or cuMemcpyDtoH) now, or its Async form queued on ``stream``."""
    if isinstance(stream, Stream):
        driver.ensure_context().call(f"{function}Async_v2", *args, stream.handle)
    else:
        driver.ensure_context().call(f"{function}_v2", *args)


def pinned_array(shape, dtype) -> np.ndarray:
    """A C-ordered host array in page-locked memory (:func:`pinned_empty`), as numba's
    ``cuda.pinned_array``: the CUDA context is created first, so that it is one."""
    driver.ensure_context()
    return pinned_empty(shape, dtype)


def synchronize() -> None:
    driver.ensure_context().call("cuCtxSynchronize")


class Stream:
    """A CUDA stream, as numba's ``cuda.stream()``: blocking (cuStreamCreate's flags 0), so
    that work on it is ordered with the legacy default stream's, where the arrays are
    allocated and freed."""

    def __init__(self) -> None:
        self.handle = ctypes.c_void_p()
        driver.ensure_context().call("cuStreamCreate", ctypes.byref(self.handle), 0)

    def synchronize(self) -> None:
        driver.ensure_context().call("cuStreamSynchronize", self.handle)

    def __del__(self, _release=_release) -> None:
        _release("cuStreamDestroy_v2", self.handle)


def stream() -> Stream:
    return Stream()


class Event:
    """A CUDA event on the default stream, as numba's ``cuda.event()``."""

    def __init__(self) -> None:
        self._event = ctypes.c_void_p()
        driver.ensure_context().call("cuEventCreate", ctypes.byref(self._event), 0)

    def record(self) -> None:
        driver.call("cuEventRecord", self._event, None)

    def synchronize(self) -> None:
        driver.call("cuEventSynchronize", self._event)

    def elapsed_time(self, end: "Event") -> float:
        """Milliseconds from this event to ``end``."""
        ms = ctypes.c_float()
        driver.call("cuEventElapsedTime", ctypes.byref(ms), self._event, end._event)
        return ms.value

    def __del__(self, _release=_release) -> None:
        _release("cuEventDestroy_v2", self._event)


def event() -> Event:
    return Event()

