"""Factorized conv benchmark: fused CP and Tucker core kernels vs cuDNN and the PyTorch
pairwise sequence, on one GPU, in one run.

    python3 -m bench.conv [--quick] [--sections check,cp,cpsweep,tdc,tucker,sweep] [--json PATH]

Kernel times are GPU time per call from CUDA events around back-to-back launches queued
behind a sleeping kernel (gpu/conv/timing.py), the same for every side; "host" is the
Python-side time per call (launch only). cuDNN is PyTorch fp32 with TF32 off and
``cudnn.benchmark`` on. Memory: PyTorch's peak allocation during one call (inputs,
weights, output, workspace, intermediates), and for ours the exact sum of our device
buffers (input, output, factors, tables, intermediates).

The tile sweep and the TDC section first compile the core kernels they will launch in
parallel processes (numba's on-disk cache), since one process compiles one generated
kernel at a time.

``--quick`` checks every kernel against a float64 direct convolution on small random
shapes and against cuDNN on the five layers, then times one layer. ``--json PATH`` keeps
every row and every timed candidate (tiles, launch shapes) as JSON lines.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
import traceback

import numpy as np
import torch
import torch.nn.functional as F
from numba import config as numba_config
from numba import cuda

from bench.harness import REPO, Column, Report, bench_parser, child_environment, ratio
from gpu.conv.direct import cp_kernel, direct_conv2d, tucker_kernel
from gpu.conv.index_tables import conv_geometry
from gpu.conv.tiling import gpu_spec, select_tile_exhaustive, select_tile_model, tile_candidates
from gpu.conv.timing import device_time, device_times
from gpu.conv.cp import (
    CPConvPlan,
    check_cp_factors,
    choose_separable_tiling,
    cp_conv2d,
    lean_candidates,
)
from gpu.conv.tucker import (
    TuckerConvPlan,
    TuckerCorePlan,
    check_tucker_factors,
    core_kernel_variant,
    tucker_conv2d,
    tucker_core_conv2d,
)

torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.benchmark = True

# Reustle, Rabbani & Huang, Table 1: (C, H, W), (T, kh, kw), padding; stride 1.
REUSTLE_LAYERS = [
    ((3, 224, 224), (96, 11, 11), 5),
    ((48, 55, 55), (256, 5, 5), 2),
    ((256, 27, 27), (384, 3, 3), 0),
    ((192, 13, 13), (384, 3, 3), 0),
    ((192, 13, 13), (256, 3, 3), 1),
]
RANKS = (1, 2, 4, 8, 16)
BATCHES = (1, 32)
# Xiang et al. (TDC) core shapes (C, N, H, W), 3×3, padding 1, batch 1.
TDC_SHAPES = [
    (64, 32, 224, 224), (64, 32, 112, 112), (32, 32, 56, 56), (64, 32, 56, 56), (64, 64, 56, 56),
    (32, 32, 28, 28), (64, 32, 28, 28), (96, 64, 28, 28), (160, 96, 28, 28), (192, 96, 28, 28),
    (32, 32, 14, 14), (64, 32, 14, 14), (128, 96, 14, 14), (192, 96, 14, 14), (32, 32, 7, 7),
    (64, 32, 7, 7), (96, 64, 7, 7), (192, 160, 7, 7),
]


def precompile_core_kernels(variants, log) -> None:
    """Compile the generated core kernels ``variants`` into numba's on-disk cache in
    parallel processes before they are timed: numba compiles one kernel at a time, and a
    sweep's first shape needs dozens; the processes share nothing but the cache. If a process fails, the kernels
    it did not cache are compiled on first launch as before."""
    variants = sorted(set(variants))
    if not variants:
        return
    workers = max(1, min(len(variants), os.cpu_count() or 1))
    code = ("import json, sys; from gpu.conv.tucker import compile_core_kernels; "
            "compile_core_kernels([tuple(v) for v in json.loads(sys.argv[1])])")
    env = child_environment()
    t0 = time.time()
    procs = [subprocess.Popen([sys.executable, "-c", code, json.dumps(variants[i::workers])], cwd=REPO, env=env)
             for i in range(workers)]
    failed = sum(p.wait() != 0 for p in procs)
    log({"precompile": len(variants), "workers": workers, "failed_workers": failed, "seconds": time.time() - t0})


def torch_peak_bytes(fn) -> int:
    """Peak bytes PyTorch holds during one call (tensors alive before the call included)."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    out = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    del out
    return peak


