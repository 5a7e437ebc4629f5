"""Fused convolution with a CP-decomposed kernel (Reustle, Rabbani & Huang).

The kernel K[t,s,h,w] = Σ_r T[t,r]·S[s,r]·H[h,r]·W[w,r] (Eq. 6) is never formed. One pass
computes (Eq. 9)

    q_r(n,y',x') = Σ_s S[s,r] · Σ_{h,w} H[h,r]·W[w,r]·U[n, s, y'·σ + h·δ − p, x'·σ + w·δ − p]
    V[n,t,y',x'] = bias[t] + Σ_r T[t,r]·q_r,

on the CPU as the separable sequence of Eq. 7 in a numba ``prange`` loop over rows (the
cost of the GPU's separable kernel), and on the GPU with one of two rank-specialised
kernels that :mod:`gpu.conv.codegen` generates at first use (:mod:`gpu.conv.kernel_cache`):

* ``separable``: the pairwise sequence of Eq. 7 (1×1 → kh×1 → 1×kw → 1×1) fused into one
  kernel per output tile, every intermediate in shared memory: C·R + R·(kh + kw) + R·T
  multiply–adds per output pixel plus the tile halo's share of C·R, in its lean form
  (unsigned indices, rank split in stage 1, own stage-4 pixel count);
* ``taps``: Algorithm 2 as published, C·kh·kw·R + R·T multiply–adds per output pixel,
  the kernel that runs where no separable tile fits shared memory.

:class:`CPConvPlan` picks between them per layer: by default it times the separable
launch shapes that a fitted cost model (:func:`separable_time`) ranks first and
Algorithm 2, on its first call, as ``cudnn.benchmark`` does for cuDNN's algorithms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from gpu.conv.index_tables import ConvGeometry, conv_geometry, pointer_increments, tap_offsets
from gpu.conv.kernel_shapes import (CP_BLOCK, CP_LEAN_LOW_SHAPES, CP_LEAN_SHAPES, CP_RANKS, CP_SEP_MAX_BLOCK,
                                   cp_lean_variants)
from gpu.cpu_parallel import run_parallel_loop
from gpu.cuda.backend import resolve_backend

__all__ = [
    "CPFactors",
    "check_cp_factors",
    "check_out_array",
    "run_plan_on_gpu",
    "cp_conv2d",
    "CPConvPlan",
    "choose_lane_count",
    "SeparableTiling",
    "lean_candidates",
    "separable_shared_bytes",
    "choose_separable_tiling",
    "separable_time",
    "separable_shortlist",
    "TUNE_LEAN",
    "LEAN_MODEL",
]

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


#: Dynamic shared memory a block may use without a per-kernel opt-in (CUDA's default cap).
_SHARED_LIMIT = 48 * 1024
#: Ranks per launch of the generated kernels; larger ranks run as accumulating chunks.
_CHUNK = CP_RANKS[-1]


@dataclass(frozen=True)
class SeparableTiling:
    """Launch shape of the lean separable kernel (``gpu.conv.codegen.cp_lean_kernel_source``):
    output tile TH×TW per block, ``cs`` channel lanes per pixel in its first stage,
    ``groups`` blocks per tile that split the output channels, ``block`` threads per
    block, ``px`` pixels a thread in stage 1, ``ns`` rank slices in stage 1 and ``px4``
    pixels a thread in stage 4."""

    th: int
    tw: int
    cs: int
    groups: int
    block: int
    px: int
    ns: int
    px4: int


def _input_tile(g: ConvGeometry, th: int, tw: int) -> tuple[int, int]:
    """Rows and columns of input that a TH×TW output tile reads (the tile and its halo)."""
    return (th - 1) * g.stride_h + (g.kh - 1) * g.dil_h + 1, (tw - 1) * g.stride_w + (g.kw - 1) * g.dil_w + 1


def separable_shared_bytes(g: ConvGeometry, tiling: SeparableTiling, rank: int) -> int:
    """Dynamic shared memory of the separable kernel: A (R·P_in floats, later C at
    (R + 1)·TH·TW) followed by B (R·TH·W_in)."""
    h_in, w_in = _input_tile(g, tiling.th, tiling.tw)
    r = min(rank, _CHUNK)
    return 4 * (max(r * h_in * w_in, (r + 1) * tiling.th * tiling.tw) + r * tiling.th * w_in)


def _stage4_span(p_out: int, block: int, px: int) -> int:
    """Threads per output-channel slot in stage 4: enough for ``px`` pixels each, a power
    of two, at most the block."""
    need = -(-p_out // px)
    span = 1
    while span < need and span < block:
        span *= 2
    return span


def _lean_extents(out: int, usual: tuple[int, ...], most: int) -> list[int]:
    """Tile extents: the usual ones plus the output divided into 1–4 nearly equal parts
    (a 25-wide output in tiles of 25, 13, 9 or 7, not only 16 or 32 with 7 of the 32
    columns outside the image), at most ``most``."""
    return sorted({e for e in usual if e <= most} | {-(-out // k) for k in range(1, 5) if -(-out // k) <= most})


def lean_candidates(g: ConvGeometry, rank: int, n_out: int) -> list[SeparableTiling]:
    """Launch shapes of the lean separable kernels worth timing: every generated
    (ns, px1, px4) of the rank (:func:`gpu.conv.kernel_shapes.cp_lean_shapes`; for ranks
    above 16 only the shapes every rank chunk has); tiles of 32–512 output pixels (1–32
    rows and 8, 16 or 32 columns, or the output cut into 1–4 nearly equal parts; fewer
    pixels only if the tile spans the output, not far beyond the output); blocks of 128
    or 256 threads; channel lanes (powers of two up to 32 and C) whose stage-1 threads
    (lanes × rank slices × pixel groups of px1) fill at most two passes of the block;
    output-channel groups of at least 8 channels while the grid has < 4096 blocks; and
    shared memory within the default cap. Empty when no tile fits (kernels very wide
    after dilation): Algorithm 2 then runs."""
    # every rank chunk (ranks above 16 run as chunks of 16 and the rest) needs the kernel
    chunks = {min(_CHUNK, rank - r0) for r0 in range(0, rank, _CHUNK)}
    variants = set(cp_lean_variants())
    shapes = [(ns, a, p) for ns, a, p in dict.fromkeys(CP_LEAN_SHAPES + CP_LEAN_LOW_SHAPES)
              if all((r, ns, a, p) in variants for r in chunks)]
    cands = []
    for th in _lean_extents(g.out_h, (1, 2, 4, 8, 16, 32), 32):
        for tw in _lean_extents(g.out_w, (8, 16, 32), 32):
            if (th * tw > 512 or (th * tw < 32 and (th < g.out_h or tw < g.out_w))
                    or (th > 2 * g.out_h and th * tw > 32) or (tw > 2 * g.out_w and tw > 8)):
                continue
            tiles = -(-g.out_h // th) * -(-g.out_w // tw)
            h_in, w_in = _input_tile(g, th, tw)
            for block in (128, CP_SEP_MAX_BLOCK):
                for ns, px1, px4 in shapes:
                    cs = 1
                    while cs <= min(32, g.channels) and cs * ns <= block and (
                            cs == 1 or cs * ns * -(-h_in * w_in // px1) <= 2 * block):
                        groups = 1
                        while groups == 1 or (groups <= 32 and -(-n_out // groups) >= 8):
                            if groups == 1 or tiles * g.batch * groups <= 4096:
                                t = SeparableTiling(th, tw, cs, groups, block, px1, ns, px4)
                                if separable_shared_bytes(g, t, rank) <= _SHARED_LIMIT:
                                    cands.append(t)
                            groups *= 2
                        cs *= 2
    return cands


#: Constants of :func:`separable_time`: µs per step of the stage-1 channel chain, of the
#: stage-4 channel loop, of the 1-D tap loops, per stage-1 shuffle, per wave; µs per
#: instruction per SM lane; µs per byte; launch µs. Fitted (robust least squares on log
#: time) to the H100 sweep of the six lean shapes at rank 16 on layers 1–4 of the Reustle
#: configurations at batch 32 (1 317 launch shapes).
LEAN_MODEL = (0.374, 0.209, 0.0114, 0.0139, 1.96, 0.00134, 2.44e-07, 8.8)


def _separable_terms(g: ConvGeometry, rank: int, n_out: int, t: SeparableTiling, spec):
    """(waves, stage-1 chain, stage-4 chain, tap chain, shuffles, instructions, bytes) of
    launch shape ``t``, the quantities :func:`separable_time` weighs."""
    r = min(rank, _CHUNK)
    h_in, w_in = _input_tile(g, t.th, t.tw)
    p_in, p_out = h_in * w_in, t.th * t.tw
    t_g = -(-n_out // t.groups)
    blocks = -(-g.out_h // t.th) * -(-g.out_w // t.tw) * g.batch * t.groups
    # a stage-1 thread holds px·⌈R/ns⌉ accumulators; at rank 16 it took 124–128 registers
    # with up to 32 of them, 164 with 64 (numba-cuda 0.30, H100); 8 stage-1 pixels (ranks
    # 1–8) took 162–197 with 8–64 (ptxas, sm_90)
    rq = -(-r // t.ns)
    regs = 176 if t.px == 8 else 124 if t.px * rq <= 32 else 100 + t.px * rq
    regs = -(-min(255, regs) // 8) * 8
    threads1 = t.cs * t.ns * math.ceil(p_in / t.px)
    per_px_ch = r * (1 + 1 / t.px) + t.ns / t.px
    shared = separable_shared_bytes(g, t, rank) + 4 * CP_SEP_MAX_BLOCK + 1024
    resident = max(1, min(spec.threads_per_sm // t.block, spec.blocks_per_sm, spec.shared_per_sm // shared,
                          spec.regs_per_sm // (t.block * regs)))
    waves = math.ceil(blocks / (spec.sms * resident))
    span = _stage4_span(p_out, t.block, t.px4)
    passes1 = math.ceil(threads1 / t.block)
    chain1 = passes1 * math.ceil(g.channels / (max(1, 8 // t.px) * t.cs))
    shuffles = passes1 * t.px * rq * int(math.log2(t.cs))
    chain4 = math.ceil(p_out / (t.px4 * span)) * math.ceil(t_g / (t.block // span))
    chain23 = (math.ceil(r * w_in / t.block) * g.kh + math.ceil(r * t.tw / t.block) * g.kw) * t.th
    instr = blocks * (p_in * g.channels * per_px_ch + 4 * r * (t.th * w_in * g.kh + p_out * g.kw)
                      + p_out * t_g * (r * (1 + 1 / t.px4) + 3) + 2 * t.block * shuffles)
    traffic = 4 * (g.batch * n_out * g.out_h * g.out_w + blocks * p_in * g.channels / t.groups)
    return waves, chain1, chain4, chain23, shuffles, instr, traffic


def separable_time(g: ConvGeometry, rank: int, n_out: int, t: SeparableTiling, spec=None) -> float:
    """Estimated µs of the separable kernel with launch shape ``t``: a latency chain (per
    wave of resident blocks: the stage-1 channel chain of C·px/(8·cs) steps per pass and
    its shuffle butterfly, the stage-4 walk over the block's output channels, the 1-D
    taps) plus instruction issue over all SMs, memory traffic and the launch. Resident
    blocks per SM follow threads, shared memory and an estimate of the registers. The
    terms add up rather than taking the largest: fitted either way, the sum ranked the
    H100 sweep's best shapes higher (:data:`LEAN_MODEL`)."""
    from gpu.conv.tiling import gpu_spec

    spec = spec or gpu_spec()
    lat1, lat4, lat23, lat_sh, per_wave, per_instr, per_byte, launch = LEAN_MODEL
    waves, chain1, chain4, chain23, shuffles, instr, traffic = _separable_terms(g, rank, n_out, t, spec)
    latency = waves * (lat1 * chain1 + lat4 * chain4 + lat23 * chain23 + lat_sh * shuffles + per_wave)
    return latency + per_instr * instr / (spec.sms * 128) + per_byte * traffic + launch


