"""Fused convolution with a CP-decomposed kernel (Reustle, Rabbani & Huang).

The kernel K[t,s,h,w] = Σ_r T[t,r]·S[s,r]·H[h,r]·W[w,r] (Eq. 6) is never formed. One pass
computes (Eq. 9)

    q_r(n,y',x') = Σ_s S[s,r] · Σ_{h,w} H[h,r]·W[w,r]·U[n, s, y'·σ + h·δ − p, x'·σ + w·δ − p]
    V[n,t,y',x'] = bias[t] + Σ_r T[t,r]·q_r,

on the GPU with the generated rank-specialised kernels of ``gpu/conv_cp_generated.py``
(Algorithm 2) and on the CPU with a numba ``prange`` loop of the same arithmetic. Both walk
the taps with the pointer-increment table of :mod:`gpu.conv_index_tables`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from gpu.conv_index_tables import ConvGeometry, conv_geometry, pointer_increments, tap_offsets
from gpu.cuda_runtime import resolve_backend

__all__ = ["CPFactors", "check_cp_factors", "check_out_array", "run_plan_on_gpu", "cp_conv2d", "CPConvPlan", "choose_lane_count"]

#: Threads a GPU keeps resident (H100: 132 SMs × 2048); the lane heuristic aims at this.
_RESIDENT_THREADS = 132 * 2048


@dataclass(frozen=True)
class CPFactors:
    """CP factors of a conv kernel: S (C×R), H (kh×R), W (kw×R), T (T×R), optional bias (T)."""

    s: np.ndarray
    h: np.ndarray
    w: np.ndarray
    t: np.ndarray
    bias: np.ndarray | None = None

    @property
    def rank(self) -> int:
        return self.s.shape[1]


def check_cp_factors(s, h, w, t, bias=None) -> CPFactors:
    """Validate and convert CP factors to contiguous float32; ValueError says what is wrong."""
    mats = {}
    for name, m in (("S", s), ("H", h), ("W", w), ("T", t)):
        a = np.asarray(m)
        if a.ndim != 2:
            raise ValueError(f"CP factor {name} must be a matrix (rows × rank), got shape {a.shape}")
        if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
            raise ValueError(f"CP factor {name} must hold real numbers, got dtype {a.dtype}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"CP factor {name} contains NaN or infinite values")
        mats[name] = np.ascontiguousarray(a, dtype=np.float32)
    ranks = {name: a.shape[1] for name, a in mats.items()}
    if len(set(ranks.values())) != 1:
        raise ValueError(
            "CP factors must share one rank (their column count); got "
            + ", ".join(f"{k}: {v}" for k, v in ranks.items())
        )
    if ranks["S"] < 1 or min(a.shape[0] for a in mats.values()) < 1:
        raise ValueError("CP factors must not be empty")
    b = None
    if bias is not None:
        b = np.asarray(bias)
        if b.shape != (mats["T"].shape[0],):
            raise ValueError(f"bias must have one entry per output channel ({mats['T'].shape[0]}), got shape {b.shape}")
        if not np.all(np.isfinite(b)):
            raise ValueError("bias contains NaN or infinite values")
        b = np.ascontiguousarray(b, dtype=np.float32)
    return CPFactors(mats["S"], mats["H"], mats["W"], mats["T"], b)


def choose_lane_count(channels: int, pixels: int, resident_threads: int = _RESIDENT_THREADS) -> int:
    """Channel lanes per output pixel (Algorithm 2's S_TILE), a power of two ≤ 32.

    More lanes split the channel loop and the T outputs finer but multiply the threads;
    doubling stops once a lane would get no channel or the grid already fills the GPU.
    """
    lanes = 1
    while lanes < 32 and 2 * lanes <= channels and pixels * lanes < resident_threads:
        lanes *= 2
    return lanes


def _geo_array(g: ConvGeometry, n_out: int) -> np.ndarray:
    return np.array(
        [g.batch, g.channels, g.height, g.width, n_out, g.out_h, g.out_w,
         g.stride_h, g.stride_w, g.pad_top, g.pad_left, g.taps,
         (g.kh - 1) * g.dil_h, (g.kw - 1) * g.dil_w],
        dtype=np.int64,
    )


def _tap_weights(f: CPFactors, g: ConvGeometry) -> np.ndarray:
    """H[h,r]·W[w,r] for each tap k = h·kw + w, in the table's tap order, (K, R)."""
    return np.ascontiguousarray(
        (f.h[:, None, :].astype(np.float64) * f.w[None, :, :]).reshape(g.taps, f.rank), dtype=np.float32
    )


@njit(parallel=True, cache=True)
def _cp_conv_cpu(u, out, inc, hw, s_f, t_f, bias, geo):
    n_img, chans, height, width, n_out, out_h, out_w, sh, sw, pt, pl, n_taps = (
        geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6], geo[7], geo[8], geo[9], geo[10], geo[11]
    )
    rank = s_f.shape[1]
    for row in prange(n_img * out_h):
        n = row // out_h
        oy = row - n * out_h
        q = np.empty(rank, np.float32)
        p = np.empty(rank, np.float32)
        for ox in range(out_w):
            y = oy * sh - pt
            x = ox * sw - pl
            ptr = (n * chans * height + y) * width + x
            q[:] = 0.0
            for s in range(chans):
                p[:] = 0.0
                for k in range(n_taps):
                    if y >= 0 and y < height and x >= 0 and x < width:
                        v = u[ptr]
                        for r in range(rank):
                            p[r] += v * hw[k, r]
                    ptr += inc[k, 0]
                    y += inc[k, 1]
                    x += inc[k, 2]
                for r in range(rank):
                    q[r] += p[r] * s_f[s, r]
            base = n * n_out * out_h * out_w + oy * out_w + ox
            for t in range(n_out):
                val = bias[t]
                for r in range(rank):
                    val += q[r] * t_f[t, r]
                out[base + t * out_h * out_w] = val


