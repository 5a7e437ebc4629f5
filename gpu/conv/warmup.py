"""Compile every factorized-conv kernel a backend uses into numba's on-disk cache.

CPU: the two ``prange`` loops (fused CP, Tucker core), through :func:`cp_conv2d` and
:func:`tucker_conv2d` on a tiny input, so they see a real run's argument types (both
functions make them C-contiguous float32). CUDA: each kernel :mod:`gpu.conv.kernel_shapes`
declares, generated into the kernel cache (:mod:`gpu.conv.kernel_cache`) and launched once
on a small zero input: the CP kernels of every rank (``taps`` and every lean separable
variant, through :class:`CPConvPlan` with the kernel's own launch shape), the Tucker core
kernels through :func:`gpu.conv.tucker.compile_core_kernels` and the 1×1 stages through a
Tucker conv.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from gpu.conv.cp import CPConvPlan, SeparableTiling, check_cp_factors, cp_conv2d
from gpu.conv.index_tables import conv_geometry
from gpu.conv.kernel_cache import tucker_core_variants
from gpu.conv.kernel_shapes import CP_RANKS, cp_lean_variants
from gpu.conv.tucker import tucker_conv2d

__all__ = ["warm_up_conv"]


def _cpu() -> None:
    x = np.zeros((1, 2, 5, 5), np.float32)
    cp_conv2d(x, np.ones((2, 1)), np.ones((3, 1)), np.ones((3, 1)), np.ones((2, 1)), padding=1, backend="cpu")
    tucker_conv2d(x, np.ones((2, 1)), np.ones((1, 1, 3, 3)), np.ones((2, 1)), padding=1, backend="cpu")


def _cuda(log: Callable[[str], None], part: int, parts: int) -> None:
    from numba import cuda

    from gpu.conv.tucker import compile_core_kernels

    x = np.zeros((1, 4, 8, 16), np.float32)
    g = conv_geometry(x.shape, (3, 3), 1, 1, 1)
    d_x = cuda.to_device(x)
    d_out = cuda.device_array((1, 8, g.out_h, g.out_w), np.float32)
    plans = [(rank, None) for rank in CP_RANKS]
    plans += [(rank, SeparableTiling(4, 8, 1, 1, 128, px1, ns, px4)) for rank, ns, px1, px4 in cp_lean_variants()]
    plans = plans[part::parts]
    for rank, tiling in plans:
        f = check_cp_factors(*(np.ones((n, rank), np.float32) for n in (4, 3, 3, 8)))
        method = "taps" if tiling is None else "separable"
        CPConvPlan(f, g, lanes=1 if tiling is None else None, method=method, tiling=tiling)(d_x, d_out)
    share = "" if parts == 1 else f" (share {part + 1} of {parts})"
    log(f"conv: {len(plans)} CP kernels{share}")
    variants = tucker_core_variants()[part::parts]
    compile_core_kernels(variants)
    if part == 0:
        tucker_conv2d(x, np.ones((4, 2)), np.ones((2, 2, 3, 3)), np.ones((8, 2)), padding=1, backend="cuda")
    cuda.synchronize()
    log(f"conv: {len(variants)} Tucker core kernels{' and the 1x1 stages' if part == 0 else ''}{share}")


def warm_up_conv(backend: str = "cpu", log: Callable[[str], None] = lambda message: None, part: int = 0,
                 parts: int = 1) -> float:
    """Compile (or load) the ``backend`` (cpu|cuda) conv kernels; returns the seconds taken.
    With ``parts`` > 1, share ``part`` of the CUDA kernels (every ``parts``-th, from ``part``;
    the shares together are all of them, for processes that compile at once); the CPU
    loops are all in share 0."""
    started = time.perf_counter()
    if backend == "cuda":
        _cuda(log, part, parts)
    elif part == 0:
        _cpu()
    seconds = time.perf_counter() - started
    log(f"conv ({backend}{'' if parts == 1 else f', share {part + 1} of {parts}'}): {seconds:.1f} s")
    return seconds