def _model_pick(g: ConvGeometry, rank: int, n_out: int) -> SeparableTiling | None:
    """The candidate of least :func:`separable_time`, None if no tile fits."""
    from gpu.conv.tiling import gpu_spec

    spec = gpu_spec()
    return min(lean_candidates(g, rank, n_out), key=lambda t: separable_time(g, rank, n_out, t, spec), default=None)


def choose_separable_tiling(g: ConvGeometry, rank: int, n_out: int) -> SeparableTiling:
    """The candidate of least :func:`separable_time`; ValueError if none fits."""
    pick = _model_pick(g, rank, n_out)
    if pick is None:
        raise ValueError(
            f"no tile of the separable CP kernel fits {_SHARED_LIMIT // 1024} KiB of shared memory "
            f"for a {g.kh}x{g.kw} kernel with dilation {g.dil_h}x{g.dil_w}; use method='taps'"
        )
    return pick


#: Launch shapes a plan times per lean kernel (each generated (ns, px1, px4) of the rank),
#: the best by :func:`separable_time`. Per kernel rather than overall: the model's overall
#: shortlist can miss a whole kernel kind that turns out fastest
#: (docs/decisions/conv-cp-lean-shapes.md).
TUNE_LEAN = 8

#: (geometry, rank, output channels) → (method, tiling or lanes) the first call timed fastest.
_TUNED: dict = {}


