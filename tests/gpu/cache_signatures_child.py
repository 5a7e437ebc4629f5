"""One process of tests/gpu/test_numba_cache.py's race between two processes that save two
signatures of the QC picture's colour pass (``gpu.peaks.fodf_metrics_compiled._colour``)
into a fresh numba cache at once.

Usage: ``python -m tests.gpu.cache_signatures_child OUT ROLE [alone]``, ROLE ``strided``
(calls the pass on arrays with negative strides, as on a flipped slice), ``contiguous`` (on
contiguous copies) or ``reader`` (strided, after both); saves the colours to OUT (.npy) and
prints how many of its calls loaded their machine code from the cache. Unless ``alone``, the
two writers, once both have compiled, interleave their saves as two processes compiling at
once can: both read the empty index, the contiguous one writes its index, then the strided
one its index and data, then the contiguous one its data; a step waits at most
:data:`WAIT` seconds for the other's (a lock that keeps them apart makes it wait in vain).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
from numba.core import caching

WAIT = 2.0
COMPILED_WAIT = 120.0  # for the other writer to finish compiling, on a busy machine


def _wait_for(flag: Path, seconds: float = WAIT) -> None:
    deadline = time.monotonic() + seconds
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def _interleave(role: str, flags: Path) -> None:
    """Hook numba's index and data writes so that the two writers interleave, both starting
    to save once both have compiled."""
    other = "contiguous" if role == "strided" else "strided"
    save_overload = caching.FunctionCache.save_overload

    def hooked_save_overload(self, sig, data):
        (flags / f"{role}-compiled").touch()
        _wait_for(flags / f"{other}-compiled", COMPILED_WAIT)
        save_overload(self, sig, data)

    load_index, save_index, save_data = (caching.IndexDataCacheFile._load_index,
                                         caching.IndexDataCacheFile._save_index,
                                         caching.IndexDataCacheFile._save_data)
    saving = {"now": False}
    save = caching.IndexDataCacheFile.save

    def hooked_save(self, key, data):
        saving["now"] = True
        try:
            save(self, key, data)
        finally:
            saving["now"] = False

    def hooked_load_index(self):
        overloads = load_index(self)
        if saving["now"]:
            (flags / f"{role}-read-index").touch()
            _wait_for(flags / f"{other}-read-index")
        return overloads

    def hooked_save_index(self, overloads):
        if role == "strided":
            _wait_for(flags / "contiguous-wrote-index")
        save_index(self, overloads)
        (flags / f"{role}-wrote-index").touch()

    def hooked_save_data(self, name, data):
        if role == "contiguous":
            _wait_for(flags / "strided-wrote-data")
        save_data(self, name, data)
        (flags / f"{role}-wrote-data").touch()

    caching.FunctionCache.save_overload = hooked_save_overload
    caching.IndexDataCacheFile.save = hooked_save
    caching.IndexDataCacheFile._load_index = hooked_load_index
    caching.IndexDataCacheFile._save_index = hooked_save_index
    caching.IndexDataCacheFile._save_data = hooked_save_data


def colour_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.float32]:
    """First directions (V, 1, 3), AFD_max (V,), counts (V,) and the colour scale."""
    rng = np.random.default_rng(5)
    directions = rng.normal(size=(40, 1, 3)).astype(np.float32)
    directions /= np.linalg.norm(directions, axis=-1, keepdims=True)
    return directions, rng.uniform(0.1, 1.0, 40).astype(np.float32), rng.integers(0, 3, 40).astype(np.uint8), \
        np.float32(255.0)


def main(out: str, role: str, alone: bool) -> None:
    from gpu.peaks.fodf_metrics_compiled import _colour

    flags = Path(os.environ["NUMBA_CACHE_DIR"])
    flags.mkdir(parents=True, exist_ok=True)
    if role != "reader" and not alone:
        _interleave(role, flags)
    directions, afd_max, count, scale = colour_inputs()
    if role == "contiguous":
        arrays = directions, afd_max, count
    else:  # reversed copies seen backwards: the same values, negative strides
        arrays = directions[::-1].copy()[::-1], afd_max[::-1].copy()[::-1], count[::-1].copy()[::-1]
    colour = np.empty((len(count), 3), np.uint8)
    _colour(*arrays, colour, scale)
    np.save(out, colour)
    print(sum(_colour.stats.cache_hits.values()))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:] == ["alone"])
