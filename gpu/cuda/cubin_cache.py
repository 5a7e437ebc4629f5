"""Cubins of numba-compiled CUDA kernels kept on disk, so that a fresh process launches them
through :mod:`gpu.cuda.kernel_launch` without importing numba.

numba's own cache (``cache=True``) holds the same machine code, but only numba can read it,
and importing numba and its CUDA target costs a fresh process more than the rest of a job
on a GPU (docs/decisions/cubin-driver-path.md). After numba has compiled or loaded a
kernel, :meth:`CubinCache.save` writes each of its compiled signatures as ``<folder>/<kernel>-<signature hash>.cubin`` with a ``.json`` naming the
entry point and the argument types. The folder is ``<kernel cache>/cubins/<key>``, where
``<key>`` hashes the text of the source files that define the kernels, the numba versions
and the GPU's compute capability: an edited kernel, another numba or another GPU never
finds a stale cubin. With a numba-cuda outside the range whose kernel-argument layout the
launch packs (:data:`gpu.cuda.kernel_launch.NUMBA_CUDA_VERSIONS`) no cubin is loaded or
saved: the kernels launch through numba.

The kernel cache folder: :func:`gpu.cuda.cache_folder.kernel_cache_dir`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import threading
from importlib import metadata
from pathlib import Path
from typing import Iterable

from gpu.cuda import kernel_launch
from gpu.cuda.cache_folder import CACHE_ENV, kernel_cache_dir, write_once
from gpu.cuda.driver import driver

__all__ = ["CubinCache"]

logger = logging.getLogger("fibertensor.kernels")


def _numba_versions() -> str:
    versions = []
    for name in ("numba", "numba-cuda"):
        try:
            versions.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
    return ",".join(versions)


def _signature_name(numba_type) -> str:
    """A numba argument type spelled as :func:`gpu.cuda.kernel_launch.argument_type` spells values."""
    if hasattr(numba_type, "layout") and hasattr(numba_type, "ndim"):
        return f"array({numba_type.dtype}, {numba_type.ndim}d, {numba_type.layout})"
    return str(numba_type)


class CubinCache:
    """The cubins of the kernels defined in ``sources`` (files whose text decides them)."""

    def __init__(self, sources: Iterable[Path]) -> None:
        self._sources = sorted(Path(p) for p in sources)
        self._lock = threading.Lock()
        self._loaded: dict[tuple[str, tuple[str, ...]], kernel_launch.Kernel | None] = {}

    @functools.cached_property
    def folder(self) -> Path:
        digest = hashlib.sha256()
        for path in self._sources:
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
        major, minor = driver.compute_capability()
        digest.update(f"{_numba_versions()};sm_{major}{minor}".encode())
        return kernel_cache_dir() / "cubins" / digest.hexdigest()[:24]

    def _stem(self, name: str, signature: tuple[str, ...]) -> Path:
        return self.folder / f"{name}-{hashlib.sha256(repr(signature).encode()).hexdigest()[:16]}"

    def kernel(self, name: str, args: tuple) -> kernel_launch.Kernel | None:
        """Kernel ``name`` compiled for the types of ``args``, loaded from its cubin; None
        when no cubin for them was saved, or numba-cuda's argument layout is not the one
        the launch packs."""
        if not kernel_launch.launch_layout_supported():
            return None
        signature = tuple(kernel_launch.argument_type(a) for a in args)
        key = (name, signature)
        with self._lock:
            if key not in self._loaded:
                stem = self._stem(name, signature)
                try:
                    entry = json.loads(stem.with_suffix(".json").read_text())["entry"]
                    cubin = stem.with_suffix(".cubin").read_bytes()
                except (OSError, ValueError, KeyError):
                    return None
                self._loaded[key] = kernel_launch.load_kernel(cubin, entry, signature)
            return self._loaded[key]

    def save(self, name: str, dispatcher) -> None:
        """Write the cubin of every signature numba compiled ``dispatcher`` (a ``cuda.jit``
        dispatcher) for, unless it is there already. A cache folder that cannot be written
        costs later processes their fast start, not this run: it is logged, not raised.
        Nothing is saved where :meth:`kernel` would not load it."""
        if not kernel_launch.launch_layout_supported():
            return
        for overload in list(dispatcher.overloads.values()):
            signature = tuple(_signature_name(t) for t in overload.argument_types)
            stem = self._stem(name, signature)
            if stem.with_suffix(".json").exists():
                continue
            library = overload._codelibrary  # numba's code library: the linked cubin and its entry point
            cubin = library.get_cubin()
            try:
                # numba-cuda hands a cuda.core ObjectCode (its bytes in .code), older numba bytes.
                write_once(stem.with_suffix(".cubin"), bytes(getattr(cubin, "code", cubin)))
                # The .json last: it is what marks the pair complete.
                write_once(stem.with_suffix(".json"), json.dumps(
                    {"entry": library._entry_name, "signature": list(signature)}).encode())
            except OSError as exc:
                logger.warning("cannot save the cubin of %s in %s (%s); set %s to a writable folder for a "
                               "faster start", name, stem.parent, exc.strerror or exc, CACHE_ENV)
                return
