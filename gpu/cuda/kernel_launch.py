"""Launching a numba-compiled kernel from its cubin, through the driver, without numba.

A launch passes the kernel's parameters as numba-cuda lays them out (its
``_Kernel._prepare_args``): an array as its data model's fields, flattened (meminfo,
parent, nitems, itemsize, data, shape..., strides...), a scalar as its C type. That layout
is numba-cuda's, not a documented interface, so this path runs only where numba-cuda's
release is one whose layout was read and tested (:data:`NUMBA_CUDA_VERSIONS`); elsewhere
the kernels launch through numba. Why the path exists: docs/decisions/cubin-driver-path.md.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import re
import struct
import threading
from importlib import metadata
from typing import Sequence

import numpy as np

from gpu.cuda.device_arrays import DeviceArray
from gpu.cuda.driver import CudaDriverError, driver

__all__ = ["NUMBA_CUDA_VERSIONS", "numba_cuda_specifier", "launch_layout_supported", "argument_type", "Kernel",
           "load_kernel"]

logger = logging.getLogger("fibertensor.kernels")

#: The numba-cuda releases whose kernel-argument layout :class:`Kernel` packs: (lowest,
#: first one above) as (major, minor). pyproject.toml's ``cuda`` extra pins the same range.
NUMBA_CUDA_VERSIONS = ((0, 4), (0, 31))

# How each kernel parameter is packed: every one gets an 8-byte slot (struct format).
_SCALAR_FORMATS = {"int64": "q", "int32": "i4x", "uint64": "Q", "uint32": "I4x", "float32": "f4x", "float64": "d",
                   "bool": "?7x"}


class UnsupportedNumbaCuda(CudaDriverError):
    """The installed numba-cuda may lay kernel arguments out otherwise than :class:`Kernel` packs them."""


def numba_cuda_specifier() -> str:
    """:data:`NUMBA_CUDA_VERSIONS` as a requirement specifier (``>=0.4,<0.31``)."""
    (low_major, low_minor), (high_major, high_minor) = NUMBA_CUDA_VERSIONS
    return f">={low_major}.{low_minor},<{high_major}.{high_minor}"


def _installed_numba_cuda() -> str | None:
    try:
        return metadata.version("numba-cuda")
    except metadata.PackageNotFoundError:
        return None


@functools.cache
def launch_layout_supported() -> bool:
    """Whether the installed numba-cuda is one of :data:`NUMBA_CUDA_VERSIONS` (read from its
    package metadata: numba is not imported). Said once in the log when it is not."""
    version = _installed_numba_cuda()
    release = re.match(r"(\d+)\.(\d+)", version or "")
    low, high = NUMBA_CUDA_VERSIONS
    if release and low <= (int(release[1]), int(release[2])) < high:
        return True
    logger.warning("numba-cuda %s is not one whose kernel-argument layout the cubin launch path packs (numba-cuda%s):"
                   " kernels launch through numba, which costs a fresh process its fast start; "
                   "install a numba-cuda in that range (pip install 'fibertensor[cuda]')",
                   version or "(not installed)", numba_cuda_specifier())
    return False


@functools.cache
def _dtype_name(dtype: np.dtype) -> str:
    # numpy computes dtype.name in Python (~8 µs), and every launch types its arrays
    return dtype.name


def argument_type(value) -> str:
    """The numba type of a kernel argument, spelled as :mod:`gpu.cuda.cubin_cache` keys kernels:
    ``array(float32, 2d, C)`` for arrays (dtype, dimensions, numba layout), the scalar's type
    name otherwise (a Python int is int64 and a bool is bool, as numba types them)."""
    if isinstance(value, DeviceArray):
        return f"array({_dtype_name(value.dtype)}, {value.ndim}d, {value.numba_layout})"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int64" if isinstance(value, int) else np.dtype(type(value)).name
    if isinstance(value, (float, np.floating)):
        return "float64" if isinstance(value, float) else np.dtype(type(value)).name
    raise TypeError(f"no kernel argument type for {type(value).__name__}")


def parameter_formats(signature: Sequence[str]) -> list[str]:
    """The struct format of each flattened parameter of a kernel taking ``signature``: an
    array is its data model's fields (meminfo, parent, nitems, itemsize, data, shape,
    strides), a scalar its C type; each in an 8-byte slot."""
    formats = []
    for kind in signature:
        if kind.startswith("array("):
            ndim = int(kind.split(", ")[1].rstrip("d"))
            formats += ["Q", "Q", "q", "q", "Q"] + ["q"] * (2 * ndim)
        else:
            formats.append(_SCALAR_FORMATS[kind])
    return formats


def parameter_values(signature: Sequence[str], args: Sequence) -> list:
    """The flattened parameters of ``args`` (device arrays and scalars) for ``signature``,
    one value per entry of :func:`parameter_formats`."""
    values: list = []
    for value, kind in zip(args, signature, strict=True):
        if kind.startswith("array("):
            values += (0, 0, value.size, value.dtype.itemsize, value.ptr, *value.shape, *value.strides)
        else:
            values.append(value)
    return values


class Kernel:
    """One compiled kernel, launched as numba's are: ``kernel[grid, block](*args)``, with a
    stream and dynamic shared memory where given (:meth:`__getitem__`).

    The parameters are packed into one buffer of 8-byte slots, reused by every launch (the
    driver copies them at the launch), with the pointer array to the slots built once."""

    def __init__(self, module: ctypes.c_void_p, function: ctypes.c_void_p, signature: Sequence[str]) -> None:
        self._module = module  # kept: unloading it would free the function
        self._function = function
        self.signature = tuple(signature)
        self._format = struct.Struct("<" + "".join(parameter_formats(self.signature)))
        slots = self._format.size // 8
        self._buffer = ctypes.create_string_buffer(self._format.size)
        base = ctypes.addressof(self._buffer)
        self._pointers = (ctypes.c_void_p * slots)(*range(base, base + 8 * slots, 8))
        self._lock = threading.Lock()

    def __getitem__(self, config) -> "functools.partial":
        """``kernel[grid, block]``, ``kernel[grid, block, stream]`` or ``kernel[grid, block,
        stream, shared_bytes]`` as numba takes them: one-dimensional grid and block, a stream
        of :mod:`gpu.cuda.device_arrays` or 0 (the legacy default stream), and the bytes of
        dynamic shared memory (``cuda.shared.array(0, ...)``) a block gets."""
        grid, block, stream, shared_bytes = (*config, 0, 0)[:4]
        return functools.partial(self._launch, int(grid), int(block), _stream_handle(stream), int(shared_bytes))

    def _launch(self, grid: int, block: int, stream: ctypes.c_void_p | None, shared_bytes: int, *args) -> None:
        values = parameter_values(self.signature, args)
        driver.ensure_context()
        with self._lock:  # one buffer per kernel
            self._format.pack_into(self._buffer, 0, *values)
            driver.call("cuLaunchKernel", self._function, grid, 1, 1, block, 1, 1, shared_bytes, stream,
                        self._pointers, None)


def _stream_handle(stream) -> ctypes.c_void_p | None:
    """The driver's handle of a launch's stream: None (the legacy default stream) for 0."""
    if isinstance(stream, (int, np.integer)) and stream == 0:
        return None
    return stream.handle


def load_kernel(cubin: bytes, entry: str, signature: Sequence[str]) -> Kernel:
    """Load ``cubin`` and return its kernel ``entry`` taking arguments of ``signature``."""
    if not launch_layout_supported():
        raise UnsupportedNumbaCuda(f"numba-cuda {_installed_numba_cuda() or '(not installed)'} may pass kernel "
                                   f"arguments otherwise than this launch packs them; install numba-cuda"
                                   f"{numba_cuda_specifier()} or launch through numba")
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    driver.ensure_context().call("cuModuleLoadData", ctypes.byref(module), cubin)
    driver.call("cuModuleGetFunction", ctypes.byref(function), module, entry.encode())
    return Kernel(module, function, signature)