class CPConvPlan:
    """A CP conv layer ready to launch on the GPU: factors, tables and launch shape on the device.

    Ranks above the largest generated kernel run as consecutive rank chunks, the later
    ones accumulating into the output (the CP sum over r splits into partial sums).
    """

    def __init__(self, factors: CPFactors, geometry: ConvGeometry, lanes: int | None = None):
        from numba import cuda

        from gpu.conv_codegen import CP_RANKS
        from gpu.conv_cp_generated import CP_BLOCK, CP_KERNELS

        g = geometry
        self.geometry = g
        self.n_out = factors.t.shape[0]
        pixels = g.batch * g.out_h * g.out_w
        self.lanes = lanes or choose_lane_count(g.channels, pixels, _resident_threads())
        if self.lanes not in (1, 2, 4, 8, 16, 32):
            raise ValueError(f"lanes must be a power of two up to 32, not {self.lanes}")
        inc = pointer_increments(tap_offsets(g.kh, g.kw, g.dil_h, g.dil_w, g.width), g.height * g.width)
        hw = _tap_weights(factors, g)
        self._inc = cuda.to_device(inc)
        self._geo = cuda.to_device(_geo_array(g, self.n_out))
        zero_bias = cuda.to_device(np.zeros(self.n_out, np.float32))
        bias = cuda.to_device(factors.bias) if factors.bias is not None else zero_bias
        self.grid = -(-pixels * self.lanes // CP_BLOCK)
        self.block = CP_BLOCK
        self._chunks = []
        step = CP_RANKS[-1]
        for i, r0 in enumerate(range(0, factors.rank, step)):
            r1 = min(r0 + step, factors.rank)
            self._chunks.append((
                CP_KERNELS[r1 - r0],
                cuda.to_device(np.ascontiguousarray(hw[:, r0:r1]).ravel()),
                cuda.to_device(np.ascontiguousarray(factors.s[:, r0:r1])),
                cuda.to_device(np.ascontiguousarray(factors.t[:, r0:r1])),
                bias if i == 0 else zero_bias,
                (g.taps * (r1 - r0) + 3 * g.taps) * 4,
                i > 0,
            ))

    @property
    def device_bytes(self) -> int:
        """Bytes of the plan's own device buffers (factors, tables)."""
        arrays = [self._inc, self._geo]
        for _, hw, s, t, b, _, _ in self._chunks:
            arrays += [hw, s, t, b]
        return sum(a.nbytes for a in arrays)

    def __call__(self, d_u, d_out, stream=0):
        """Launch on device arrays: ``d_u`` (N, C, H, W) and ``d_out`` (N, T, Ho, Wo), float32."""
        u_flat = d_u.reshape(d_u.size)
        out_flat = d_out.reshape(d_out.size)
        for kernel, hw, s, t, bias, shared, accumulate in self._chunks:
            kernel[self.grid, self.block, stream, shared](
                u_flat, out_flat, self._inc, hw, s, t, bias, self._geo, self.lanes, accumulate
            )


def _resident_threads() -> int:
    from gpu.conv_tiling import gpu_spec

    return gpu_spec().gpu_threads


def check_out_array(out, shape) -> np.ndarray:
    """``out`` if it can receive a conv result of ``shape`` (C-contiguous float32), a new
    array if it is None; ValueError otherwise."""
    if out is None:
        return np.empty(shape, np.float32)
    if out.shape != shape or out.dtype != np.float32 or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous float32 array of shape {shape}")
    return out


def run_plan_on_gpu(plan, x, shape: tuple[int, ...], out, on_device: bool):
    """Run a conv ``plan`` on the GPU: device input → a new device output; host input → the
    result copied into ``out`` (checked by :func:`check_out_array`, or a new array)."""
    from numba import cuda

    if on_device:
        d_out = cuda.device_array(shape, np.float32)
        plan(x, d_out)
        return d_out
    out = check_out_array(out, shape)
    d_out = cuda.to_device(out)
    plan(cuda.to_device(np.ascontiguousarray(x, dtype=np.float32)), d_out)
    d_out.copy_to_host(out)
    return out


def cp_conv2d(u, s, h, w, t, bias=None, stride=1, padding=0, dilation=1, backend="auto", lanes=None, out=None):
    """Convolve an (N, C, H, W) float32 input with a CP-decomposed (T, C, kh, kw) kernel.

    Equals ``torch.nn.functional.conv2d(u, K, bias, stride, padding, dilation)`` with
    K[t,s,h,w] = Σ_r T[t,r]·S[s,r]·H[h,r]·W[w,r] (Reustle et al. Eqs. 6, 8–9), in float32.
    ``padding`` is an integer, a pair or ``"same"`` (stride 1). ``backend`` is
    ``auto|cpu|cuda``; with ``cuda`` a numba device array in gives a device array out.
    ``lanes`` overrides the channel lanes per pixel of the GPU kernel. ``out``: a host
    float32 array to write into (its old contents are never read).
    """
    f = check_cp_factors(s, h, w, t, bias)
    backend = resolve_backend(backend)
    on_device = hasattr(u, "copy_to_host")
    if on_device and backend != "cuda":
        u = u.copy_to_host()
    g = conv_geometry(u.shape, (f.h.shape[0], f.w.shape[0]), stride, padding, dilation)
    if g.channels != f.s.shape[0]:
        raise ValueError(f"the input has {g.channels} channels but factor S has {f.s.shape[0]} rows")
    if backend == "cuda":
        return run_plan_on_gpu(CPConvPlan(f, g, lanes), u, (g.batch, f.t.shape[0], g.out_h, g.out_w), out, on_device)
    u32 = np.ascontiguousarray(u, dtype=np.float32)
    out = check_out_array(out, (g.batch, f.t.shape[0], g.out_h, g.out_w))
    inc = pointer_increments(tap_offsets(g.kh, g.kw, g.dil_h, g.dil_w, g.width), g.height * g.width)
    bias_arr = f.bias if f.bias is not None else np.zeros(f.t.shape[0], np.float32)
    _cp_conv_cpu(u32.ravel(), out.ravel(), inc, _tap_weights(f, g), f.s, f.t, bias_arr, _geo_array(g, f.t.shape[0]))
    return out
