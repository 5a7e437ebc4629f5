"""One process of tests/gpu/test_cpu_parallel.py: several threads call the CPU parallel loops
at once, as several jobs' threads do, on whatever numba cache ``NUMBA_CACHE_DIR`` holds.

Usage: ``python -m tests.gpu.cold_cache_child OUT.npz``. Writes each thread's outputs and,
per loop, how many signatures this process compiled and how many it loaded from the cache.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from gpu.conv.tucker import _core_conv_cpu, tucker_core_conv2d
from gpu.peaks import sshopm_generated_cpu
from tests.gpu.peaks.test_backend_cpu import OUTPUTS, run_case

PEAKS_CASE = "clean"
CHUNKS = (144, 29, 7)  # one chunk, several, many: the loop is called 1, 5 and 21 times
CONV_SEED = 3


def conv_inputs() -> tuple[np.ndarray, np.ndarray]:
    """The Tucker core conv's input (2, 3, 9, 8) and core (4, 3, 3, 3), float32."""
    rng = np.random.default_rng(CONV_SEED)
    return rng.standard_normal((2, 3, 9, 8)).astype(np.float32), rng.standard_normal((4, 3, 3, 3)).astype(np.float32)


def main(out_path: str) -> None:
    with ThreadPoolExecutor(len(CHUNKS) + 1) as pool:
        peaks = [pool.submit(run_case, PEAKS_CASE, chunk) for chunk in CHUNKS]
        conv = pool.submit(tucker_core_conv2d, *conv_inputs(), 1, 1, 1, "cpu")
        arrays = {f"peaks{chunk}_{key}": future.result()[key] for chunk, future in zip(CHUNKS, peaks) for key in OUTPUTS}
        arrays["conv"] = conv.result()
    for name, loop in (("peaks", sshopm_generated_cpu.sshopm_cpu_m8), ("conv", _core_conv_cpu)):
        arrays[f"{name}_compiled"] = np.array(sum(loop.stats.cache_misses.values()))
        arrays[f"{name}_loaded"] = np.array(sum(loop.stats.cache_hits.values()))
    np.savez(out_path, **arrays)


if __name__ == "__main__":
    main(sys.argv[1])
