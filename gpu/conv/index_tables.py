"""Convolution geometry and precomputed pointer-increment tables.

A 2D cross-correlation (PyTorch's ``conv2d`` convention, no kernel flip) reads, for output
pixel (y', x') and filter tap (h, w), the input at

    y = y'·stride_h − pad_top + h·dil_h,   x = x'·stride_w − pad_left + w·dil_w.

Following Tillet ("Extending tensor contractions for deep neural networks", section
*Pointer increments precomputation*), the displacement between two consecutive taps of the
reduction loop depends only on the reduction indices, so it is computed once per layer and
stored in a small table of K = kh·kw rows. The kernels' inner loops then do a table load
and an add per tap instead of unpacking (h, w) from k with divisions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ConvGeometry", "conv_geometry", "tap_offsets", "pointer_increments"]


@dataclass(frozen=True)
class ConvGeometry:
    """Shapes and index arithmetic of one NCHW convolution."""

    batch: int
    channels: int
    height: int
    width: int
    kh: int
    kw: int
    stride_h: int
    stride_w: int
    dil_h: int
    dil_w: int
    pad_top: int
    pad_left: int
    out_h: int
    out_w: int

    @property
    def taps(self) -> int:
        return self.kh * self.kw


def _pair(value, name: str) -> tuple[int, int]:
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{name} must be one integer or a pair, not {value!r}")
        a, b = value
    else:
        a = b = value
    try:
        a_i, b_i = int(a), int(b)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an integer or a pair of integers, not {value!r}") from None
    if (a_i, b_i) != (a, b):
        raise ValueError(f"{name} must be integers, not {value!r}")
    return a_i, b_i


def conv_geometry(input_shape, kernel_size, stride=1, padding=0, dilation=1) -> ConvGeometry:
    """Output size and padding of a convolution of an (N, C, H, W) input.

    ``padding`` is an integer, a pair, or ``"same"`` (stride 1 only, as in PyTorch: the total
    padding dil·(k−1) is split with the smaller half on top/left). The output size is
    ⌊(H + 2·pad − dil·(k−1) − 1) / stride⌋ + 1.
    """
    if len(input_shape) != 4:
        raise ValueError(f"input must be 4-D (N, C, H, W), got shape {tuple(input_shape)}")
    n, c, h, w = (int(v) for v in input_shape)
    kh, kw = _pair(kernel_size, "kernel size")
    sh, sw = _pair(stride, "stride")
    dh, dw = _pair(dilation, "dilation")
    if min(n, c, h, w) < 1:
        raise ValueError(f"input shape {tuple(input_shape)} has an empty dimension")
    if min(kh, kw) < 1:
        raise ValueError(f"kernel size must be positive, got {kh}x{kw}")
    if min(sh, sw) < 1 or min(dh, dw) < 1:
        raise ValueError("stride and dilation must be at least 1")
    if isinstance(padding, str):
        if padding != "same":
            raise ValueError(f"padding must be an integer, a pair or 'same', not {padding!r}")
        if (sh, sw) != (1, 1):
            raise ValueError("padding 'same' needs stride 1 (as in PyTorch); give an integer padding")
        pt, pl = (dh * (kh - 1)) // 2, (dw * (kw - 1)) // 2
        oh, ow = h, w
    else:
        ph, pw = _pair(padding, "padding")
        if min(ph, pw) < 0:
            raise ValueError("padding must not be negative")
        pt, pl = ph, pw
        oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
        ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        raise ValueError(
            f"the dilated {kh}x{kw} kernel does not fit the padded {h}x{w} input "
            "(increase padding or reduce dilation)"
        )
    return ConvGeometry(n, c, h, w, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow)


def tap_offsets(kh: int, kw: int, dil_h: int, dil_w: int, row_stride: int) -> np.ndarray:
    """Absolute displacement of each tap from the receptive-field origin.

    Returns int32 (kh·kw, 3): column 0 the flat offset dy·row_stride + dx, columns 1–2 the
    row and column displacement (dy, dx) = (h·dil_h, w·dil_w), taps in row-major (h, w)
    order, which is the order of increasing memory address in NCHW (Tillet: unpack the
    fastest-growing axis first).
    """
    hh, ww = np.meshgrid(np.arange(kh), np.arange(kw), indexing="ij")
    dy = (hh * dil_h).ravel()
    dx = (ww * dil_w).ravel()
    return np.ascontiguousarray(np.stack([dy * row_stride + dx, dy, dx], axis=1), dtype=np.int32)


def pointer_increments(offsets: np.ndarray, channel_stride: int) -> np.ndarray:
    """Tillet's pointer-increment table: the step from tap k to tap k+1.

    ``offsets`` comes from :func:`tap_offsets`. Row k holds the increments (flat pointer,
    row, column) applied after reading tap k; the last row steps from the last tap of one
    channel back to the first tap of the next channel (``channel_stride`` elements on), so a
    loop over channels × taps is one load–accumulate–increment sequence with no index
    arithmetic.
    """
    nxt = np.roll(offsets, -1, axis=0).astype(np.int64)
    inc = nxt - offsets.astype(np.int64)
    inc[-1, 0] = channel_stride - int(offsets[-1, 0])
    inc[-1, 1] = -int(offsets[-1, 1])
    inc[-1, 2] = -int(offsets[-1, 2])
    return np.ascontiguousarray(inc, dtype=np.int32)