def reps_for(seconds_per_call: float) -> int:
    return int(min(200, max(5, 0.02 / max(seconds_per_call, 1e-6))))


def timed(fn):
    gpu1, _ = device_time(fn, repeats=3)
    return device_time(fn, repeats=reps_for(gpu1))


def tile_name(t) -> str:
    return f"{t.th}x{t.tw}x{t.tc}/{t.split}/{t.tn}"


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.2f}"


def _shape(values) -> str:
    return f"({','.join(map(str, values))})"


def _geometric_mean(values) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


def rel_err(a, b) -> float:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def random_cp(rng, c, kh, kw, t, rank):
    # scale so that the reconstructed kernel has entries of order 1/sqrt(C·kh·kw)
    s = rng.standard_normal((c, rank)) / math.sqrt(c)
    return check_cp_factors(
        s, rng.standard_normal((kh, rank)) / math.sqrt(kh), rng.standard_normal((kw, rank)) / math.sqrt(kw),
        rng.standard_normal((t, rank)) / math.sqrt(rank), rng.standard_normal(t) * 0.1,
    )


def pairwise(x, w1, wh, ww, w2, b, pad):
    """PyTorch pairwise CP sequence: 1×1 (C→R) → depthwise kh×1 → depthwise 1×kw → 1×1 (R→T)."""
    r = w1.shape[0]
    y = F.conv2d(x, w1)
    y = F.conv2d(y, wh, padding=(pad, 0), groups=r)
    y = F.conv2d(y, ww, padding=(0, pad), groups=r)
    return F.conv2d(y, w2, b)


def check_small(rng, log, report: Report) -> None:
    """Every kernel vs float64 direct conv on small random shapes (strides, dilations, ranks)."""
    worst, trials = 0.0, 0
    for trial in range(16):
        n = int(rng.integers(1, 4))
        c = int(rng.integers(1, 40))
        h, w = int(rng.integers(5, 20)), int(rng.integers(5, 20))
        kh, kw = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        t = int(rng.integers(1, 40))
        rank = int(rng.integers(1, 21))
        stride, dil = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        pad = "same" if stride == 1 and trial % 2 else int(rng.integers(0, 3))
        try:
            conv_geometry((n, c, h, w), (kh, kw), stride, pad, dil)
        except ValueError:
            continue
        u = rng.standard_normal((n, c, h, w)).astype(np.float32)
        f = random_cp(rng, c, kh, kw, t, rank)
        ref = direct_conv2d(u, cp_kernel(f.s, f.h, f.w, f.t), f.bias, stride, pad, dil)
        e_cp = max(rel_err(cp_conv2d(u, f.s, f.h, f.w, f.t, f.bias, stride, pad, dil, backend="cuda", method=m), ref)
                   for m in ("taps", "separable"))
        d1, d2 = int(rng.integers(1, c + 1)), int(rng.integers(1, t + 1))
        tf = check_tucker_factors(rng.standard_normal((c, d1)), rng.standard_normal((d2, d1, kh, kw)),
                                  rng.standard_normal((t, d2)), rng.standard_normal(t))
        ref_t = direct_conv2d(u, tucker_kernel(tf.u_in, tf.core, tf.u_out), tf.bias, stride, pad, dil)
        out_t = tucker_conv2d(u, tf.u_in, tf.core, tf.u_out, tf.bias, stride, pad, dil, backend="cuda")
        e_t = rel_err(out_t, ref_t)
        # one more core run with a random candidate tile, so that many generated tiles run
        z = rng.standard_normal((n, d1, h, w)).astype(np.float32)
        gz = conv_geometry(z.shape, (kh, kw), stride, pad, dil)
        cands = tile_candidates(dict(C=d1, N=d2, Ho=gz.out_h, Wo=gz.out_w, kh=kh, kw=kw, sh=stride, sw=stride,
                                     dh=dil, dw=dil, batch=n))
        tile = cands[int(rng.integers(len(cands)))]
        out_c = tucker_core_conv2d(z, tf.core, stride, pad, dil, backend="cuda", tiling=tile)
        e_t = max(e_t, rel_err(out_c, direct_conv2d(z, tf.core, None, stride, pad, dil)))
        worst, trials = max(worst, e_cp, e_t), trials + 1
        log({"check": "small", "shape": [n, c, h, w], "kernel": [t, kh, kw], "rank": rank, "stride": stride,
             "pad": pad, "dil": dil, "tucker_ranks": [d1, d2], "tile": tile_name(tile), "err_cp": e_cp, "err_tucker": e_t})
    report.table("small random shapes against float64 direct conv (CP taps and separable, Tucker, core tiles)",
                 [{"shapes": trials, "worst_rel_err": worst}],
                 [Column("shapes", "shapes", "d"), Column("worst_rel_err", "worst relative error", ".2e")])


