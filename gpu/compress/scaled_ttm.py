"""The first mode product of an FP16 Kronecker-scaled TTMc, with X scaled in its loads.

``Y = X̃ ×_m Ũ_m`` where ``X̃ = fp16(X ×_1 D_1 … ×_N D_N)`` (poster "TTMc in low precision on
GPUs", Section 2) is never stored: each block rounds its tile of X into shared memory as
it loads it, multiplies on the tensor cores (FP16 products, FP32 accumulation) and adds
``Σ X²`` and ``max |X̃|`` to the scan, so the whole TTMc reads X once and writes only the
first product, which is J_m/I_m of X̃'s size. Unfused, X costs a read, a write of X̃ and a
second read of X̃ by the first GEMM. For X stored in FP16 the fused kernel was slower than
the unfused pair, so it takes float32 X only (docs/decisions/ttmc-fused-first-product.md).

The tensor-core work is CUDA C++ (``scaled_ttm.cu``), linked into numba.cuda kernels
through numba's foreign-function interface, because numba cannot emit ``mma.sync``. It
runs on a real GPU only: the simulator cannot execute foreign code, and
:meth:`gpu.compress.backend_cpu.CpuTTMcOps.scaled_ttm` is the same product as scale-and-scan then TTM.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np

__all__ = ["MAX_ROWS", "fused_shape_ok", "scaled_ttm_launch"]

_SOURCE = Path(__file__).with_name("scaled_ttm.cu")
_COLUMNS = 128  # columns q per block (BN in the .cu source)
_CHUNK = 32  # i per shared-memory chunk (BK)
_THREADS = 256
MAX_ROWS = 128  # J ≤ 16·8: the accumulators of all rows of a column tile stay in registers
_ROW_TILES = (1, 2, 4, 8)
# Blocks per SM the register allocation must allow, per row-tile count, the fastest measured
# (docs/decisions/ttmc-fused-first-product.md); 3 blocks at 8 row tiles spill heavily.
_MIN_BLOCKS = {1: 3, 2: 3, 4: 2, 8: 2}


def fused_shape_ok(p: int, i: int, q: int, j: int) -> bool:
    """Whether the fused kernel takes the mode-product view (P, I, Q) → J rows (float32 X).

    Columns come in float4 loads (Q % 4 == 0); Q ≥ 64 keeps a column tile at least half
    used; J ≤ ``MAX_ROWS``.
    """
    return q % 4 == 0 and q >= 64 and 0 < j <= MAX_ROWS and i > 0 and p * math.ceil(q / _COLUMNS) < 2**31


def _row_tiles(j: int) -> int:
    return next(t for t in _ROW_TILES if 16 * t >= j)


@functools.cache
def _kernel(row_tiles: int, min_blocks: int):
    from numba import cuda, types

    name = f"scaled_ttm_m{row_tiles}"
    ptr, size = types.uint64, types.int64
    body = cuda.declare_device(name, types.int32(ptr, ptr, ptr, ptr, ptr, ptr, size, size, size, size, size))
    @cuda.jit(link=[str(_SOURCE)], launch_bounds=(_THREADS, min_blocks))
    def launch(x, u, y, f_row, f_col, scan, p, i, q, j, kpad):
        body(x, u, y, f_row, f_col, scan, p, i, q, j, kpad)

    return launch


def padded_factor(u_scaled: np.ndarray) -> np.ndarray:
    """Ũ_m rounded to FP16 (as the unfused route stores it), zero-padded to (16·MT) × ⌈I/32⌉·32."""
    j, i = u_scaled.shape
    rows, cols = 16 * _row_tiles(j), _CHUNK * math.ceil(i / _CHUNK)
    out = np.zeros((rows, cols), dtype=np.float16)
    out[:j, :i] = u_scaled
    return out


def scaled_ttm_launch(x_ptr: int, u_pad_ptr: int, y_ptr: int, f_row_ptr: int, f_col_ptr: int,
                      scan_ptr: int, p: int, i: int, q: int, j: int):
    """A closure that enqueues the fused product on the current stream (device pointers in).

    ``x`` float32, C-ordered (P, I, Q); ``u_pad`` from :func:`padded_factor`; ``y`` FP16
    (P, J, Q); ``f_row`` float32 of length P·I, ``f_col`` of length Q (normal powers of
    two); ``scan`` float64 [Σx², max |X̃|], zeroed.
    """
    tiles = _row_tiles(j)
    kernel = _kernel(tiles, _MIN_BLOCKS[tiles])
    kpad = _CHUNK * math.ceil(i / _CHUNK)
    blocks = p * math.ceil(q / _COLUMNS)
    pointers = [np.uint64(v) for v in (x_ptr, u_pad_ptr, y_ptr, f_row_ptr, f_col_ptr, scan_ptr)]
    args = (*pointers, *(np.int64(v) for v in (p, i, q, j, kpad)))

    def launch():
        kernel[blocks, _THREADS](*args)

    return launch
