"""A family's CUDA kernels, arrays and events, launched from saved cubins on a GPU and through
numba under the CUDA simulator.

A family (peaks, fod, fixels) names its kernels, how numba finds each one (importing numba
and the module that defines it), the source files whose text decides the compiled code and
what a first compile is announced as: a :class:`KernelFamily`. Its :meth:`KernelFamily.kernels`
hands a launch sequence one object with ``api`` (``device_array``, ``to_device``, ``event``,
``pinned_array``, ``stream``, ``synchronize``), ``full`` and ``kernels[name][grid, block(,
stream, shared bytes)](*args)``, the same under the simulator and on a GPU:

- under the simulator, numba's ``numba.cuda`` and dispatchers (:class:`NumbaKernels`);
- on a GPU, :mod:`gpu.cuda.device_arrays` and each kernel launched from its cubin in
  :mod:`gpu.cuda.cubin_cache` (:class:`DriverKernels`), so that a fresh process needs no
  numba; a kernel with no cubin yet runs through numba once (compiled, or loaded from
  numba's cache, with the first-use notice where it compiles) and its cubin is saved then.

Why: docs/decisions/cubin-driver-path.md.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from gpu.cuda.simulator import simulator_active

__all__ = ["KernelFamily", "NumbaKernels", "DriverKernels", "CachedKernel"]

#: Kernel name → its numba dispatcher (imports numba and the kernels' module).
Lookup = Callable[[str], object]
#: What a first compile of the family's kernels is announced as: (what, seconds on an idle
#: 2-core machine or None), asked only when numba is about to compile.
Notice = Callable[[], "tuple[str, float | None]"]


class NumbaKernels:
    """Arrays, events and kernels of numba itself: the CUDA simulator's path."""

    def __init__(self, lookup: Lookup) -> None:
        from numba import cuda

        self.api = cuda
        self._lookup = lookup

    def __getitem__(self, name: str):
        return self._lookup(name)

    def full(self, shape, dtype, value):
        """A device array of ``value``, made on the host and sent."""
        return self.api.to_device(np.full(shape, value, dtype))


class CachedKernel:
    """Kernel ``name`` launched from its cubin (:class:`gpu.cuda.cubin_cache.CubinCache`) when
    one was saved for the arguments' types, else through numba, which compiles or loads it
    (announced by ``notice`` when it must compile) and whose cubin is then saved for the
    next process."""

    def __init__(self, cubins, name: str, lookup: Lookup, notice: Notice) -> None:
        self._cubins, self._name, self._lookup, self._notice = cubins, name, lookup, notice

    def __getitem__(self, config):
        def launch(*args) -> None:
            kernel = self._cubins.kernel(self._name, args)
            if kernel is not None:
                kernel[config](*args)
                return
            from numba import cuda

            from gpu.cuda.compile_notice import announce_compile, is_compiled

            # As numba's own arrays, which it types by their layout ('C' where contiguous,
            # the faster kernel); through the array interface it would type them 'A'.
            args = tuple(cuda.as_cuda_array(a) if hasattr(a, "__cuda_array_interface__") else a for a in args)
            dispatcher = self._lookup(self._name)
            if not is_compiled(dispatcher, args):
                announce_compile(*self._notice())
            dispatcher[_numba_config(config)](*args)
            self._cubins.save(self._name, dispatcher)

        return launch


def _numba_config(config: tuple) -> tuple:
    """A launch configuration as numba takes it: a :class:`gpu.cuda.device_arrays.Stream` as
    numba's stream of the same handle, so that the launch keeps its place among the copies
    queued there."""
    if len(config) < 3 or not hasattr(config[2], "handle"):
        return config
    from numba import cuda

    return (*config[:2], cuda.external_stream(config[2].handle.value), *config[3:])


class DriverKernels:
    """Arrays and events of :mod:`gpu.cuda.device_arrays` and cached cubins: a GPU's path,
    which imports numba only for a kernel whose cubin is not cached yet."""

    def __init__(self, cubins, lookup: Lookup, notice: Notice) -> None:
        from gpu.cuda import device_arrays

        self.api = device_arrays
        self._cubins, self._lookup, self._notice = cubins, lookup, notice

    def __getitem__(self, name: str) -> CachedKernel:
        return CachedKernel(self._cubins, name, self._lookup, self._notice)

    def full(self, shape, dtype, value):
        """Filled on the device (cuMemsetD32), not made on the host and sent."""
        return self.api.device_full(shape, dtype, value)


class KernelFamily:
    """The CUDA kernels of one family.

    Parameters
    ----------
    sources : iterable of Path
        The files whose text decides the kernels' machine code (the folder of the cubins).
    lookup : callable
        Kernel name → its numba dispatcher; called only where numba launches the kernel.
    """

    def __init__(self, sources: Iterable[Path], lookup: Lookup) -> None:
        self._sources = tuple(sources)
        self._lookup = lookup
        self._lock = threading.Lock()
        self._cubins = None

    @property
    def cubins(self):
        """The family's :class:`gpu.cuda.cubin_cache.CubinCache`, made on first use."""
        with self._lock:
            if self._cubins is None:
                from gpu.cuda.cubin_cache import CubinCache

                self._cubins = CubinCache(self._sources)
            return self._cubins

    def kernels(self, notice: Notice) -> NumbaKernels | DriverKernels:
        """Numba's kernels and arrays under the CUDA simulator, else the driver's and the
        cubins'; ``notice`` says what a compile is announced as."""
        if simulator_active():
            return NumbaKernels(self._lookup)
        return DriverKernels(self.cubins, self._lookup, notice)
