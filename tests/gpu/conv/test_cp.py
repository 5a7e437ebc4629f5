"""Fused CP convolution: CPU backend and CUDA kernels (simulator) against a float64 direct
convolution of the reconstructed kernel, and against PyTorch's conv2d."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gpu.conv import codegen as conv_codegen
from gpu.conv.direct import cp_kernel, direct_conv2d
from gpu.conv.index_tables import conv_geometry, pointer_increments, tap_offsets
from gpu.conv.cp import (
    TUNE_CANDIDATES,
    TUNE_EXTRA,
    TUNE_LEAN,
    CPConvPlan,
    SeparableTiling,
    check_cp_factors,
    choose_lane_count,
    choose_separable_tiling,
    cp_conv2d,
    lean_candidates,
    separable_candidates,
    separable_shared_bytes,
    separable_shortlist,
    separable_time,
)

TOL = 1e-5


def rel_err(a, b):
    return np.abs(np.asarray(a, np.float64) - b).max() / np.abs(b).max()


def random_case(rng, n, c, h, w, t, kh, kw, rank, bias=True):
    u = rng.standard_normal((n, c, h, w)).astype(np.float32)
    s, hf, wf, tf = (rng.standard_normal((d, rank)).astype(np.float32) for d in (c, kh, kw, t))
    b = rng.standard_normal(t).astype(np.float32) if bias else None
    return u, (s, hf, wf, tf), b


def poisoned(shape):
    return np.full(shape, np.nan, np.float32)


# (N, C, H, W, T, kh, kw, rank, stride, padding, dilation): ranks 1–16, strides 1–2,
# dilations 1–2, odd and even kernels, batch 1 and > 1, "same" and integer padding.
CPU_CASES = [
    (1, 3, 17, 19, 5, 3, 3, 1, 1, "same", 1),
    (2, 8, 16, 15, 7, 4, 4, 2, 1, "same", 2),
    (3, 5, 12, 13, 9, 5, 2, 3, 2, 1, 1),
    (1, 16, 20, 18, 12, 2, 3, 4, 2, 2, 2),
    (2, 7, 11, 11, 4, 1, 1, 5, 1, 0, 1),
    (1, 12, 14, 17, 16, 3, 5, 6, 1, 2, 1),
    (4, 4, 9, 10, 3, 3, 3, 7, 2, 0, 2),
    (1, 32, 13, 13, 24, 3, 3, 8, 1, 1, 1),
    (2, 6, 15, 9, 11, 6, 4, 9, 1, "same", 1),
    (1, 9, 10, 21, 6, 4, 3, 10, 2, 3, 1),
    (3, 10, 8, 8, 5, 3, 2, 11, 1, "same", 2),
    (1, 20, 16, 16, 10, 5, 5, 12, 2, 2, 2),
    (2, 3, 19, 12, 8, 7, 7, 13, 1, 3, 1),
    (1, 14, 12, 12, 13, 2, 2, 14, 1, 0, 2),
    (2, 11, 9, 14, 15, 3, 4, 15, 2, 1, 1),
    (1, 48, 27, 27, 64, 3, 3, 16, 1, 0, 1),
]


@pytest.mark.parametrize("case", CPU_CASES, ids=[f"r{c[7]}" for c in CPU_CASES])
def test_cpu_backend_equals_float64_direct_conv(case):
    n, c, h, w, t, kh, kw, rank, stride, pad, dil = case
    rng = np.random.default_rng(rank)
    u, f, b = random_case(rng, n, c, h, w, t, kh, kw, rank)
    g = conv_geometry(u.shape, (kh, kw), stride, pad, dil)
    out = poisoned((n, t, g.out_h, g.out_w))
    cp_conv2d(u, *f, b, stride, pad, dil, backend="cpu", out=out)
    ref = direct_conv2d(u, cp_kernel(*f), b, stride, pad, dil)
    assert out.shape == ref.shape
    assert not np.isnan(out).any()
    assert rel_err(out, ref) < TOL


# Simulator: every thread is a Python thread, so a few small grids; lanes forced to cover
# the warp-shuffle butterfly (1 to 32 lanes) and the rank chunking above 16.
SIM_CASES = [
    # (N, C, H, W, T, kh, kw, rank, stride, padding, dilation, lanes)
    (1, 3, 5, 6, 4, 3, 3, 1, 1, "same", 1, 1),
    (2, 4, 5, 4, 3, 2, 2, 3, 1, "same", 2, 2),
    (1, 6, 7, 6, 5, 3, 2, 4, 2, 1, 1, 4),
    (2, 5, 6, 5, 3, 4, 3, 8, 2, 2, 2, 8),
    (1, 40, 4, 4, 6, 3, 3, 16, 1, 1, 1, 32),
    (1, 4, 4, 5, 7, 1, 1, 5, 1, 0, 1, 16),
    (1, 3, 4, 4, 5, 3, 3, 18, 1, 1, 1, 2),
]


@pytest.mark.parametrize("case", SIM_CASES, ids=[f"r{c[7]}-lanes{c[11]}" for c in SIM_CASES])
def test_cuda_kernel_equals_float64_direct_conv(case):
    from numba import cuda

    n, c, h, w, t, kh, kw, rank, stride, pad, dil, lanes = case
    rng = np.random.default_rng(100 + rank)
    u, f, b = random_case(rng, n, c, h, w, t, kh, kw, rank)
    g = conv_geometry(u.shape, (kh, kw), stride, pad, dil)
    plan = CPConvPlan(check_cp_factors(*f, b), g, lanes=lanes, method="taps")
    d_out = cuda.to_device(poisoned((n, t, g.out_h, g.out_w)))
    plan(cuda.to_device(u), d_out)
    out = d_out.copy_to_host()
    ref = direct_conv2d(u, cp_kernel(*f), b, stride, pad, dil)
    assert not np.isnan(out).any()
    assert rel_err(out, ref) < TOL


def run_plan(u, f, b, stride, pad, dil, **plan_args):
    from numba import cuda

    g = conv_geometry(u.shape, (f[1].shape[0], f[2].shape[0]), stride, pad, dil)
    plan = CPConvPlan(check_cp_factors(*f, b), g, **plan_args)
    d_out = cuda.to_device(poisoned((u.shape[0], f[3].shape[0], g.out_h, g.out_w)))
    plan(cuda.to_device(u), d_out)
    return plan, d_out.copy_to_host()


# Separable kernel: launch shapes set explicitly, blocks of 32–64 threads to keep the
# simulator's Python threads few; together they cover channel lanes 1–8 (the shuffle
# butterfly), output-channel groups, 2, 4 and 8 pixels per thread, partial edge tiles and
# the rank chunks above 16.
SEP_SIM_CASES = [
    # (N, C, H, W, T, kh, kw, rank, stride, padding, dilation, tiling)
    (1, 3, 5, 6, 4, 3, 3, 1, 1, "same", 1, SeparableTiling(2, 4, 1, 1, 32, 4)),
    (2, 5, 7, 6, 5, 3, 2, 3, 2, 1, 1, SeparableTiling(2, 2, 2, 2, 32, 2)),
    (1, 20, 6, 7, 3, 4, 3, 4, 1, "same", 2, SeparableTiling(4, 4, 4, 3, 32, 4)),
    (1, 11, 4, 5, 6, 2, 3, 2, 2, 0, 1, SeparableTiling(1, 8, 8, 2, 64, 2)),
    (3, 6, 6, 6, 7, 5, 5, 8, 1, 2, 1, SeparableTiling(4, 8, 2, 1, 64, 4)),
    (1, 4, 9, 8, 4, 4, 2, 12, 2, 1, 2, SeparableTiling(2, 8, 1, 2, 32, 2)),
    (2, 9, 5, 5, 5, 3, 3, 16, 1, 1, 1, SeparableTiling(2, 4, 2, 1, 32, 4)),
    (1, 7, 5, 6, 5, 3, 3, 16, 1, 1, 1, SeparableTiling(2, 4, 2, 1, 32, 8)),
    (1, 3, 4, 4, 5, 3, 3, 18, 1, 1, 1, SeparableTiling(2, 2, 1, 1, 32, 2)),
    (2, 10, 6, 7, 5, 3, 2, 6, 1, 1, 1, SeparableTiling(2, 8, 2, 2, 32, 8)),
]


@pytest.mark.parametrize("case", SEP_SIM_CASES, ids=[f"r{c[7]}-cs{c[11].cs}-px{c[11].px}" for c in SEP_SIM_CASES])
def test_separable_kernel_equals_float64_direct_conv(case):
    n, c, h, w, t, kh, kw, rank, stride, pad, dil, tiling = case
    rng = np.random.default_rng(200 + rank)
    u, f, b = random_case(rng, n, c, h, w, t, kh, kw, rank)
    plan, out = run_plan(u, f, b, stride, pad, dil, method="separable", tiling=tiling)
    assert plan.method == "separable" and plan.tiling == tiling
    assert not np.isnan(out).any()
    assert rel_err(out, direct_conv2d(u, cp_kernel(*f), b, stride, pad, dil)) < TOL


# Lean separable kernels: every generated (rank slices, stage-1 pixels, stage-4 pixels)
# at least once, odd ranks split in two slices (S padded with a zero column), tile extents
# that divide the output, channel lanes 1–8, output-channel groups, strides and
# dilations, partial edge tiles, and rank chunks above 16 (16 + 9).
LEAN_SIM_CASES = [
    # (N, C, H, W, T, kh, kw, rank, stride, padding, dilation, tiling)
    (1, 7, 5, 6, 5, 3, 3, 16, 1, 1, 1, SeparableTiling(2, 4, 2, 1, 32, 2, 1, 2)),
    (2, 9, 6, 7, 6, 3, 2, 9, 2, 1, 1, SeparableTiling(2, 3, 1, 2, 32, 4, 1, 2)),
    (1, 5, 6, 6, 4, 2, 3, 12, 1, "same", 2, SeparableTiling(3, 5, 4, 1, 64, 2, 1, 4)),
    (1, 6, 7, 5, 7, 4, 2, 10, 1, 2, 1, SeparableTiling(4, 5, 2, 3, 32, 4, 1, 4)),
    (2, 4, 5, 5, 3, 3, 3, 11, 1, 1, 1, SeparableTiling(5, 5, 1, 1, 64, 2, 2, 2)),
    (1, 10, 6, 6, 6, 3, 3, 13, 2, 2, 2, SeparableTiling(2, 4, 8, 2, 64, 4, 2, 2)),
    (1, 3, 4, 4, 5, 3, 3, 25, 1, 1, 1, SeparableTiling(2, 2, 1, 1, 32, 4, 2, 2)),
]
# Ranks 1–8 (their own shapes: 8 stage-1 pixels, two rank slices only at rank 8), and a
# rank chunked as 16 + 4 on a shape both chunks have.
LEAN_LOW_SIM_CASES = [
    (2, 5, 5, 6, 4, 3, 3, 1, 1, 1, 1, SeparableTiling(2, 3, 2, 1, 32, 2, 1, 2)),
    (1, 6, 6, 5, 5, 2, 3, 3, 2, 1, 1, SeparableTiling(3, 3, 4, 2, 32, 4, 1, 2)),
    (1, 7, 5, 5, 6, 3, 2, 5, 1, "same", 2, SeparableTiling(5, 5, 1, 1, 64, 2, 1, 4)),
    (2, 4, 6, 6, 3, 3, 3, 2, 1, 0, 1, SeparableTiling(2, 4, 2, 1, 32, 4, 1, 4)),
    (1, 9, 6, 7, 7, 3, 3, 7, 1, 1, 1, SeparableTiling(3, 4, 8, 2, 64, 8, 1, 4)),
    (1, 10, 5, 6, 5, 2, 2, 8, 2, 1, 2, SeparableTiling(2, 3, 2, 1, 32, 4, 2, 2)),
    (1, 3, 4, 5, 4, 3, 3, 20, 1, 1, 1, SeparableTiling(2, 5, 1, 1, 32, 2, 1, 4)),
]


@pytest.mark.parametrize("case", LEAN_SIM_CASES + LEAN_LOW_SIM_CASES,
                         ids=[f"r{c[7]}-s{c[11].ns}-a{c[11].px}-p{c[11].px4}"
                              for c in LEAN_SIM_CASES + LEAN_LOW_SIM_CASES])
def test_lean_kernel_equals_float64_direct_conv(case):
    n, c, h, w, t, kh, kw, rank, stride, pad, dil, tiling = case
    rng = np.random.default_rng(400 + rank)
    u, f, b = random_case(rng, n, c, h, w, t, kh, kw, rank)
    plan, out = run_plan(u, f, b, stride, pad, dil, method="separable", tiling=tiling)
    assert plan.method == "separable" and plan.tiling == tiling
    assert not np.isnan(out).any()
    assert rel_err(out, direct_conv2d(u, cp_kernel(*f), b, stride, pad, dil)) < TOL


def test_lean_cases_cover_every_generated_shape():
    assert {(c[11].ns, c[11].px, c[11].px4) for c in LEAN_SIM_CASES} == set(conv_codegen.CP_LEAN_SHAPES)
    low = [c for c in LEAN_LOW_SIM_CASES if c[7] <= 8]
    assert {(c[11].ns, c[11].px, c[11].px4) for c in low} == set(conv_codegen.CP_LEAN_LOW_SHAPES)
    assert all((c[7], c[11].ns, c[11].px, c[11].px4) in conv_codegen.cp_lean_variants() for c in low)


@pytest.mark.parametrize("seed", range(6))
def test_separable_kernel_on_random_shapes_with_the_model_tiling(seed):
    """Random shapes, ranks 1–16, strides and dilations 1–2, the cost model's launch shape
    (its block cut to 64 threads, channel lanes to 4 and groups to 2 for the simulator)."""
    rng = np.random.default_rng(300 + seed)
    while True:
        n, c, t = int(rng.integers(1, 3)), int(rng.integers(1, 9)), int(rng.integers(1, 12))
        h, w = (int(v) for v in rng.integers(3, 10, 2))
        kh, kw = (int(v) for v in rng.integers(1, 6, 2))
        rank = int(rng.integers(1, 17))
        stride, dil = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        pad = "same" if stride == 1 and seed % 2 else int(rng.integers(0, 3))
        try:
            g = conv_geometry((n, c, h, w), (kh, kw), stride, pad, dil)
            break
        except ValueError:
            continue
    model = choose_separable_tiling(g, rank, t)
    tiling = replace(model, block=64, cs=min(model.cs, 4), groups=min(model.groups, 2))
    u, f, b = random_case(rng, n, c, h, w, t, kh, kw, rank)
    _, out = run_plan(u, f, b, stride, pad, dil, method="separable", tiling=tiling)
    assert not np.isnan(out).any()
    assert rel_err(out, direct_conv2d(u, cp_kernel(*f), b, stride, pad, dil)) < TOL


def test_auto_plan_times_the_shortlist_and_algorithm_2_and_keeps_the_fastest(monkeypatch):
    """Without the simulator, ``auto`` times the model's shortlist and Algorithm 2 on the
    first call (here with fixed fake times) and runs the fastest; the choice is kept per
    layer shape for later plans."""
    from gpu import cuda_runtime
    from gpu.conv import cp as cp_conv, cp_generated as conv_cp_generated, timing as conv_timing

    # the generated module picks its shuffle at import: import it while the simulator shows
    assert conv_cp_generated.CP_SEPARABLE_KERNELS
    rng = np.random.default_rng(5)
    u, f, b = random_case(rng, 1, 4, 5, 5, 3, 3, 3, 2)
    ref = direct_conv2d(u, cp_kernel(*f), b, 1, 1, 1)
    g = conv_geometry(u.shape, (3, 3), 1, 1, 1)
    shortlist = separable_shortlist(g, 2, 3)
    monkeypatch.setattr(cuda_runtime, "simulator_active", lambda: False)
    monkeypatch.setattr(cp_conv, "_TUNED", {})
    for fastest, method in ((len(shortlist), "taps"), (1, "separable")):
        cp_conv._TUNED.clear()
        timed = []

        def fake_times(launches, repeats=5, fastest=fastest, timed=timed):
            timed.append(len(launches))
            return [1.0 if i == fastest else 2.0 for i in range(len(launches))]

        monkeypatch.setattr(conv_timing, "device_times", fake_times)
        plan, out = run_plan(u, f, b, 1, 1, 1, lanes=None)
        assert timed == [len(shortlist) + 1]
        assert plan.method == method
        assert plan.tiling == (shortlist[1] if method == "separable" else None)
        assert rel_err(out, ref) < TOL
        again, out = run_plan(u, f, b, 1, 1, 1)
        assert timed == [len(shortlist) + 1] and again.method == method
        assert rel_err(out, ref) < TOL


def test_shortlist_times_the_8_pixel_kernels_of_high_rank_besides_the_fitted_ones():
    """At ranks 9–16 the 8-pixel shapes (more accumulators than the model was fitted on)
    come after the model's first TUNE_CANDIDATES, which are those it ranks first among
    the others, then the TUNE_LEAN best shapes of each lean kernel; below rank 9 all
    pixel counts compete in one ranking, followed by the lean kernels' best shapes."""
    g = conv_geometry((32, 256, 27, 27), (3, 3), 1, 0, 1)
    ranked = sorted(separable_candidates(g, 16, 384), key=lambda t: separable_time(g, 16, 384, t))
    shortlist = separable_shortlist(g, 16, 384)
    n_lean = TUNE_LEAN * len(conv_codegen.CP_LEAN_SHAPES)
    assert len(shortlist) == TUNE_CANDIDATES + TUNE_EXTRA + n_lean
    assert shortlist[:TUNE_CANDIDATES] == [t for t in ranked if t.px < 8 and not t.ns][:TUNE_CANDIDATES]
    assert shortlist[TUNE_CANDIDATES:-n_lean] == [t for t in ranked if t.px == 8][:TUNE_EXTRA]
    lean = sorted(lean_candidates(g, 16, 384), key=lambda t: separable_time(g, 16, 384, t))
    for ns, px, px4 in conv_codegen.CP_LEAN_SHAPES:
        mine = [t for t in lean if (t.ns, t.px, t.px4) == (ns, px, px4)]
        assert [t for t in shortlist if t.ns and (t.ns, t.px, t.px4) == (ns, px, px4)] == mine[:TUNE_LEAN]
    assert all(t.ns == 0 for t in shortlist[:-n_lean])
    assert choose_separable_tiling(g, 16, 384) == shortlist[0]
    # the lean kernels' tiles include the 25-pixel output cut in 4, 3 or 2 parts (7, 9, 13)
    assert {(t.th, t.tw) for t in lean} >= {(7, 9), (9, 7), (13, 13)}
    # rank 8: all cp_sep pixel counts in one ranking, then each lean kernel's best shapes
    low = conv_codegen.cp_lean_shapes(8)
    lean8 = sorted(lean_candidates(g, 8, 384), key=lambda t: separable_time(g, 8, 384, t))
    short8 = separable_shortlist(g, 8, 384)
    assert short8[:-TUNE_LEAN * len(low)] == sorted(
        separable_candidates(g, 8, 384), key=lambda t: separable_time(g, 8, 384, t))[:TUNE_CANDIDATES]
    for shape in low:
        mine = [t for t in lean8 if (t.ns, t.px, t.px4) == shape]
        assert [t for t in short8 if t.ns and (t.ns, t.px, t.px4) == shape] == mine[:TUNE_LEAN]
    # rank 18 runs as chunks of 16 and 2: only the shapes both ranks have
    assert {(t.ns, t.px, t.px4) for t in lean_candidates(g, 18, 384)} == (
        set(conv_codegen.CP_LEAN_SHAPES) & set(conv_codegen.cp_lean_shapes(2)))