def bench_cp(rng, log, report: Report, layers, ranks, batches) -> None:
    rows = []
    for li, ((c, h, w), (t, kh, kw), pad) in enumerate(layers, 1):
        for n in batches:
            u = rng.standard_normal((n, c, h, w)).astype(np.float32)
            x = torch.from_numpy(u).cuda()
            g = conv_geometry(u.shape, (kh, kw), 1, pad, 1)
            for rank in ranks:
                f = random_cp(rng, c, kh, kw, t, rank)
                plan = CPConvPlan(f, g)
                d_u = cuda.to_device(u)
                d_out = cuda.device_array((n, t, g.out_h, g.out_w), np.float32)
                ours, ours_host = timed(lambda: plan(d_u, d_out))
                ours_bytes = d_u.nbytes + d_out.nbytes + plan.device_bytes
                k_full = torch.from_numpy(cp_kernel(f.s, f.h, f.w, f.t).astype(np.float32)).cuda()
                b = torch.from_numpy(f.bias).cuda()
                w1 = torch.from_numpy(np.ascontiguousarray(f.s.T[:, :, None, None])).cuda()
                wh = torch.from_numpy(np.ascontiguousarray(f.h.T[:, None, :, None])).cuda()
                ww = torch.from_numpy(np.ascontiguousarray(f.w.T[:, None, None, :])).cuda()
                w2 = torch.from_numpy(np.ascontiguousarray(f.t[:, :, None, None])).cuda()
                full = lambda: F.conv2d(x, k_full, b, padding=pad)  # noqa: E731
                pair = lambda: pairwise(x, w1, wh, ww, w2, b, pad)  # noqa: E731
                # the first image only: batch-32 outputs of layer 1 are large
                ref = full()[:1].cpu().numpy()
                err = max(rel_err(d_out[:1].copy_to_host(), ref), rel_err(pair()[:1].cpu().numpy(), ref))
                cudnn, cudnn_host = timed(full)
                pw, pw_host = timed(pair)
                mem_full, mem_pair = torch_peak_bytes(full), torch_peak_bytes(pair)
                rec = {"bench": "cp", "layer": li, "batch": n, "rank": rank, "kernel": cp_tile_name(plan),
                       "ours_us": ours * 1e6, "ours_host_us": ours_host * 1e6, "cudnn_us": cudnn * 1e6,
                       "cudnn_host_us": cudnn_host * 1e6, "pairwise_us": pw * 1e6, "pairwise_host_us": pw_host * 1e6,
                       "ours_bytes": ours_bytes, "cudnn_bytes": mem_full, "pairwise_bytes": mem_pair, "max_rel_err": err,
                       "cudnn_x_ours": ratio(cudnn, ours), "pairwise_x_ours": ratio(pw, ours)}
                # best separable shape and Algorithm 2 in the plan's tuning (3 calls each)
                for method in ("separable", "taps"):
                    best = min(((sec, param) for m, param, sec in plan.tuning_times if m == method),
                               default=None, key=lambda pair: pair[0])
                    if best:
                        rec[f"tuned_{method}_us"] = best[0] * 1e6
                        rec[f"tuned_{method}_shape"] = (separable_name(best[1]) if method == "separable"
                                                        else f"taps/{best[1]}")
                log(rec)
                rows.append(rec)
                del k_full, b, w1, wh, ww, w2
            del x
    report.table("fused CP conv against cuDNN and the pairwise sequence (Reustle layers; µs per call, GPU time)", rows,
                 [Column("layer", "layer", lambda li: f"L{li}"), Column("batch", "batch", "d"), Column("rank", "rank", "d"),
                  Column("ours_us", "ours µs", ".1f"), Column("ours_host_us", "host µs", ".1f"),
                  Column("cudnn_us", "cuDNN µs", ".1f"), Column("cudnn_x_ours", "cuDNN/ours", ".2f"),
                  Column("pairwise_us", "pairwise µs", ".1f"), Column("pairwise_x_ours", "pairwise/ours", ".2f"),
                  Column("ours_bytes", "MiB ours", _mib), Column("cudnn_bytes", "MiB cuDNN", _mib),
                  Column("pairwise_bytes", "MiB pair", _mib), Column("max_rel_err", "err", ".1e"),
                  Column("kernel", "kernel")],
                 note="err: largest relative difference of ours and the pairwise sequence from cuDNN (first image)")


