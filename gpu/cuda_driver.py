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
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import struct
import sys
import threading
from typing import Sequence

import numpy as np

__all__ = ["CudaDriverError", "library_name", "driver", "DeviceArray", "Event", "Kernel", "to_device", "device_array", "event",
           "load_kernel", "synchronize"]


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

    def release(self, function: str, handle) -> None:
        """Free a resource from a finaliser: no lock (a finaliser may run inside a locked
        section), the context made current first (the finaliser's thread may have none),
        errors ignored (at interpreter exit the context may already be gone)."""
        try:
            self._lib.cuCtxSetCurrent(self._context)
            getattr(self._lib, function)(handle)
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
        return self

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


class _Allocation:
    """Device memory, freed when the last array viewing it is gone."""

    def __init__(self, nbytes: int) -> None:
        self.ptr = ctypes.c_uint64()
        self.nbytes = nbytes
        driver.ensure_context()._call("cuMemAlloc_v2", ctypes.byref(self.ptr), ctypes.c_size_t(max(nbytes, 1)))

    def __del__(self) -> None:
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

    def copy_to_host(self) -> np.ndarray:
        """A new host array with this array's contents (C order)."""
        if not self.is_c_contiguous:
            raise ValueError("copy_to_host takes a contiguous device array")
        host = np.empty(self.shape, self.dtype)
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