def test_separable_candidates_fit_shared_memory_and_the_layer():
    g = conv_geometry((32, 3, 224, 224), (11, 11), 1, 5, 1)
    cands = separable_candidates(g, 16, 96)
    assert cands and all(separable_shared_bytes(g, t, 16) <= 48 * 1024 for t in cands)
    assert all(t.block in (128, 256) and 32 <= t.th * t.tw <= 512 for t in cands)
    assert {t.cs for t in cands} == {1, 2} and {t.px for t in cands} == {2, 4, 8}
    small = conv_geometry((1, 2, 3, 3), (3, 3), 1, 0, 1)
    assert separable_candidates(small, 1, 4)
    huge = conv_geometry((1, 1, 200, 200), (61, 61), 1, 0, 3)
    assert separable_candidates(huge, 16, 4) == []
    with pytest.raises(ValueError, match="method='taps'"):
        choose_separable_tiling(huge, 16, 4)


def test_auto_runs_algorithm_2_where_no_separable_tile_fits():
    rng = np.random.default_rng(9)
    u, f, b = random_case(rng, 1, 1, 1, 392, 2, 1, 97, 16)
    assert separable_candidates(conv_geometry(u.shape, (1, 97), 1, 0, (1, 4)), 16, 2) == []
    plan, out = run_plan(u, f, b, 1, 0, (1, 4))
    assert plan.method == "taps"
    assert not np.isnan(out).any()
    assert rel_err(out, direct_conv2d(u, cp_kernel(*f), b, 1, 0, (1, 4))) < TOL