def cp_tile_name(plan) -> str:
    """``taps/lanes`` for Algorithm 2, :func:`separable_name` for the separable kernel."""
    return f"taps/{plan.lanes}" if plan.tiling is None else separable_name(plan.tiling)


def separable_name(t) -> str:
    """``TH x TW/cs/groups/block/px1/s{ns}p{px4}`` (rank slices, stage-4 pixels)."""
    return f"{t.th}x{t.tw}/{t.cs}/{t.groups}/{t.block}/{t.px}/s{t.ns}p{t.px4}"


def bench_cp_sweep(rng, log, report: Report, layers, ranks, batches) -> None:
    """Every launch shape of the separable CP kernels and Algorithm 2 (``taps``) on the
    Reustle layers, with the pairwise sequence for scale: the data behind the cost model
    ``gpu.conv.cp.separable_time`` and ``choose_separable_tiling`` (each candidate's time
    in the log, ``bench: cptile``)."""
    rows = []
    for li, ((c, h, w), (t, kh, kw), pad) in enumerate(layers, 1):
        for n in batches:
            u = rng.standard_normal((n, c, h, w)).astype(np.float32)
            x = torch.from_numpy(u).cuda()
            g = conv_geometry(u.shape, (kh, kw), 1, pad, 1)
            d_u = cuda.to_device(u)
            d_out = cuda.device_array((n, t, g.out_h, g.out_w), np.float32)
            for rank in ranks:
                f = random_cp(rng, c, kh, kw, t, rank)
                plans = [CPConvPlan(f, g, method="separable", tiling=tile) for tile in lean_candidates(g, rank, t)]
                plans.append(CPConvPlan(f, g, method="taps"))
                times = device_times([lambda p=p: p(d_u, d_out) for p in plans], repeats=5)
                for p, sec in zip(plans, times):
                    log({"bench": "cptile", "layer": li, "batch": n, "rank": rank, "tile": cp_tile_name(p), "us": sec * 1e6})
                best = min(range(len(plans) - 1), key=times.__getitem__)
                rule_tile = choose_separable_tiling(g, rank, t)
                rule = next(i for i, p in enumerate(plans) if p.tiling == rule_tile)
                w1 = torch.from_numpy(np.ascontiguousarray(f.s.T[:, :, None, None])).cuda()
                wh = torch.from_numpy(np.ascontiguousarray(f.h.T[:, None, :, None])).cuda()
                ww = torch.from_numpy(np.ascontiguousarray(f.w.T[:, None, None, :])).cuda()
                w2 = torch.from_numpy(np.ascontiguousarray(f.t[:, :, None, None])).cuda()
                b = torch.from_numpy(f.bias).cuda()
                pair = lambda: pairwise(x, w1, wh, ww, w2, b, pad)  # noqa: E731
                pw, _ = timed(pair)
                ref = pair()[:1].cpu().numpy()
                err = 0.0
                for i in (best, rule):
                    plans[i](d_u, d_out)
                    err = max(err, rel_err(d_out[:1].copy_to_host(), ref))
                rows.append({"bench": "cpsweep", "layer": li, "batch": n, "rank": rank, "candidates": len(plans) - 1,
                             "best": cp_tile_name(plans[best]), "best_us": times[best] * 1e6,
                             "rule": cp_tile_name(plans[rule]), "rule_us": times[rule] * 1e6,
                             "taps_us": times[-1] * 1e6, "pairwise_us": pw * 1e6, "max_rel_err": err,
                             "pairwise_x_best": ratio(pw, times[best]), "pairwise_x_rule": ratio(pw, times[rule])})
                del plans, w1, wh, ww, w2, b
            del x, d_u, d_out
    report.table("every CP launch shape (µs per call, GPU time): the best, the rule's, Algorithm 2, the pairwise "
                 "sequence", rows,
                 [Column("layer", "layer", lambda li: f"L{li}"), Column("batch", "batch", "d"), Column("rank", "rank", "d"),
                  Column("candidates", "cands", "d"), Column("best", "best tile"), Column("best_us", "µs", ".1f"),
                  Column("rule", "rule tile"), Column("rule_us", "µs", ".1f"), Column("taps_us", "Alg.2 µs", ".1f"),
                  Column("pairwise_us", "pairwise µs", ".1f"), Column("pairwise_x_best", "pair/best", ".2f"),
                  Column("pairwise_x_rule", "pair/rule", ".2f"), Column("max_rel_err", "err", ".1e")])


