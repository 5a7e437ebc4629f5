"""Tile selection for the Tucker core convolution (Xiang et al., TDC, Sections 5.3–5.5).

A tiling (TH, TW, TC) cuts the output into TH×TW tiles and the input channels into chunks
of TC; each (tile, chunk, image) is one thread block of one thread per output channel.
The analytic model ranks every candidate by its computation latency

    comp_latency = comp_waves · comp_latency_blk,
    comp_waves   = ⌈(#blocks · N) / (GPU_ths · occupancy)⌉                      (Eq. 14)
    comp_latency_blk = 2·(TH+R−1)·(TW+S−1)·TC·GPU_ths·R·S / GPU_peak           (Sec. 5.3)

keeps the best ``top_fraction`` (the paper: 5 % on the A100, 15 % on the 2080 Ti) and among
those picks the smallest global data volume

    volume_k = ⌈H/TH⌉·⌈W/TW⌉·C·N·R·S                                          (Eq. 16)
    volume_x = ⌈H/TH⌉·⌈W/TW⌉·C·(TH+R−1)·(TW+S−1)                               (Eq. 17)
    volume_y = H·W·N·⌈C/TC⌉                                                    (Eq. 18)
    volume   = volume_x + volume_k + volume_y.                                 (Eq. 19)

Eq. 16 as printed omits the R·S taps of each (c, n) weight that every block loads; they are
counted here. With stride and dilation the input tile is (TH−1)·σ + (R−1)·δ + 1 rows.
The exhaustive tuner (Sec. 5.5, "oracle") times every candidate instead.

Our kernels add two tiling parameters to (TH, TW, TC): ``split`` thread slices per output
channel inside a block, which share the input tile and reduce in shared memory, and TN
output channels per thread. TDC's ranking ignores what decided the measured times on the
H100 (atomic adds and the zero-fill when TC < C, the weight-load latency that each
thread's channel loop waits on, the uncoalesced tile copy, shared-memory bandwidth), and
its picks ran well behind the best tiles (docs/decisions/conv-tiling-model.md). So
``tiling="model"`` uses :func:`tile_time`, a roofline-and-latency estimate of the kernel
time whose constants (:class:`CostModel`) were fitted to every candidate's time on 22
shapes (``python3 -m bench.conv --sections sweep``); TDC's rule stays available as
:func:`select_tile_tdc`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from gpu.conv.kernel_shapes import TUCKER_ROW_KW, TUCKER_ROW_TN, TUCKER_SQUARE_K, TUCKER_TILES, square_tile_pitch

__all__ = [
    "CoreTile",
    "GpuSpec",
    "gpu_spec",
    "core_block_threads",
    "tile_candidates",
    "occupancy",
    "comp_latency",
    "data_volume",
    "select_tile_model",
    "select_tile_tdc",
    "CostModel",
    "tile_time",
    "select_tile_exhaustive",
    "shared_bytes",
    "copy_fits",
    "uses_square_kernel",
    "SQUARE_COST",
    "MODEL_MAX_TN",
]

#: Dynamic shared memory a block may use without an opt-in attribute.
_SHARED_LIMIT = 48 * 1024


@dataclass(frozen=True)
class CoreTile:
    """TH×TW outputs per thread, TC input channels per block, ``split`` thread slices per
    output channel inside the block (each takes every split-th of the TC channels), TN
    output channels per thread (row-register kernels only)."""

    th: int
    tw: int
    tc: int
    split: int = 1
    tn: int = 1


@dataclass(frozen=True)
class GpuSpec:
    """What the model needs of a GPU. Defaults: an H100 SXM (fp32 without tensor cores)."""

    sms: int = 132
    threads_per_sm: int = 2048
    blocks_per_sm: int = 32
    regs_per_sm: int = 65536
    shared_per_sm: int = 228 * 1024
    peak_flops: float = 67e12

    @property
    def gpu_threads(self) -> int:
        return self.sms * self.threads_per_sm


def gpu_spec() -> GpuSpec:
    """The current CUDA device's figures, or the H100 defaults without a GPU."""
    from gpu.cuda.device import cuda_available

    if not cuda_available():
        return GpuSpec()
    from numba import cuda

    dev = cuda.get_current_device()
    default = GpuSpec()

    def attr(name: str, fallback: int) -> int:
        # not every numba-cuda release maps every driver attribute
        try:
            return int(getattr(dev, name))
        except (AttributeError, KeyError, ValueError):
            return fallback

    return GpuSpec(
        sms=attr("MULTIPROCESSOR_COUNT", default.sms),
        threads_per_sm=attr("MAX_THREADS_PER_MULTIPROCESSOR", default.threads_per_sm),
        regs_per_sm=attr("MAX_REGISTERS_PER_MULTIPROCESSOR", default.regs_per_sm),
        shared_per_sm=attr("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR", default.shared_per_sm),
    )