def separable_shortlist(g: ConvGeometry, rank: int, n_out: int, per_kernel: int = TUNE_LEAN) -> list[SeparableTiling]:
    """For each lean kernel of the rank, its ``per_kernel`` launch shapes of least
    :func:`separable_time`, best first."""
    from gpu.conv.tiling import gpu_spec

    spec = gpu_spec()
    kept: dict = {}
    for t in sorted(lean_candidates(g, rank, n_out), key=lambda t: separable_time(g, rank, n_out, t, spec)):
        shapes = kept.setdefault((t.ns, t.px, t.px4), [])
        if len(shapes) < per_kernel:
            shapes.append(t)
    return [t for shapes in kept.values() for t in shapes]


def _separable_geo(g: ConvGeometry, n_out: int, t: SeparableTiling) -> np.ndarray:
    h_in, w_in = _input_tile(g, t.th, t.tw)
    tiles_x = -(-g.out_w // t.tw)
    tiles = -(-g.out_h // t.th) * tiles_x
    span = _stage4_span(t.th * t.tw, t.block, t.px4)
    return np.array(
        [tiles, g.channels, g.height, g.width, n_out, g.out_h, g.out_w,
         g.stride_h, g.stride_w, g.pad_top, g.pad_left, g.kh, g.kw, g.dil_h, g.dil_w,
         t.th, t.tw, tiles_x, h_in, w_in, t.cs, -(-n_out // t.groups), span, t.block // span],
        dtype=np.int64,
    )


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
def _cp_conv_cpu(u, out, s_f, h_f, w_f, t_f, bias, geo):
    """The separable sequence of Eq. 7 on the CPU, image by image: A = U ×_S S on the padded
    input rows the output needs (zero outside the image), then per output row the kh and
    kw taps and V = bias + T·C. Rows run in parallel (``prange``); the intermediates are
    host buffers of R·rows·cols floats."""
    n_img, chans, height, width, n_out, out_h, out_w, sh, sw, pt, pl = (
        geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6], geo[7], geo[8], geo[9], geo[10]
    )
    kh, kw, dh, dw = geo[11], geo[12], geo[13], geo[14]
    rank = s_f.shape[1]
    rows = (out_h - 1) * sh + (kh - 1) * dh + 1
    cols = (out_w - 1) * sw + (kw - 1) * dw + 1
    x_lo = max(0, pl)
    x_hi = min(cols, pl + width)
    a = np.zeros((rank, rows, cols), np.float32)
    b = np.empty((rank, out_h, cols), np.float32)
    c = np.empty((rank, out_h, out_w), np.float32)
    for n in range(n_img):
        for yp in prange(rows):
            y = yp - pt
            for r in range(rank):
                a[r, yp, :] = 0.0
            if y >= 0 and y < height:
                for s in range(chans):
                    for r in range(rank):
                        sr = s_f[s, r]
                        for xp in range(x_lo, x_hi):
                            a[r, yp, xp] += sr * u[n, s, y, xp - pl]
        for oy in prange(out_h):
            for r in range(rank):
                for xp in range(cols):
                    acc = np.float32(0.0)
                    for h in range(kh):
                        acc += h_f[h, r] * a[r, oy * sh + h * dh, xp]
                    b[r, oy, xp] = acc
                for ox in range(out_w):
                    acc = np.float32(0.0)
                    for w in range(kw):
                        acc += w_f[w, r] * b[r, oy, ox * sw + w * dw]
                    c[r, oy, ox] = acc
            for t in range(n_out):
                for ox in range(out_w):
                    out[n, t, oy, ox] = bias[t]
                for r in range(rank):
                    tr = t_f[t, r]
                    for ox in range(out_w):
                        out[n, t, oy, ox] += tr * c[r, oy, ox]


class CPConvPlan:
    """A CP conv layer ready to launch on the GPU: factors, tables and launch shape on the device.

    ``method``: ``taps`` (Algorithm 2), ``separable`` (Eq. 7 fused per tile) or ``auto``.
    ``lanes`` sets Algorithm 2's channel lanes per pixel, ``tiling`` the separable
    kernel's launch shape (either implies its method under ``auto``). Otherwise ``auto``
    times, on the first call and on the caller's arrays, Algorithm 2 and the separable
    launch shapes of :func:`separable_shortlist` (the ``TUNE_LEAN`` shapes of each lean
    kernel of the rank that :func:`separable_time` ranks first), and keeps the fastest
    (remembered per layer shape for later plans in the process, e.g. the batch chunks of
    a job). The separable kernels won every Reustle configuration measured
    (docs/decisions/conv-cp-lean-shapes.md); Algorithm 2 stays a timed candidate and runs
    where no separable tile fits. Under the
    CUDA simulator ``auto`` takes the model's first separable shape untimed. After the
    first call ``method``, ``tiling`` and ``lanes`` say what runs. Ranks above 16 run as
    consecutive rank chunks, the later ones accumulating into the output (the CP sum over
    r splits into partial sums).
    """

    def __init__(self, factors: CPFactors, geometry: ConvGeometry, lanes: int | None = None,
                 method: str = "auto", tiling: SeparableTiling | None = None):
        from numba import cuda

        from gpu.cuda.simulator import simulator_active

        if method not in ("auto", "taps", "separable"):
            raise ValueError(f"method must be auto, taps or separable, not {method!r}")
        g = geometry
        self.geometry = g
        self.n_out = factors.t.shape[0]
        self._factors = factors
        self._key = (g, factors.rank, self.n_out)
        self._zero_bias = cuda.to_device(np.zeros(self.n_out, np.float32))
        self._bias = cuda.to_device(factors.bias) if factors.bias is not None else self._zero_bias
        if method == "auto" and tiling is not None:
            method = "separable"
        elif method == "auto" and lanes is not None:
            method = "taps"
        if method == "taps":
            variants = [("taps", lanes)]
        elif method == "separable":
            variants = [("separable", tiling or choose_separable_tiling(g, factors.rank, self.n_out))]
        elif self._key in _TUNED:
            variants = [_TUNED[self._key]]
        else:
            if simulator_active():
                pick = _model_pick(g, factors.rank, self.n_out)
                shortlist = [pick] if pick else []
            else:
                shortlist = separable_shortlist(g, factors.rank, self.n_out)
            variants = [("separable", t) for t in shortlist]
            if not (shortlist and simulator_active()):
                variants.append(("taps", None))
        self._variants = [(m, self._taps_launches(p) if m == "taps" else self._separable_launches(p))
                          for m, p in variants]
        #: (method, tiling or lanes, seconds) of every variant the first call timed
        self.tuning_times: list = []
        self._choose(0 if len(variants) == 1 else None)

    def _chunks(self):
        """(rank range, accumulate) of each launch: ranks above 16 in chunks of 16."""
        rank = self._factors.rank
        return [((r0, min(r0 + _CHUNK, rank)), r0 > 0) for r0 in range(0, rank, _CHUNK)]

    def _separable_launches(self, tiling: SeparableTiling):
        from numba import cuda

        from gpu.conv.kernel_cache import cp_lean_kernel

        g, f = self.geometry, self._factors
        geo = _separable_geo(g, self.n_out, tiling)
        grid = (int(geo[0]) * g.batch, tiling.groups)
        d_geo = cuda.to_device(geo)
        launches = []
        for (r0, r1), accumulate in self._chunks():
            mats = [np.ascontiguousarray(m[:, r0:r1]) for m in (f.s, f.h, f.w, f.t)]
            kernel = cp_lean_kernel(r1 - r0, tiling.ns, tiling.px, tiling.px4)
            # S padded with zero columns to ns rank slices of equal width
            width = -(-(r1 - r0) // tiling.ns) * tiling.ns
            mats[0] = np.pad(mats[0], ((0, 0), (0, width - (r1 - r0))))
            mats = [cuda.to_device(m.ravel()) for m in mats]
            launches.append((kernel, grid, tiling.block,
                             separable_shared_bytes(g, tiling, r1 - r0),
                             mats + [self._zero_bias if accumulate else self._bias, d_geo], accumulate))
        return tiling, launches

    def _taps_launches(self, lanes: int | None):
        from numba import cuda

        from gpu.conv.kernel_cache import cp_taps_kernel

        g, f = self.geometry, self._factors
        pixels = g.batch * g.out_h * g.out_w
        lanes = lanes or choose_lane_count(g.channels, pixels, _resident_threads())
        if lanes not in (1, 2, 4, 8, 16, 32):
            raise ValueError(f"lanes must be a power of two up to 32, not {lanes}")
        inc = cuda.to_device(pointer_increments(tap_offsets(g.kh, g.kw, g.dil_h, g.dil_w, g.width), g.height * g.width))
        d_geo = cuda.to_device(_geo_array(g, self.n_out))
        hw = _tap_weights(f, g)
        grid = -(-pixels * lanes // CP_BLOCK)
        launches = []
        for (r0, r1), accumulate in self._chunks():
            args = [inc, cuda.to_device(np.ascontiguousarray(hw[:, r0:r1]).ravel()),
                    cuda.to_device(np.ascontiguousarray(f.s[:, r0:r1])),
                    cuda.to_device(np.ascontiguousarray(f.t[:, r0:r1])),
                    self._zero_bias if accumulate else self._bias, d_geo, lanes]
            launches.append((cp_taps_kernel(r1 - r0), grid, CP_BLOCK, (g.taps * (r1 - r0) + 3 * g.taps) * 4, args, accumulate))
        return lanes, launches

    def _choose(self, index: int | None) -> None:
        """Keep variant ``index`` (None: not chosen yet) and drop the others' buffers."""
        if index is None:
            self.method, self.tiling, self.lanes = "auto", None, None
            return
        method, (param, launches) = self._variants[index]
        self._variants = [self._variants[index]]
        self._launches = launches
        self.method = method
        self.tiling = param if method == "separable" else None
        self.lanes = param if method == "taps" else None

    @property
    def device_bytes(self) -> int:
        """Bytes of the plan's own device buffers (factors, tables; each counted once)."""
        arrays = {id(a): a for _, (_, launches) in self._variants for *_, args, _ in launches
                  for a in args if hasattr(a, "nbytes")}
        arrays[id(self._zero_bias)] = self._zero_bias
        arrays[id(self._bias)] = self._bias
        return sum(a.nbytes for a in arrays.values())

    @staticmethod
    def _launch(launches, u_flat, out_flat, stream=0):
        from gpu.conv.kernel_cache import notice_conv_compile

        for kernel, grid, block, shared, args, accumulate in launches:
            notice_conv_compile(kernel, (u_flat, out_flat, *args, accumulate), "cuda")
            kernel[grid, block, stream, shared](u_flat, out_flat, *args, accumulate)

    def __call__(self, d_u, d_out, stream=0):
        """Launch on device arrays: ``d_u`` (N, C, H, W) and ``d_out`` (N, T, Ho, Wo), float32."""
        u_flat = d_u.reshape(d_u.size)
        out_flat = d_out.reshape(d_out.size)
        if self.method == "auto":
            from gpu.conv.timing import device_times

            times = device_times([lambda v=v: self._launch(v[1][1], u_flat, out_flat) for v in self._variants],
                                 repeats=3)
            self.tuning_times = [(m, param, t) for (m, (param, _)), t in zip(self._variants, times)]
            self._choose(min(range(len(times)), key=times.__getitem__))
            _TUNED[self._key] = (self.method, self.tiling or self.lanes)
        self._launch(self._launches, u_flat, out_flat, stream)


def _resident_threads() -> int:
    from gpu.conv.tiling import gpu_spec

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


def cp_conv2d(u, s, h, w, t, bias=None, stride=1, padding=0, dilation=1, backend="auto", lanes=None, out=None,
              method="auto"):
    """Convolve an (N, C, H, W) float32 input with a CP-decomposed (T, C, kh, kw) kernel.

    Equals ``torch.nn.functional.conv2d(u, K, bias, stride, padding, dilation)`` with
    K[t,s,h,w] = Σ_r T[t,r]·S[s,r]·H[h,r]·W[w,r] (Reustle et al. Eqs. 6, 8–9), in float32.
    ``padding`` is an integer, a pair or ``"same"`` (stride 1). ``backend`` is
    ``auto|cpu|cuda``; with ``cuda`` a numba device array in gives a device array out.
    ``method`` picks the GPU kernel (``auto|taps|separable``, see :class:`CPConvPlan`);
    ``lanes`` overrides the channel lanes per pixel of the ``taps`` kernel. ``out``: a host
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
        return run_plan_on_gpu(CPConvPlan(f, g, lanes, method), u, (g.batch, f.t.shape[0], g.out_h, g.out_w), out, on_device)
    u32 = np.ascontiguousarray(u, dtype=np.float32)
    out = check_out_array(out, (g.batch, f.t.shape[0], g.out_h, g.out_w))
    bias_arr = f.bias if f.bias is not None else np.zeros(f.t.shape[0], np.float32)
    geo = np.array([g.batch, g.channels, g.height, g.width, f.t.shape[0], g.out_h, g.out_w, g.stride_h, g.stride_w,
                    g.pad_top, g.pad_left, g.kh, g.kw, g.dil_h, g.dil_w], dtype=np.int64)
    from gpu.conv.kernel_cache import notice_conv_compile

    args = (u32, out, f.s, f.h, f.w, f.t, bias_arr, geo)
    notice_conv_compile(_cp_conv_cpu, args, "cpu")
    run_parallel_loop(_cp_conv_cpu, *args)
    return out