def bench_tdc(rng, log, report: Report, shapes, exhaustive: bool) -> None:
    rows = []
    spec = gpu_spec()
    ratios_model, ratios_best = [], []
    variants = []
    for c, nn, h, w in shapes:
        g = conv_geometry((1, c, h, w), (3, 3), 1, 1, 1)
        shape = dict(C=c, N=nn, Ho=h, Wo=w, kh=3, kw=3, sh=1, sw=1, dh=1, dw=1, batch=1)
        tiles = tile_candidates(shape) if exhaustive else [select_tile_model(shape, spec)]
        variants += [core_kernel_variant(t, g) for t in tiles]
    precompile_core_kernels(variants, log)
    for c, nn, h, w in shapes:
        z = rng.standard_normal((1, c, h, w)).astype(np.float32)
        core = (rng.standard_normal((nn, c, 3, 3)) / math.sqrt(9 * c)).astype(np.float32)
        g = conv_geometry(z.shape, (3, 3), 1, 1, 1)
        shape = dict(C=c, N=nn, Ho=h, Wo=w, kh=3, kw=3, sh=1, sw=1, dh=1, dw=1, batch=1)
        d_z = cuda.to_device(z)
        d_out = cuda.device_array((1, nn, h, w), np.float32)
        tile_m = select_tile_model(shape, spec)
        plan = TuckerCorePlan(core, g, tile_m)
        t_model, host = timed(lambda: plan(d_z, d_out))
        out_model = d_out.copy_to_host()
        if exhaustive:
            def time_tile(tile):
                p = TuckerCorePlan(core, g, tile)
                return device_time(lambda: p(d_z, d_out), repeats=10)[0]
            tile_o, _ = select_tile_exhaustive(shape, time_tile)
            plan_o = TuckerCorePlan(core, g, tile_o)
            t_oracle, _ = timed(lambda: plan_o(d_z, d_out))
        else:
            tile_o, t_oracle = tile_m, t_model
        x = torch.from_numpy(z).cuda()
        k = torch.from_numpy(core).cuda()
        full = lambda: F.conv2d(x, k, padding=1)  # noqa: E731
        ref = full().cpu().numpy()
        err = rel_err(out_model, ref)
        cudnn, cudnn_host = timed(full)
        mem = torch_peak_bytes(full)
        ours_bytes = d_z.nbytes + d_out.nbytes + plan.device_bytes
        ratios_model.append(cudnn / t_model)
        ratios_best.append(cudnn / min(t_model, t_oracle))
        rows.append({"bench": "tdc", "shape": [c, nn, h, w], "tile_model": tile_name(tile_m),
                     "tile_oracle": tile_name(tile_o), "model_us": t_model * 1e6, "oracle_us": t_oracle * 1e6,
                     "host_us": host * 1e6, "cudnn_us": cudnn * 1e6, "cudnn_host_us": cudnn_host * 1e6,
                     "ours_bytes": ours_bytes, "cudnn_bytes": mem, "max_rel_err": err,
                     "cudnn_x_model": ratio(cudnn, t_model), "cudnn_x_oracle": ratio(cudnn, t_oracle)})
    report.table("Tucker core on the TDC shapes against cuDNN (3x3, pad 1, batch 1; µs per call, GPU time; tiles "
                 "TH x TW x TC/split/TN)", rows,
                 [Column("shape", "(C,N,H,W)", _shape), Column("tile_model", "model tile"),
                  Column("model_us", "µs", ".1f"), Column("tile_oracle", "oracle tile"), Column("oracle_us", "µs", ".1f"),
                  Column("cudnn_us", "cuDNN µs", ".1f"), Column("cudnn_x_model", "cuDNN/model", ".2f"),
                  Column("cudnn_x_oracle", "cuDNN/oracle", ".2f"), Column("ours_bytes", "MiB ours", _mib),
                  Column("cudnn_bytes", "MiB cuDNN", _mib), Column("max_rel_err", "err", ".1e")],
                 note=f"geometric mean cuDNN/ours: model tiles {_geometric_mean(ratios_model):.2f}x, best of "
                      f"model/oracle {_geometric_mean(ratios_best):.2f}x")


