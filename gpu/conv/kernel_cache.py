"""The generated conv kernels, written to a cache folder at first use.

Each kernel is one module file, ``<cache>/<key>/<kernel name>.py``, where ``<key>`` hashes
the generator's source (:mod:`gpu.conv.codegen` and the shape tables of
:mod:`gpu.conv.kernel_shapes`, read as files, not imported) and the name states the
kernel's parameters. The first process that needs a kernel imports the generator, writes
the file under a temporary name and links it into place (atomic, and never replacing a
file a concurrent process linked first); every later use imports the file. It is a real
file that never changes, so numba's on-disk cache (``cache=True``, keyed by the file's
path and modification time) compiles each kernel once per machine, not once per process.
One file per kernel, not one module per family: a module's import time grows with its
kernels (docs/decisions/conv-kernel-per-file.md).

The cache folder is ``$FIBERTENSOR_KERNEL_CACHE``, else ``$XDG_CACHE_HOME/fibertensor/kernels``,
else ``~/.cache/fibertensor/kernels``. Files from an older generator stay in their own
``<key>`` folder and can be deleted at any time.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Callable

from gpu.cuda.compile_notice import notice_compile
from gpu.cuda.cache_folder import CACHE_ENV, kernel_cache_dir, write_once
from gpu.conv.kernel_shapes import (CP_RANKS, cp_lean_name, cp_lean_variants, cp_taps_name, tucker_core_name,
                                    tucker_row_variants, tucker_square_variants, TUCKER_TILES)

__all__ = ["CACHE_ENV", "COMPILE_SECONDS", "kernel_cache_dir", "generator_key", "kernel_path", "cp_taps_kernel",
           "cp_lean_kernel", "tucker_core_kernel", "tucker_core_variants", "notice_conv_compile"]

#: Seconds a conv kernel's first use compiles, what the first-use notice tells: the CPU loops
#: on the shared 2-core developer VM (2026-11-24, fresh cache, load ~1); a CUDA kernel: not
#: measured yet (None: the notice gives no figure).
COMPILE_SECONDS = {"cpu": {"_cp_conv_cpu": 3.3, "_core_conv_cpu": 1.4}, "cuda": {}}
#: The files whose text decides the generated source (hashed into the folder name).
_GENERATOR_FILES = ("codegen.py", "kernel_shapes.py")

_lock = threading.Lock()
_loaded: dict[Path, ModuleType] = {}


@functools.cache
def generator_key() -> str:
    """The first 16 hex digits of the SHA-256 of the generator's files."""
    digest = hashlib.sha256()
    for name in _GENERATOR_FILES:
        digest.update(Path(__file__).with_name(name).read_bytes())
    return digest.hexdigest()[:16]


def kernel_path(name: str) -> Path:
    """Where the module of kernel ``name`` is (or will be) written."""
    return kernel_cache_dir() / generator_key() / f"{name}.py"


def _write_once(path: Path, source: str) -> None:
    # gpu.cuda.cache_folder.write_once links, never renames: a file already in place stays (same
    # text), so the modification time numba's cache index recorded for it stays valid.
    try:
        write_once(path, source.encode())
    except OSError as exc:
        raise OSError(f"cannot write the generated conv kernel {path} ({exc.strerror or exc}); set {CACHE_ENV} "
                      "to a writable folder") from exc


def _kernel(name: str, source: Callable[[], str]):
    """Kernel ``name`` from its cached module, written from ``source()`` if absent."""
    path = kernel_path(name)
    with _lock:
        module = _loaded.get(path)
        if module is None:
            if not path.is_file():
                _write_once(path, source())
            spec = importlib.util.spec_from_file_location(f"fibertensor_kernels_{generator_key()}.{name}", path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
            _loaded[path] = module
    return getattr(module, name)


def _codegen():
    # the one place running code reaches the generator, and only for a kernel not yet written
    from gpu.conv import codegen

    return codegen


def cp_taps_kernel(rank: int):
    """The Algorithm 2 CP kernel of ``rank`` (1–16, :func:`gpu.conv.codegen.cp_kernel_source`)."""
    if rank not in CP_RANKS:
        raise ValueError(f"no Algorithm 2 CP kernel for rank {rank}: ranks {CP_RANKS[0]}–{CP_RANKS[-1]} are "
                         "generated; run larger ranks as rank chunks")
    return _kernel(cp_taps_name(rank), lambda: _codegen().cp_taps_module_source(rank))


def cp_lean_kernel(rank: int, ns: int, px1: int, px4: int):
    """The lean separable CP kernel (rank, ns, px1, px4) (:func:`gpu.conv.codegen.cp_lean_kernel_source`)."""
    if (rank, ns, px1, px4) not in cp_lean_variants():
        raise ValueError(f"no lean separable CP kernel (rank, ns, px1, px4) = {(rank, ns, px1, px4)}; the "
                         "generated ones are gpu.conv.kernel_shapes.cp_lean_variants()")
    return _kernel(cp_lean_name(rank, ns, px1, px4), lambda: _codegen().cp_lean_module_source(rank, ns, px1, px4))


def tucker_core_variants() -> tuple[tuple[int, int, int, int, int], ...]:
    """Every generated Tucker core kernel as (TH, TW, KH, KW, TN), the variant
    :func:`gpu.conv.tucker.core_kernel_variant` picks: the generic one per tile (KH = KW = 0),
    the row kernels (KH = 0) and the k×k ones."""
    return (tuple((th, tw, 0, 0, 1) for th, tw in TUCKER_TILES)
            + tuple((th, tw, 0, kw, tn) for th, tw, kw, tn in tucker_row_variants())
            + tuple((th, tw, k, k, tn) for th, tw, k, tn in tucker_square_variants()))


def tucker_core_kernel(th: int, tw: int, kh: int, kw: int, tn: int):
    """The Tucker core kernel of a variant (TH, TW, KH, KW, TN) as
    :func:`gpu.conv.tucker.core_kernel_variant` gives it."""
    if (th, tw, kh, kw, tn) not in _tucker_core_set():
        raise ValueError(f"no generated Tucker core kernel for the variant (TH, TW, KH, KW, TN) = "
                         f"{(th, tw, kh, kw, tn)}; see gpu.conv.kernel_shapes")
    return _kernel(tucker_core_name(th, tw, kh, kw, tn),
                   lambda: _codegen().tucker_core_module_source(th, tw, kh, kw, tn))


@functools.cache
def _tucker_core_set() -> frozenset:
    return frozenset(tucker_core_variants())


def notice_conv_compile(dispatcher, args: tuple, backend: str) -> None:
    """The first-use compile notice (:func:`gpu.cuda.compile_notice.notice_compile`) for a conv
    kernel or CPU loop about to run on ``args``."""
    name = dispatcher.__name__
    notice_compile(dispatcher, args, f"the {backend.upper()} conv kernel {name}", COMPILE_SECONDS[backend].get(name))