def test_cuda_backend_through_public_function_writes_every_element():
    rng = np.random.default_rng(7)
    u, f, _ = random_case(rng, 2, 5, 6, 6, 4, 3, 3, 2, bias=False)
    out = poisoned((2, 4, 6, 6))
    cp_conv2d(u, *f, padding="same", backend="cuda", out=out)
    assert rel_err(out, direct_conv2d(u, cp_kernel(*f), None, 1, "same", 1)) < TOL


def test_cpu_backend_equals_torch_conv2d():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    for stride, pad, dil in [(1, "same", 1), (2, 1, 2), (1, 2, 2)]:
        u, f, b = random_case(rng, 3, 16, 23, 21, 20, 3, 5, 6)
        ours = cp_conv2d(u, *f, b, stride, pad, dil, backend="cpu")
        k = torch.from_numpy(cp_kernel(*f).astype(np.float32))
        ref = torch.nn.functional.conv2d(torch.from_numpy(u), k, torch.from_numpy(b), stride, pad, dil).numpy()
        assert ours.shape == ref.shape
        assert np.abs(ours - ref).max() / np.abs(ref).max() < TOL


def test_factor_errors_say_what_is_wrong():
    rng = np.random.default_rng(0)
    u, (s, h, w, t), b = random_case(rng, 1, 4, 6, 6, 3, 3, 3, 2)
    with pytest.raises(ValueError, match="share one rank"):
        cp_conv2d(u, s, h, w[:, :1], t)
    bad = s.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        cp_conv2d(u, bad, h, w, t)
    with pytest.raises(ValueError, match="4 channels but factor S has 5 rows"):
        cp_conv2d(u, np.vstack([s, s[:1]]), h, w, t)
    with pytest.raises(ValueError, match="bias"):
        cp_conv2d(u, s, h, w, t, bias=np.ones(7))
    with pytest.raises(ValueError, match="same"):
        cp_conv2d(u, s, h, w, t, stride=2, padding="same")