# Core shapes of the Tucker layers of bench_tucker_stages (Reustle layers 3 and 4, D1 = C/4,
# D2 = T/4, no padding) with the batch: the sweep checks the tile model beyond batch 1.
SWEEP_EXTRA = [((64, 96, 27, 27), 0, 1), ((64, 96, 27, 27), 0, 32), ((48, 96, 13, 13), 0, 1), ((48, 96, 13, 13), 0, 32)]


def bench_tile_sweep(rng, log, report: Report, picks=None) -> None:
    """Every tiling candidate of the Tucker core on the TDC shapes (3×3, pad 1, batch 1) and
    a few layer shapes with batch: the data the tile model is checked against (each
    candidate's time in the log, ``bench: tile``). ``picks``: indices into TDC_SHAPES to
    sweep alone (no layer shapes)."""
    rows = []
    spec = gpu_spec()
    if picks is None:
        cases = [(s, 1, 1) for s in TDC_SHAPES] + SWEEP_EXTRA
    else:
        cases = [(TDC_SHAPES[i], 1, 1) for i in picks]
    variants = []
    for (c, nn, h, w), pad, batch in cases:
        g = conv_geometry((batch, c, h, w), (3, 3), 1, pad, 1)
        shape = dict(C=c, N=nn, Ho=g.out_h, Wo=g.out_w, kh=3, kw=3, sh=1, sw=1, dh=1, dw=1, batch=batch)
        variants += [core_kernel_variant(t, g) for t in tile_candidates(shape)]
    precompile_core_kernels(variants, log)
    ratios = []
    for (c, nn, h, w), pad, batch in cases:
        z = rng.standard_normal((batch, c, h, w)).astype(np.float32)
        core = (rng.standard_normal((nn, c, 3, 3)) / math.sqrt(9 * c)).astype(np.float32)
        g = conv_geometry(z.shape, (3, 3), 1, pad, 1)
        shape = dict(C=c, N=nn, Ho=g.out_h, Wo=g.out_w, kh=3, kw=3, sh=1, sw=1, dh=1, dw=1, batch=batch)
        d_z = cuda.to_device(z)
        d_out = cuda.device_array((batch, nn, g.out_h, g.out_w), np.float32)
        cands = tile_candidates(shape)
        plans = [TuckerCorePlan(core, g, tile) for tile in cands]
        times = dict(zip(cands, device_times([lambda p=p: p(d_z, d_out) for p in plans], repeats=5)))
        for tile in cands:
            log({"bench": "tile", "shape": [c, nn, h, w], "pad": pad, "batch": batch,
                 "tile": [tile.th, tile.tw, tile.tc, tile.split, tile.tn], "us": times[tile] * 1e6})
        best = min(times, key=times.get)
        tile_m = select_tile_model(shape, spec)
        x = torch.from_numpy(z).cuda()
        k = torch.from_numpy(core).cuda()
        full = lambda: F.conv2d(x, k, padding=pad)  # noqa: E731
        ref = full().cpu().numpy()
        err = 0.0
        for tile in (best, tile_m):
            TuckerCorePlan(core, g, tile)(d_z, d_out)
            err = max(err, rel_err(d_out.copy_to_host(), ref))
        cudnn, _ = timed(full)
        rows.append({"bench": "sweep", "shape": [c, nn, h, w], "pad": pad, "batch": batch, "candidates": len(times),
                     "best": tile_name(best), "best_us": times[best] * 1e6, "model": tile_name(tile_m),
                     "model_us": times[tile_m] * 1e6, "cudnn_us": cudnn * 1e6, "max_rel_err": err,
                     "cudnn_x_best": ratio(cudnn, times[best]), "cudnn_x_model": ratio(cudnn, times[tile_m])})
        ratios.append((cudnn / times[best], cudnn / times[tile_m]))
    tdc = ratios[:len(TDC_SHAPES)] if picks is None else ratios
    report.table("every Tucker core tiling candidate (µs per call, GPU time; tiles TH x TW x TC/split/TN)", rows,
                 [Column("shape", "(C,N,H,W)", _shape), Column("pad", "pad", "d"), Column("batch", "batch", "d"),
                  Column("candidates", "cands", "d"), Column("best", "best tile"), Column("best_us", "µs", ".1f"),
                  Column("model", "model tile"), Column("model_us", "µs", ".1f"), Column("cudnn_us", "cuDNN µs", ".1f"),
                  Column("cudnn_x_best", "cuDNN/best", ".2f"), Column("cudnn_x_model", "cuDNN/model", ".2f"),
                  Column("max_rel_err", "err", ".1e")],
                 note=f"{'TDC' if picks is None else 'swept TDC'} shapes, geometric mean cuDNN/ours: best tiles "
                      f"{_geometric_mean([b for b, _ in tdc]):.2f}x, model tiles {_geometric_mean([m for _, m in tdc]):.2f}x")


