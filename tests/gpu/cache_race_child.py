"""One process of tests/gpu/test_cpu_parallel.py's race between a process that saves a loop
into numba's cache and one that loads it meanwhile.

Usage: ``python -m tests.gpu.cache_race_child MODULE_DIR ROLE``: ROLE ``first`` calls the
loop of ``MODULE_DIR/versioned_loop.py``; ``writer`` too, its data write waiting 2 s after
the index is written (a file says when); ``reader`` calls it once the writer is there. Prints the value the loop wrote: the version of the
module source whose machine code ran.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path

import numpy as np
from numba.core import caching

from gpu.cpu_parallel import run_parallel_loop


def main(module_dir: str, role: str) -> None:
    in_write = Path(os.environ["NUMBA_CACHE_DIR"]) / "writer-saving-data"
    if role == "writer":
        save_data = caching.IndexDataCacheFile._save_data

        def slow_save_data(self, name, data):
            in_write.touch()
            time.sleep(2)  # a slow disk, or a large loop's pickle, widened
            save_data(self, name, data)

        caching.IndexDataCacheFile._save_data = slow_save_data
    elif role == "reader":
        while not in_write.exists():
            time.sleep(0.02)
    sys.path.insert(0, module_dir)
    loop = importlib.import_module("versioned_loop").fill
    out = np.zeros(4)
    run_parallel_loop(loop, out)
    print(out[0])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
