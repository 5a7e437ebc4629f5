"""The first-use compile notice: will a numba call compile, and saying so before it does.

A kernel missing from the cache (``cache=True``, under ``NUMBA_CACHE_DIR``) compiles on
first use, which for the generated kernels is a pause long enough to look like a hang
(docs/decisions/kernel-warmup.md has the compile times). Reading numba's index file for
the function (a small pickle) tells ahead of time, with no compile. ``fibertensor warmup``
fills the cache.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

__all__ = ["is_compiled", "announce_compile", "notice_compile", "compiling_on_purpose"]

logger = logging.getLogger("fibertensor.kernels")
_announced: set[str] = set()
_checked: set[int] = set()
_on_purpose = False


def is_compiled(dispatcher, args: tuple) -> bool:
    """True when ``dispatcher(*args)`` (a numba ``njit`` or ``cuda.jit`` dispatcher) finds its
    machine code in this process or in numba's on-disk cache, so it will not compile.

    Keyed as numba keys it: argument types, target (CPU model, GPU compute capability) and
    the function's bytecode; an index written for another source file version is stale.
    """
    cache = getattr(dispatcher, "_cache", None)
    if cache is None:  # the CUDA simulator: nothing compiles
        return True
    try:
        sig = tuple(dispatcher.typeof_pyval(a) for a in args)
        if sig in dispatcher.overloads:
            return True
        key = cache._index_key(sig, dispatcher.targetctx.codegen())
        return key in cache._cache_file._load_index()
    except Exception:  # numba's cache internals are private: if they moved, no answer and no notice
        return True


def announce_compile(what: str, seconds: float | None) -> None:
    """Say once per process, on stderr when logging is not configured, that ``what`` compiles
    now, and how to avoid it. ``seconds``: its compile time measured on an idle 2-core machine
    (None: not measured), given as such: a compile takes several times longer where other work
    holds the cores (docs/decisions/kernel-warmup.md), so a single figure misleads."""
    if what in _announced or _on_purpose:
        return
    _announced.add(what)
    took = ("seconds to minutes" if seconds is None else
            f"{seconds:.0f} s on an idle 2-core machine, several times that on busy cores")
    logger.warning(
        "compiling %s into numba's cache (first use; %s). "
        "Run `fibertensor warmup` once to compile every kernel ahead of time.", what, took,
    )


def notice_compile(dispatcher, args: tuple, what: str, seconds: float | None) -> None:
    """:func:`announce_compile` if ``dispatcher(*args)`` is about to compile; each dispatcher
    is looked up once per process (a later call costs a set lookup, not a cache read), for
    kernels launched many times."""
    if id(dispatcher) in _checked:
        return
    _checked.add(id(dispatcher))
    if not is_compiled(dispatcher, args):
        announce_compile(what, seconds)


@contextlib.contextmanager
def compiling_on_purpose() -> Iterator[None]:
    """No notices inside: the caller compiles on purpose (``fibertensor warmup``)."""
    global _on_purpose
    before, _on_purpose = _on_purpose, True
    try:
        yield
    finally:
        _on_purpose = before
