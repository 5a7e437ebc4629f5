"""Convolution with a Tucker-2-decomposed kernel (Xiang et al., TDC, Eqs. 1–4).

K[t,c,h,w] = Σ_{d1,d2} core[d2,d1,h,w]·U_in[c,d1]·U_out[t,d2] runs as three convolutions:

    Z1[n,d1,y,x]   = Σ_c U_in[c,d1]·X[n,c,y,x]                                   (Eq. 2, 1×1)
    Z2[n,d2,y',x'] = Σ_{d1,h,w} core[d2,d1,h,w]·Z1[n,d1,y'σ+hδ−p,x'σ+wδ−p]      (Eq. 3, core)
    Y[n,t,y',x']   = bias[t] + Σ_{d2} U_out[t,d2]·Z2[n,d2,y',x']                 (Eq. 4, 1×1)

The core convolution is TDC's kernel (Listing 2, generated per output tile by
:mod:`gpu.conv.codegen` at first use, with channel slices per block and TN output channels
per thread added) with tiles from the cost model, TDC's rule or the exhaustive tuner of
:mod:`gpu.conv.tiling`. The 1×1 stages are separate bandwidth-bound kernels.
The CPU backend runs the 1×1 stages as float32 matrix products and the core with a numba
``prange`` loop over the same pointer-increment table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from numba import cuda, njit, prange

from gpu.conv.index_tables import ConvGeometry, conv_geometry, pointer_increments, tap_offsets
from gpu.conv.kernel_cache import notice_conv_compile, tucker_core_kernel
from gpu.conv.kernel_shapes import TUCKER_TILES, tucker_row_variants, tucker_square_variants
from gpu.conv.tiling import (
    CoreTile,
    core_block_threads,
    gpu_spec,
    select_tile_exhaustive,
    select_tile_model,
    select_tile_tdc,
    shared_bytes,
    uses_square_kernel,
)
from gpu.conv.cp import check_out_array, run_plan_on_gpu
from gpu.cpu_parallel import run_parallel_loop
from gpu.cuda.backend import resolve_backend

__all__ = [
    "TuckerFactors",
    "check_tucker_factors",
    "tucker_conv2d",
    "tucker_core_conv2d",
    "TuckerCorePlan",
    "TuckerConvPlan",
    "core_kernel_variant",
    "compile_core_kernels",
]

_POINTWISE_BLOCK = 128


@dataclass(frozen=True)
class TuckerFactors:
    """Tucker-2 factors: U_in (C×D1), core (D2×D1×kh×kw), U_out (T×D2), optional bias (T)."""

    u_in: np.ndarray
    core: np.ndarray
    u_out: np.ndarray
    bias: np.ndarray | None = None

    @property
    def ranks(self) -> tuple[int, int]:
        return self.u_in.shape[1], self.u_out.shape[1]


def _real_finite(name: str, a, ndim: int) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != ndim:
        raise ValueError(f"Tucker factor {name} must be {ndim}-D, got shape {a.shape}")
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
        raise ValueError(f"Tucker factor {name} must hold real numbers, got dtype {a.dtype}")
    if a.size == 0:
        raise ValueError(f"Tucker factor {name} is empty (shape {a.shape})")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"Tucker factor {name} contains NaN or infinite values")
    return np.ascontiguousarray(a, dtype=np.float32)


def check_tucker_factors(u_in, core, u_out, bias=None) -> TuckerFactors:
    """Validate and convert Tucker factors to contiguous float32; ValueError says what is wrong."""
    u_in = _real_finite("U_in", u_in, 2)
    core = _real_finite("core", core, 4)
    u_out = _real_finite("U_out", u_out, 2)
    if core.shape[1] != u_in.shape[1]:
        raise ValueError(f"core has {core.shape[1]} input ranks (axis 1) but U_in has {u_in.shape[1]} columns")
    if core.shape[0] != u_out.shape[1]:
        raise ValueError(f"core has {core.shape[0]} output ranks (axis 0) but U_out has {u_out.shape[1]} columns")
    b = None
    if bias is not None:
        b = np.asarray(bias)
        if b.shape != (u_out.shape[0],):
            raise ValueError(f"bias must have one entry per output channel ({u_out.shape[0]}), got shape {b.shape}")
        if not np.all(np.isfinite(b)):
            raise ValueError("bias contains NaN or infinite values")
        b = np.ascontiguousarray(b, dtype=np.float32)
    return TuckerFactors(u_in, core, u_out, b)


def _shape_dict(g: ConvGeometry, n_out: int) -> dict:
    return dict(
        C=g.channels, N=n_out, Ho=g.out_h, Wo=g.out_w, kh=g.kh, kw=g.kw, sh=g.stride_h,
        sw=g.stride_w, dh=g.dil_h, dw=g.dil_w, batch=g.batch,
    )


@cuda.jit(cache=True)
def _pointwise_kernel(x, m, bias, out, chans, n_out, plane):
    """out[n,d,p] = bias[d] + Σ_c x[n,c,p]·m[c,d]; one thread per pixel p, blocks over (p, d, n)."""
    p = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    d = cuda.blockIdx.y
    n = cuda.blockIdx.z
    if p < plane:
        acc = bias[d]
        src = n * chans * plane + p
        for c in range(chans):
            acc += x[src + c * plane] * m[c, d]
        out[(n * n_out + d) * plane + p] = acc


@cuda.jit(cache=True)
def _fill_kernel(out, value):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = value


def _launch_pointwise(d_x, d_m, d_bias, d_out, stream=0):
    n, c = d_x.shape[0], d_x.shape[1]
    plane = d_x.shape[2] * d_x.shape[3]
    d = d_m.shape[1]
    grid = (math.ceil(plane / _POINTWISE_BLOCK), d, n)
    args = (d_x.reshape(d_x.size), d_m, d_bias, d_out.reshape(d_out.size), c, d, plane)
    notice_conv_compile(_pointwise_kernel, args, "cuda")
    _pointwise_kernel[grid, _POINTWISE_BLOCK, stream](*args)


class TuckerCorePlan:
    """The core convolution (D1 → D2, kh×kw) ready to launch: kernel in CRSN layout, tap
    table, tiling and launch shape on the device."""

    def __init__(self, core: np.ndarray, geometry: ConvGeometry, tile: CoreTile):
        g = geometry
        self.geometry = g
        self.tile = tile
        self.n_out = core.shape[0]
        if (tile.th, tile.tw) not in TUCKER_TILES:
            raise ValueError(f"no generated Tucker core kernel for a {tile.th}x{tile.tw} output tile")
        self.variant = core_kernel_variant(tile, g)
        if self.variant[-1] != tile.tn:
            raise ValueError(f"no generated Tucker core kernel with {tile.tn} output channels per thread for a "
                             f"{tile.th}x{tile.tw} tile, kernel width {g.kw}, stride {g.stride_w}, dilation {g.dil_w}")
        self._kernel = tucker_core_kernel(*self.variant)
        hi = (tile.th - 1) * g.stride_h + (g.kh - 1) * g.dil_h + 1
        wi = (tile.tw - 1) * g.stride_w + (g.kw - 1) * g.dil_w + 1
        n_thr = core_block_threads(self.n_out, tile.split, tile.tn)
        self.groups = math.ceil(self.n_out / (n_thr * tile.tn))
        # TDC stores the kernel as CRSN so that consecutive threads (output channels) load
        # consecutive weights; zero output channels pad N so that every TN slot has weights.
        n_w = self.groups * n_thr * tile.tn
        crsn = np.zeros(core.shape[1:] + (n_w,), np.float32)
        crsn[..., : self.n_out] = np.transpose(core, (1, 2, 3, 0))
        square = self.variant[2] > 0
        self._wk = cuda.to_device((_warp_interleaved(crsn, self.groups, n_thr, tile.tn) if square else crsn).ravel())
        self._taps = cuda.to_device(np.ascontiguousarray(tap_offsets(g.kh, g.kw, g.dil_h, g.dil_w, wi)[:, 0]))
        self._geo = cuda.to_device(np.array(
            [g.channels, g.height, g.width, self.n_out, g.out_h, g.out_w, g.stride_h, g.stride_w,
             g.pad_top, g.pad_left, g.taps, hi, wi, g.dil_h, g.kh, n_w], dtype=np.int64))
        self.tiles_w = math.ceil(g.out_w / tile.tw)
        self.block = n_thr * tile.split
        if self.block < wi:
            raise ValueError(f"a {tile.th}x{tile.tw} tile with split {tile.split} and TN {tile.tn} runs {self.block} "
                             f"threads a block, fewer than the {wi} input-tile columns the copy needs; take a larger "
                             "split or a smaller TW")
        c_tiles = math.ceil(g.channels / tile.tc)
        self.grid = (math.ceil(g.out_h / tile.th) * self.tiles_w, c_tiles, g.batch * self.groups)
        self.atomic = c_tiles > 1
        self.shared = shared_bytes(tile, _shape_dict(g, self.n_out))

    @property
    def device_bytes(self) -> int:
        return self._wk.nbytes + self._taps.nbytes + self._geo.nbytes

    def __call__(self, d_z, d_out, stream=0):
        """Launch on device arrays ``d_z`` (N, D1, H, W) and ``d_out`` (N, D2, Ho, Wo)."""
        out_flat = d_out.reshape(d_out.size)
        if self.atomic:
            notice_conv_compile(_fill_kernel, (out_flat, np.float32(0.0)), "cuda")
            _fill_kernel[math.ceil(d_out.size / 256), 256, stream](out_flat, np.float32(0.0))
        args = (d_z.reshape(d_z.size), out_flat, self._wk, self._taps, self._geo,
                self.tile.tc, self.tiles_w, self.groups, self.atomic, self.tile.split)
        notice_conv_compile(self._kernel, args, "cuda")
        self._kernel[self.grid, self.block, stream, self.shared](*args)


def core_kernel_variant(tile: CoreTile, g: ConvGeometry) -> tuple[int, int, int, int, int]:
    """The generated kernel a tiling runs on a geometry, as (TH, TW, KH, KW, TN): (TH, TW, k,
    k, TN) for the k×k unit-stride kernel, (TH, TW, 0, kernel width, TN) for a row-register
    kernel, (TH, TW, 0, 0, 1) for the generic one (see :class:`TuckerCorePlan`)."""
    if uses_square_kernel(_shape_dict(g, 0)) and (tile.th, tile.tw, g.kh, tile.tn) in tucker_square_variants():
        return tile.th, tile.tw, g.kh, g.kw, tile.tn
    if g.stride_w == 1 and g.dil_w == 1 and (tile.th, tile.tw, g.kw, tile.tn) in tucker_row_variants():
        return tile.th, tile.tw, 0, g.kw, tile.tn
    return tile.th, tile.tw, 0, 0, 1


def _warp_interleaved(crsn: np.ndarray, groups: int, n_thr: int, tn: int) -> np.ndarray:
    """The k×k kernel's weight layout W[group, c, L // 32, (r·k + s)·TN + t, L % 32] from
    CRSN (N padded to groups·n_thr·TN): thread L of a slice of output-channel group g owns
    the channels g·n_thr·TN + t·n_thr + L (see
    :func:`gpu.conv.codegen.tucker_square_kernel_source`)."""
    c, kh, kw, _ = crsn.shape
    n_ws = -(-n_thr // 32)
    # (c, r, s, group, t, L) with L padded to whole warps
    w = np.zeros((c, kh, kw, groups, tn, n_ws * 32), np.float32)
    w[..., :n_thr] = crsn.reshape(c, kh, kw, groups, tn, n_thr)
    w = w.reshape(c, kh, kw, groups, tn, n_ws, 32)
    # -> (group, c, L // 32, r, s, t, L % 32)
    return np.ascontiguousarray(np.transpose(w, (3, 0, 5, 1, 2, 4, 6)))


def compile_core_kernels(variants) -> None:
    """Launch each generated core kernel of ``variants`` (as :func:`core_kernel_variant`
    gives them) once on a small zero input, so that it is compiled into numba's on-disk
    cache: a later process loads it instead of compiling it (seconds a kernel). Arguments
    have the types of every real launch, so the cached signature is the one used."""
    for th, tw, kh_sq, kw, tn in variants:
        row = kw > 0
        # a row kernel gets a kernel height other than its width, or the k×k kernel would run
        kh, kw_, sw = (kh_sq or 2, kw, 1) if row else (3, 3, 2)
        # 64 output channels per TN slot: a block of 64 threads covers any tile's columns
        n_out = 64 * tn
        z = np.zeros((1, 1, th + kh - 1, (tw - 1) * sw + kw_), np.float32)
        g = conv_geometry(z.shape, (kh, kw_), (1, sw), 0, 1)
        plan = TuckerCorePlan(np.zeros((n_out, 1, kh, kw_), np.float32), g, CoreTile(th, tw, 1, 1, tn))
        plan(cuda.to_device(z), cuda.device_array((1, n_out, g.out_h, g.out_w), np.float32))
    cuda.synchronize()


def _time_core_tile(core, g: ConvGeometry, d_z, d_out):
    from gpu.conv.timing import device_time

    def time_tile(tile: CoreTile) -> float:
        plan = TuckerCorePlan(core, g, tile)
        return device_time(lambda: plan(d_z, d_out), repeats=10)[0]

    return time_tile


def _choose_tile(core, g: ConvGeometry, tiling, d_z=None, d_out=None) -> CoreTile:
    if isinstance(tiling, CoreTile):
        return tiling
    shape = _shape_dict(g, core.shape[0])
    if tiling == "model":
        return select_tile_model(shape, gpu_spec())
    if tiling == "tdc":
        return select_tile_tdc(shape, gpu_spec())
    if tiling == "exhaustive":
        return select_tile_exhaustive(shape, _time_core_tile(core, g, d_z, d_out))[0]
    raise ValueError(f"tiling must be 'model', 'tdc', 'exhaustive' or a CoreTile, not {tiling!r}")


@njit(parallel=True, cache=True)
def _core_conv_cpu(z, out, inc, wk, geo):
    n_img, chans, height, width, n_out, out_h, out_w, sh, sw, pt, pl, n_taps = (
        geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6], geo[7], geo[8], geo[9], geo[10], geo[11]
    )
    for job in prange(n_img * n_out):
        n = job // n_out
        d = job - n * n_out
        for oy in range(out_h):
            for ox in range(out_w):
                y = oy * sh - pt
                x = ox * sw - pl
                ptr = (n * chans * height + y) * width + x
                acc = np.float32(0.0)
                for c in range(chans):
                    for k in range(n_taps):
                        if y >= 0 and y < height and x >= 0 and x < width:
                            acc += z[ptr] * wk[d, c, k]
                        ptr += inc[k, 0]
                        y += inc[k, 1]
                        x += inc[k, 2]
                out[(job * out_h + oy) * out_w + ox] = acc


def _core_cpu(z: np.ndarray, core: np.ndarray, g: ConvGeometry) -> np.ndarray:
    out = np.empty((g.batch, core.shape[0], g.out_h, g.out_w), np.float32)
    inc = pointer_increments(tap_offsets(g.kh, g.kw, g.dil_h, g.dil_w, g.width), g.height * g.width)
    geo = np.array([g.batch, g.channels, g.height, g.width, core.shape[0], g.out_h, g.out_w,
                    g.stride_h, g.stride_w, g.pad_top, g.pad_left, g.taps], dtype=np.int64)
    wk = np.ascontiguousarray(core.reshape(core.shape[0], core.shape[1], g.taps), dtype=np.float32)
    args = (np.ascontiguousarray(z, dtype=np.float32).ravel(), out.ravel(), inc, wk, geo)
    notice_conv_compile(_core_conv_cpu, args, "cpu")
    run_parallel_loop(_core_conv_cpu, *args)
    return out


def _pointwise_cpu(x: np.ndarray, m: np.ndarray, bias=None) -> np.ndarray:
    n, c, h, w = x.shape
    y = np.matmul(m.T[None], x.reshape(n, c, h * w))
    if bias is not None:
        y += bias[None, :, None]
    return np.ascontiguousarray(y.reshape(n, m.shape[1], h, w), dtype=np.float32)


def tucker_core_conv2d(z, core, stride=1, padding=0, dilation=1, backend="auto", tiling="model"):
    """The core convolution alone (Xiang et al. Eq. 3): (N, D1, H, W) ∗ core (D2, D1, kh, kw).

    ``tiling``: ``"model"`` (the fitted cost model :func:`~gpu.conv.tiling.tile_time`),
    ``"tdc"`` (TDC's analytic rule, Eqs. 14–19), ``"exhaustive"`` (time every candidate on
    the GPU) or a :class:`~gpu.conv.tiling.CoreTile`.
    """
    core = _real_finite("core", core, 4)
    backend = resolve_backend(backend)
    on_device = hasattr(z, "copy_to_host")
    if on_device and backend != "cuda":
        z = z.copy_to_host()
    g = conv_geometry(z.shape, core.shape[2:], stride, padding, dilation)
    if g.channels != core.shape[1]:
        raise ValueError(f"the input has {g.channels} channels but the core expects {core.shape[1]}")
    if backend == "cpu":
        return _core_cpu(z, core, g)
    d_z = z if on_device else cuda.to_device(np.ascontiguousarray(z, dtype=np.float32))
    d_out = cuda.device_array((g.batch, core.shape[0], g.out_h, g.out_w), np.float32)
    TuckerCorePlan(core, g, _choose_tile(core, g, tiling, d_z, d_out))(d_z, d_out)
    return d_out if on_device else d_out.copy_to_host()


class TuckerConvPlan:
    """The three Tucker stages on the GPU with their intermediates Z1, Z2 preallocated."""

    def __init__(self, factors: TuckerFactors, geometry: ConvGeometry, tiling="model"):
        g = geometry
        d1, d2 = factors.ranks
        self.geometry = g
        self.n_out = factors.u_out.shape[0]
        self._u_in = cuda.to_device(factors.u_in)
        self._u_out_t = cuda.to_device(np.ascontiguousarray(factors.u_out.T))
        self._zero_d1 = cuda.to_device(np.zeros(d1, np.float32))
        bias = factors.bias if factors.bias is not None else np.zeros(self.n_out, np.float32)
        self._bias = cuda.to_device(bias)
        self._z1 = cuda.device_array((g.batch, d1, g.height, g.width), np.float32)
        self._z2 = cuda.device_array((g.batch, d2, g.out_h, g.out_w), np.float32)
        core_g = replace(g, channels=d1)
        tile = _choose_tile(factors.core, core_g, tiling, self._z1, self._z2)
        self.core = TuckerCorePlan(factors.core, core_g, tile)

    @property
    def device_bytes(self) -> int:
        arrays = [self._u_in, self._u_out_t, self._zero_d1, self._bias, self._z1, self._z2]
        return sum(a.nbytes for a in arrays) + self.core.device_bytes

    def stages(self, d_x, d_out, stream=0) -> dict:
        """The three launches apart (1×1 in, core, 1×1 out), for timing each stage."""
        return {
            "in": lambda: _launch_pointwise(d_x, self._u_in, self._zero_d1, self._z1, stream),
            "core": lambda: self.core(self._z1, self._z2, stream),
            "out": lambda: _launch_pointwise(self._z2, self._u_out_t, self._bias, d_out, stream),
        }

    def __call__(self, d_x, d_out, stream=0):
        for launch in self.stages(d_x, d_out, stream).values():
            launch()


def tucker_conv2d(x, u_in, core, u_out, bias=None, stride=1, padding=0, dilation=1, backend="auto",
                  tiling="model", out=None):
    """Convolve an (N, C, H, W) float32 input with a Tucker-2 kernel (Xiang et al. Eqs. 1–4).

    Equals ``torch.nn.functional.conv2d`` with K[t,c,h,w] = Σ core[d2,d1,h,w]·U_in[c,d1]·
    U_out[t,d2]. Arguments as :func:`gpu.conv.cp.cp_conv2d` (``out`` included); ``tiling``
    as :func:`tucker_core_conv2d`.
    """
    f = check_tucker_factors(u_in, core, u_out, bias)
    backend = resolve_backend(backend)
    on_device = hasattr(x, "copy_to_host")
    if on_device and backend != "cuda":
        x = x.copy_to_host()
    g = conv_geometry(x.shape, f.core.shape[2:], stride, padding, dilation)
    if g.channels != f.u_in.shape[0]:
        raise ValueError(f"the input has {g.channels} channels but U_in has {f.u_in.shape[0]} rows")
    if backend == "cpu":
        z1 = _pointwise_cpu(np.asarray(x, dtype=np.float32), f.u_in)
        z2 = _core_cpu(z1, f.core, replace(g, channels=z1.shape[1]))
        result = _pointwise_cpu(z2, np.ascontiguousarray(f.u_out.T), f.bias)
        if out is None:
            return result
        check_out_array(out, result.shape)[...] = result
        return out
    plan = TuckerConvPlan(f, g, tiling)
    return run_plan_on_gpu(plan, x, (g.batch, plan.n_out, g.out_h, g.out_w), out, on_device)