def core_block_threads(n_out: int, split: int = 1, tn: int = 1) -> int:
    """Threads per channel slice: one per TN output channels (TDC: TN = 1), in units of
    32 / TN threads (whole warps for TN = 1, half warps for TN = 2, quarter warps for
    TN = 4, so that 32 channels fill a slice), at most 256 / split (more output channels
    take several blocks)."""
    unit = 32 // tn
    return min(256 // split, unit * math.ceil(math.ceil(n_out / tn) / unit))


def _input_tile(tile: CoreTile, shape) -> tuple[int, int]:
    r, s, sh, sw, dh, dw = shape["kh"], shape["kw"], shape["sh"], shape["sw"], shape["dh"], shape["dw"]
    return (tile.th - 1) * sh + (r - 1) * dh + 1, (tile.tw - 1) * sw + (s - 1) * dw + 1


def uses_square_kernel(shape) -> bool:
    """Whether the core runs the k×k unit-stride kernel
    (:func:`gpu.conv.codegen.tucker_square_kernel_source`): a square generated kernel size,
    unit stride and dilation in both directions."""
    return (shape["kh"] == shape["kw"] and shape["kw"] in TUCKER_SQUARE_K
            and shape["sh"] == shape["sw"] == shape["dh"] == shape["dw"] == 1)


def shared_bytes(tile: CoreTile, shape) -> int:
    """The input tile, or the staging area of the block's TH·TW sums per thread if larger
    (see :func:`gpu.conv.codegen.tucker_kernel_source`); the k×k kernel's rows lie at a
    pitch rounded up to 4 floats."""
    hi, wi = _input_tile(tile, shape)
    if uses_square_kernel(shape):
        wi = square_tile_pitch(tile.tw, shape["kw"])
    threads = core_block_threads(shape["N"], tile.split, tile.tn) * tile.split
    return 4 * max(tile.tc * hi * wi, threads * tile.tn * (tile.th * tile.tw | 1))


def copy_fits(tile: CoreTile, shape) -> bool:
    """Whether the block has a thread per column of its input tile, which the tile copy
    needs (one column per thread, see :func:`gpu.conv.codegen._tucker_prologue`)."""
    return core_block_threads(shape["N"], tile.split, tile.tn) * tile.split >= _input_tile(tile, shape)[1]


#: Channel slices per block the candidates take.
SPLITS = (1, 2, 4, 8)


#: The largest TN the fitted cost model ranks: its sweep had no TN = 4 kernels, and the
#: TN = 4 tiles measured since ran no faster than the TN = 2 ones (docs/decisions/conv-tiling-model.md).
MODEL_MAX_TN = 2


def tile_candidates(shape, max_tn: int | None = None) -> list[CoreTile]:
    """All generated (TH, TW) that fit the output, with TC a power of two below C or C
    itself, and split ≤ TC slices whose whole warps of output channels fit 256 threads,
    whose shared memory fits the limit and whose block has a thread per input-tile column;
    TN up to ``max_tn`` (default: every generated TN).

    ``shape``: dict with C, N, Ho, Wo, kh, kw, sh, sw, dh, dw (and batch).
    """
    c = shape["C"]
    tcs = sorted({min(c, 2**i) for i in range(0, max(1, math.ceil(math.log2(c))) + 1)})
    rows = shape["sw"] == 1 and shape["dw"] == 1 and shape["kw"] in TUCKER_ROW_KW
    tns = tuple(tn for tn in TUCKER_ROW_TN if max_tn is None or tn <= max_tn) if rows else (1,)
    out = []
    for th, tw in TUCKER_TILES:
        if th > shape["Ho"] or tw > shape["Wo"]:
            continue
        for tn in tns:
            if tn * th * tw > 64:
                continue
            slice_threads = core_block_threads(shape["N"], 1, tn)
            for tc in tcs:
                for split in SPLITS:
                    if split > tc or (split > 1 and split * slice_threads > 256):
                        continue
                    t = CoreTile(th, tw, tc, split, tn)
                    if shared_bytes(t, shape) <= _SHARED_LIMIT and copy_fits(t, shape):
                        out.append(t)
    return out


def occupancy(tile: CoreTile, shape, spec: GpuSpec) -> float:
    """Resident threads per SM / maximum, from threads, shared memory and registers per block.

    Registers per thread are estimated as the TH·TW accumulators plus 32 for addresses and
    loop state.
    """
    threads = core_block_threads(shape["N"], tile.split, tile.tn) * tile.split
    regs = tile.tn * tile.th * tile.tw + 32
    blocks = min(
        spec.blocks_per_sm,
        spec.threads_per_sm // threads,
        spec.shared_per_sm // max(1, shared_bytes(tile, shape) + 1024),
        spec.regs_per_sm // (regs * threads),
    )
    return max(blocks, 0) * threads / spec.threads_per_sm


def _blocks(tile: CoreTile, shape) -> int:
    groups = math.ceil(shape["N"] / (core_block_threads(shape["N"], tile.split, tile.tn) * tile.tn))
    return (
        math.ceil(shape["Ho"] / tile.th) * math.ceil(shape["Wo"] / tile.tw)
        * math.ceil(shape["C"] / tile.tc) * shape.get("batch", 1) * groups
    )


def comp_latency(tile: CoreTile, shape, spec: GpuSpec) -> float:
    """Eq. 14 waves × the per-block latency of Sec. 5.3, in seconds (inf if it cannot run)."""
    occ = occupancy(tile, shape, spec)
    if occ <= 0:
        return math.inf
    threads = _blocks(tile, shape) * core_block_threads(shape["N"], tile.split, tile.tn) * tile.split
    waves = math.ceil(threads / (spec.gpu_threads * occ))
    r, s = shape["kh"], shape["kw"]
    per_thread_c = math.ceil(tile.tc / tile.split)
    blk = 2 * (tile.th + r - 1) * (tile.tw + s - 1) * per_thread_c * tile.tn * spec.gpu_threads * r * s / spec.peak_flops
    return waves * blk


def data_volume(tile: CoreTile, shape) -> int:
    """Eqs. 16–19: elements moved through global memory."""
    tiles = math.ceil(shape["Ho"] / tile.th) * math.ceil(shape["Wo"] / tile.tw) * shape.get("batch", 1)
    hi, wi = _input_tile(tile, shape)
    vol_k = tiles * shape["C"] * shape["N"] * shape["kh"] * shape["kw"]
    vol_x = tiles * shape["C"] * hi * wi
    vol_y = shape["Ho"] * shape["Wo"] * shape["N"] * math.ceil(shape["C"] / tile.tc) * shape.get("batch", 1)
    return vol_x + vol_k + vol_y


def select_tile_tdc(shape, spec: GpuSpec | None = None, top_fraction: float = 0.05) -> CoreTile:
    """TDC's analytic choice (Sec. 5.5): the top fraction by computation latency, then the
    least data volume."""
    spec = spec or GpuSpec()
    cands = _candidates_or_raise(shape)
    ranked = sorted(cands, key=lambda t: (comp_latency(t, shape, spec), data_volume(t, shape)))
    keep = ranked[: max(1, math.ceil(top_fraction * len(ranked)))]
    return min(keep, key=lambda t: (data_volume(t, shape), comp_latency(t, shape, spec)))


def _candidates_or_raise(shape) -> list[CoreTile]:
    cands = tile_candidates(shape, MODEL_MAX_TN)
    if not cands:
        raise ValueError("no Tucker core tiling fits this shape in 48 KiB of shared memory")
    return cands


@dataclass(frozen=True)
class CostModel:
    """Constants of :func:`tile_time`, fitted on an H100 (2026-11-22) to the times of all
    18 992 candidates of the 18 TDC shapes and 4 layer shapes with batch 1 and 32: first by
    least squares on log time, then refined for the quality of the pick. The fit predates
    the column-wise tile copy and the weight prefetch of the row kernels and has not been
    redone since: a version whose copy and latency terms followed the new code instead of a
    fit picked slower tiles on most TDC shapes, so the fitted model stays until a new sweep
    refits it (docs/decisions/conv-tiling-model.md)."""

    iteration_latency: float = 400.0  # cycles a thread waits per (channel, kernel row): weight loads
    iteration_overhead: float = 15.0  # warp instructions per iteration besides FMAs and loads
    copy_instructions: float = 95.0  # issue cost per tile element a thread copies (uncoalesced)
    copy_latency: float = 580.0  # cycles per tile element a thread copies, on the critical path
    fill_us: float = 1.8  # the zero-fill launch before atomic accumulation
    atomic_us_per_million: float = 7.3  # per million atomic adds
    launch_us: float = 2.8  # a launch back to back
    issue_per_cycle: float = 2.5  # warp instructions per SM per cycle reached
    bytes_per_us: float = 2.73e6  # global memory / L2 bandwidth reached
    clock_mhz: float = 1700.0
    warp_overhead: float = 0.0  # instructions a warp issues outside its loops (indices, set-up)
    block_latency: float = 0.0  # cycles a block's prologue and epilogue add to its chain


#: Constants of :func:`tile_time` for the k×k unit-stride kernel
#: (:func:`gpu.conv.codegen.tucker_square_kernel_source`), fitted on the H100 (2026-11-22)
#: to the times of all 22 531 candidates (TN ≤ 4) of the 18 TDC shapes with that kernel
#: (``python3 -m bench.conv --sections sweep``): least squares on log time, then the pick quality.
#: Global traffic never limited a candidate in the fit (``bytes_per_us`` went to the top of
#: its range), and ``launch_us`` also carries the fixed latency of every launch (parameter
#: loads, index set-up, first weight load), so it exceeds an empty kernel's.
SQUARE_COST = CostModel(
    iteration_latency=131.0, iteration_overhead=8.3, copy_instructions=20.7, copy_latency=620.0,
    fill_us=1.81, atomic_us_per_million=4.76, launch_us=6.21, issue_per_cycle=3.04, bytes_per_us=2e10,
    warp_overhead=697.0, block_latency=1136.0,
)


def _registers(tile: CoreTile, shape) -> int:
    """Registers a thread holds: accumulators, weights (the k×k kernel keeps a channel's
    and the next channel's k·k·TN), one input row, addresses and loop state."""
    k = shape["kw"]
    if uses_square_kernel(shape):
        return tile.tn * (tile.th * tile.tw + 2 * k * k) + tile.tw + k - 1 + 48
    return tile.tn * (tile.th * tile.tw + k) + tile.tw + k - 1 + 40


def _resident_blocks(tile: CoreTile, shape, spec: GpuSpec, threads: int) -> int:
    regs = _registers(tile, shape)
    return max(1, min(
        spec.blocks_per_sm,
        spec.threads_per_sm // threads,
        spec.shared_per_sm // (shared_bytes(tile, shape) + 1024),
        spec.regs_per_sm // (regs * threads),
    ))


def tile_time(tile: CoreTile, shape, spec: GpuSpec | None = None, cost: CostModel | None = None) -> float:
    """Estimated kernel time of a tiling in µs: the largest of instruction issue, the
    shared-memory pipe, global traffic and the latency chain of the blocks' waves (Eq. 14
    with blocks for threads), plus the launch and, with TC < C, the zero-fill and the
    atomic adds.

    Per warp and (channel, kernel row) iteration a row-register kernel issues TN·TH·TW·S
    FMAs, TH·(TW+S−1) shared loads (one per SM per cycle) and TN·S weight loads; a thread
    runs ⌈TC/split⌉·R iterations, each waiting ``iteration_latency`` cycles for its weights
    unless co-resident warps fill the gap. The k×k unit-stride kernel runs ⌈TC/split⌉
    iterations of TN·TH·TW·k² FMAs, (TH+k−1)·⌈pitch/4⌉ vector shared loads and k²·TN
    weight loads and register moves, with its own constants (``SQUARE_COST``).
    """
    spec = spec or GpuSpec()
    square = uses_square_kernel(shape)
    cost = cost or (SQUARE_COST if square else CostModel())
    r, s = shape["kh"], shape["kw"]
    n_thr = core_block_threads(shape["N"], tile.split, tile.tn)
    threads = n_thr * tile.split
    warps = math.ceil(threads / 32)
    c_tiles = math.ceil(shape["C"] / tile.tc)
    blocks = _blocks(tile, shape)
    hi, wi = _input_tile(tile, shape)
    copy = tile.tc * hi * wi
    copy_per_thread = math.ceil(copy / threads)
    if square:
        iters = math.ceil(tile.tc / tile.split)
        fma = tile.tn * tile.th * tile.tw * r * s
        lds = hi * math.ceil(square_tile_pitch(tile.tw, s) / 4)
        per_iter = fma + lds + 2 * tile.tn * r * s + cost.iteration_overhead
    else:
        iters = math.ceil(tile.tc / tile.split) * r
        fma = tile.tn * tile.th * tile.tw * s
        lds = tile.th * (tile.tw + s - 1)
        per_iter = fma + lds + tile.tn * s + cost.iteration_overhead
    epilogue = n_thr * tile.tn * tile.th * tile.tw * tile.split * (8 + 2 * (tile.split - 1)) / 32 / warps
    warp_instr = iters * per_iter + copy_per_thread * cost.copy_instructions + epilogue + cost.warp_overhead
    cycles_per_us = cost.clock_mhz
    issue = blocks * warps * warp_instr / (spec.sms * cost.issue_per_cycle) / cycles_per_us
    shared = blocks * warps * iters * lds / spec.sms / cycles_per_us
    resident = _resident_blocks(tile, shape, spec, threads)
    waves = math.ceil(blocks / (spec.sms * resident))
    busy = per_iter * min(resident * warps, 32) / cost.issue_per_cycle / 8
    chain = (iters * (cost.iteration_latency + busy) + copy_per_thread * cost.copy_latency + cost.iteration_latency
             + cost.block_latency)
    latency = waves * chain / cycles_per_us
    outputs = shape["Ho"] * shape["Wo"] * shape["N"] * shape.get("batch", 1)
    traffic = 4 * (blocks * copy + blocks * tile.tc * r * s * n_thr * tile.tn + outputs * c_tiles)
    t = max(issue, shared, traffic / cost.bytes_per_us, latency) + cost.launch_us
    if c_tiles > 1:
        t += cost.fill_us + cost.atomic_us_per_million * outputs * c_tiles / 1e6
    return t


def select_tile_model(shape, spec: GpuSpec | None = None, cost: CostModel | None = None) -> CoreTile:
    """The candidate of least :func:`tile_time`; ties go to the least data volume (Eq. 19)."""
    spec = spec or GpuSpec()
    return min(_candidates_or_raise(shape), key=lambda t: (tile_time(t, shape, spec, cost), data_volume(t, shape)))


def select_tile_exhaustive(shape, time_tile: Callable[[CoreTile], float]) -> tuple[CoreTile, dict]:
    """TDC's "oracle" tuner: time every candidate with ``time_tile`` (seconds), keep the fastest."""
    timings = {t: time_tile(t) for t in tile_candidates(shape)}
    return min(timings, key=timings.get), timings