def test_pointer_increments_walk_the_taps_and_channels():
    offsets = tap_offsets(3, 2, 2, 1, row_stride=10)
    assert offsets[:, 0].tolist() == [0, 1, 20, 21, 40, 41]
    inc = pointer_increments(offsets, channel_stride=100)
    ptr, visited = 0, []
    for _ in range(2):
        for k in range(len(inc)):
            visited.append(ptr)
            ptr += inc[k, 0]
    assert visited == [0, 1, 20, 21, 40, 41, 100, 101, 120, 121, 140, 141]
    assert inc[:, 1].sum() == 0 and inc[:, 2].sum() == 0


def test_same_padding_matches_pytorch_rule():
    g = conv_geometry((1, 1, 10, 9), (4, 3), 1, "same", 2)
    assert (g.out_h, g.out_w, g.pad_top, g.pad_left) == (10, 9, 3, 2)


def test_lane_count_is_a_power_of_two_within_the_channels():
    assert choose_lane_count(3, 50176) == 2
    assert choose_lane_count(256, 625) == 32
    assert choose_lane_count(1, 10) == 1


def test_generated_module_is_current_and_each_rank_compiles(capsys):
    path = Path(conv_codegen.__file__).parent
    assert (path / "cp_generated.py").read_text() == conv_codegen.cp_module_source()
    assert (path / "tucker_generated.py").read_text() == conv_codegen.tucker_module_source()
    for rank in conv_codegen.CP_RANKS:
        source = conv_codegen.cp_kernel_source(rank)
        compile(source, f"<cp_conv_r{rank}>", "exec")
        assert source.count(f"q{rank - 1} +=") >= 2
        for px in conv_codegen.CP_SEP_PIXELS:
            if px * rank > conv_codegen.CP_SEP_MAX_ACC:
                assert (rank, px) not in conv_codegen.cp_separable_variants()
                continue
            source = conv_codegen.cp_separable_kernel_source(rank, px)
            compile(source, f"<cp_sep_r{rank}_p{px}>", "exec")
            # stage 1: the last pixel's last rank in 8 / px unrolled channels, the tail, the shuffle
            assert source.count(f"a{px - 1}_{rank - 1} +=") == 8 // px + 1 + 1
            assert source.count(f"q{px - 1}_{rank - 1}") == 2
    for rank, ns, px1, px4 in conv_codegen.cp_lean_variants():
        source = conv_codegen.cp_lean_kernel_source(rank, ns, px1, px4)
        compile(source, f"<cp_lean_r{rank}_s{ns}_a{px1}_p{px4}>", "exec")
        rq = -(-rank // ns)
        # stage 1: the last pixel's last slice rank in 8 / px1 unrolled channels, the tail,
        # the shuffle; stage 4: every rank of the last pixel loaded once, used once
        assert source.count(f"a{px1 - 1}_{rq - 1} +=") == 8 // px1 + 1 + 1
        assert source.count(f"q{px4 - 1}_{rank - 1}") == 2
        # every hot index unsigned: no signed index arithmetic in the loads of stages 1 and 4
        last_s = f"s_f[sr + uint64({rq - 1})]" if rq > 1 else "s_f[sr]"
        last_t = f"t_f[tr + uint64({rank - 1})]" if rank > 1 else "t_f[tr]"
        assert last_s in source and last_t in source
        assert rank > 8 or (ns, px1, px4) in conv_codegen.CP_LEAN_LOW_SHAPES
    print(conv_codegen.cp_kernel_source(2))
    print(conv_codegen.cp_separable_kernel_source(2, 2))
    print(conv_codegen.cp_lean_kernel_source(9, 2, 2, 2))
    printed = capsys.readouterr().out
    assert "def cp_conv_r2" in printed and "def cp_sep_r2_p2" in printed and "def cp_lean_r9_s2_a2_p2" in printed
