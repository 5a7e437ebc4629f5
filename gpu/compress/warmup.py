"""Compile the compression loops a backend uses into numba's on-disk cache, through
:func:`gpu.compress.error_bounded.encode_tensor` and :func:`decode_tensor` on a small
DWI-like volume: chunked rANS (:mod:`gpu.compress.chunked_rans`), the step-error pass
(:mod:`gpu.compress.step_error`), the quantiser's loop (:mod:`gpu.compress.quantize`) and, on a GPU, their kernels and the quantisation kernels,
whose cubins are saved then too (:mod:`gpu.compress.cuda_kernels`).
The FP16 TTMc's fused kernel links CUDA C++, which numba cannot cache: a process still
compiles that one on its first GPU encode."""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from gpu.compress.error_bounded import ErrorTarget, decode_tensor, encode_tensor
from gpu.compress.quantize import LOOP_ENTRIES, quantize

__all__ = ["warm_up_compress"]


def warm_up_compress(backend: str = "cpu", log: Callable[[str], None] = lambda message: None) -> float:
    """Compile (or load) the ``backend`` (cpu|cuda) compression loops; returns the seconds it
    took, about zero where the cache was already warm. For cuda, the CPU loops too: short
    streams are coded on the host there."""
    rng = np.random.default_rng(0)
    grid = np.meshgrid(*[np.linspace(0, 1, n) for n in (12, 12, 8)], indexing="ij")
    signal = 1000 * np.exp(-grid[0] - grid[1]) * (1 + 0.2 * np.cos(4 * grid[2]))
    volume = signal[..., None] * np.exp(-rng.uniform(0.5, 2.0, 9)) + rng.normal(0, 10, (12, 12, 8, 9))
    started = time.perf_counter()
    for backends in ((backend,) if backend == "cpu" else ("cpu", backend)):
        # float32 and int16 outputs: the decoder's casts are compiled apart; both target kinds
        for x, target in ((volume.astype(np.float32), ErrorTarget("tol", 0.005)),
                          (np.rint(volume).astype(np.int16), ErrorTarget("abs", 4.0))):
            decode_tensor(encode_tensor(x, target, output_dtype=x.dtype, backend=backends), x.dtype, backend=backends)
    # the quantiser's parallel loop takes arrays of LOOP_ENTRIES or more; the volume above is smaller
    quantize(np.zeros(LOOP_ENTRIES), 1.0)  # with or without a reference: the same argument types
    seconds = time.perf_counter() - started
    log(f"compress: chunked rANS, step-error and quantiser loops ({backend}): {seconds:.1f} s")
    return seconds