def bench_tucker_stages(rng, log, report: Report, layers, batches) -> None:
    """Full Tucker layers (D1 = C/4, D2 = T/4): the three stages apart, to decide on fusion."""
    rows = []
    for li, ((c, h, w), (t, kh, kw), pad) in enumerate(layers, 1):
        d1, d2 = max(1, c // 4), max(1, t // 4)
        tf = check_tucker_factors(rng.standard_normal((c, d1)) / math.sqrt(c),
                                  rng.standard_normal((d2, d1, kh, kw)) / math.sqrt(d1 * kh * kw),
                                  rng.standard_normal((t, d2)) / math.sqrt(d2), rng.standard_normal(t) * 0.1)
        for n in batches:
            u = rng.standard_normal((n, c, h, w)).astype(np.float32)
            g = conv_geometry(u.shape, (kh, kw), 1, pad, 1)
            plan = TuckerConvPlan(tf, g)
            d_u = cuda.to_device(u)
            d_out = cuda.device_array((n, t, g.out_h, g.out_w), np.float32)
            total, _ = timed(lambda: plan(d_u, d_out))
            st_in, st_core, st_out = (timed(launch)[0] for launch in plan.stages(d_u, d_out).values())
            x = torch.from_numpy(u).cuda()
            k = torch.from_numpy(tucker_kernel(tf.u_in, tf.core, tf.u_out).astype(np.float32)).cuda()
            b = torch.from_numpy(tf.bias).cuda()
            full = lambda: F.conv2d(x, k, b, padding=pad)  # noqa: E731
            plan(d_u, d_out)
            err = rel_err(d_out[:1].copy_to_host(), full()[:1].cpu().numpy())
            cudnn, _ = timed(full)
            rows.append({"bench": "tucker_stages", "layer": li, "batch": n, "ranks": [d1, d2], "in_us": st_in * 1e6,
                         "core_us": st_core * 1e6, "out_us": st_out * 1e6, "total_us": total * 1e6,
                         "cudnn_us": cudnn * 1e6, "cudnn_x_ours": ratio(cudnn, total), "tile": tile_name(plan.core.tile),
                         "max_rel_err": err})
            del x, k, b
    report.table("Tucker layers (D1 = C/4, D2 = T/4), the three stages apart, against cuDNN on the full kernel "
                 "(µs per call, GPU time)", rows,
                 [Column("layer", "layer", lambda li: f"L{li}"), Column("batch", "batch", "d"),
                  Column("ranks", "(D1,D2)", _shape), Column("in_us", "1x1 in µs", ".1f"),
                  Column("core_us", "core µs", ".1f"), Column("out_us", "1x1 out µs", ".1f"),
                  Column("total_us", "total µs", ".1f"), Column("cudnn_us", "cuDNN full µs", ".1f"),
                  Column("cudnn_x_ours", "cuDNN/ours", ".2f"), Column("max_rel_err", "err", ".1e")])


def main() -> int:
    ap = bench_parser(__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="correctness checks and one timing (smoke test)")
    ap.add_argument("--no-exhaustive", action="store_true", help="skip the exhaustive tile tuner")
    ap.add_argument("--sections", default="check,cp,tdc,tucker",
                    help="comma-separated: check, cp, cpsweep (every CP launch shape), tdc, tucker, "
                         "sweep (every core tiling candidate)")
    ap.add_argument("--sweep-shapes", default=None,
                    help="comma-separated indices into the 18 TDC shapes: sweep only these")
    args = ap.parse_args()
    # the small layers launch fewer blocks than SMs on purpose; numba's warning is noise here
    numba_config.CUDA_LOW_OCCUPANCY_WARNINGS = 0
    report = Report(args.json)

    def log(rec: dict) -> None:
        report.record(rec.get("bench", rec.get("check", "log")), rec)

    rng = np.random.default_rng(2026)
    report.progress(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, TF32 off, cudnn.benchmark on; "
                    f"numpy {np.__version__}")
    t0 = time.time()
    if args.quick:
        plan = [
            ("check", lambda: check_small(rng, log, report)),
            ("cp", lambda: bench_cp(rng, log, report, REUSTLE_LAYERS, (4,), (1,))),
            ("tdc", lambda: bench_tdc(rng, log, report, TDC_SHAPES[::6], exhaustive=False)),
            ("tucker", lambda: bench_tucker_stages(rng, log, report, REUSTLE_LAYERS[3:4], (1,))),
        ]
    else:
        plan = [
            ("check", lambda: check_small(rng, log, report)),
            ("cp", lambda: bench_cp(rng, log, report, REUSTLE_LAYERS, RANKS, BATCHES)),
            ("cpsweep", lambda: bench_cp_sweep(rng, log, report, REUSTLE_LAYERS, RANKS, BATCHES)),
            ("tdc", lambda: bench_tdc(rng, log, report, TDC_SHAPES, exhaustive=not args.no_exhaustive)),
            ("tucker", lambda: bench_tucker_stages(rng, log, report, REUSTLE_LAYERS, BATCHES)),
            ("sweep", lambda: bench_tile_sweep(
                rng, log, report, None if args.sweep_shapes is None else [int(i) for i in args.sweep_shapes.split(",")])),
        ]
        wanted = set(args.sections.split(","))
        unknown = wanted - {name for name, _ in plan}
        if unknown:
            ap.error(f"unknown sections {sorted(unknown)}")
        plan = [(name, run) for name, run in plan if name in wanted]
    failures = []
    for name, run in plan:
        # one failing section must not cost the others' figures; each prints when done, so
        # a run cut short still shows the sections it finished
        try:
            run()
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc()
            log({"failed": name, "error": repr(exc)})
            failures.append((name, repr(exc)))
    for name, exc in failures:
        print(f"FAILED {name}: {exc}")
    print(f"total bench time {time.time() - t0:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
