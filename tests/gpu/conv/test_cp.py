"""Fused CP convolution: CPU backend and CUDA kernels (simulator) against a float64 direct
convolution of the reconstructed kernel, and against PyTorch's conv2d."""

from dataclasses import replace

import numpy as np
import pytest

from gpu.conv.cp import (
    TUNE_LEAN,
    CPConvPlan,
    SeparableTiling,
    check_cp_factors,
    choose_lane_count,
    choose_separable_tiling,
    cp_conv2d,
    lean_candidates,
    separable_shared_bytes,
    separable_shortlist,
    separable_time,
)
from gpu.conv.direct import cp_kernel, direct_conv2d
from gpu.conv.index_tables import conv_geometry, pointer_increments, tap_offsets
from gpu.conv.kernel_cache import cp_lean_kernel, cp_taps_kernel
from gpu.conv.kernel_shapes import CP_LEAN_LOW_SHAPES, CP_LEAN_SHAPES, cp_lean_shapes, cp_lean_variants

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


def slow_unless(case, quick: bool):
    """``case`` as a pytest parameter, under the ``slow`` marker unless ``quick``."""
    return pytest.param(case, marks=() if quick else pytest.mark.slow)


# Simulator: every thread is a Python thread, so a few small grids (one block where
# pixels·lanes ≤ 256); lanes forced to cover the warp-shuffle butterfly (1 to 32 lanes)
# and the rank chunking above 16. The default run takes one case (two rank chunks); the
# others run with ``-m slow``.
SIM_CASES = [
    # (N, C, H, W, T, kh, kw, rank, stride, padding, dilation, lanes)
    (1, 3, 5, 6, 4, 3, 3, 1, 1, "same", 1, 1),
    (2, 4, 5, 4, 3, 2, 2, 3, 1, "same", 2, 2),
    (1, 6, 7, 6, 5, 3, 2, 4, 2, 1, 1, 4),
    (2, 5, 6, 5, 3, 4, 3, 8, 2, 2, 2, 8),
    (1, 40, 2, 4, 6, 3, 3, 16, 1, 1, 1, 32),
    (1, 4, 4, 4, 7, 1, 1, 5, 1, 0, 1, 16),
    (1, 3, 4, 4, 5, 3, 3, 18, 1, 1, 1, 2),
]


@pytest.mark.parametrize("case", [slow_unless(c, c[7] == 18) for c in SIM_CASES],
                         ids=[f"r{c[7]}-lanes{c[11]}" for c in SIM_CASES])
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


# Lean separable kernels, launch shapes set explicitly with blocks of 32–64 threads, and
# the costly cases (many ranks and lanes: each shuffle is a block barrier in the
# simulator) on images of one or two tiles, to keep the simulator's Python threads few:
# every generated (rank slices, stage-1 pixels, stage-4 pixels) at least once, odd ranks
# split in two slices (S padded with a zero column), tile extents that divide the output,
# channel lanes 1–8 (the shuffle butterfly), output-channel groups, strides and
# dilations, partial edge tiles, and rank chunks above 16 (16 + 9).
LEAN_SIM_CASES = [
    # (N, C, H, W, T, kh, kw, rank, stride, padding, dilation, tiling)
    (1, 7, 3, 3, 5, 3, 3, 16, 1, 1, 1, SeparableTiling(2, 4, 2, 1, 32, 2, 1, 2)),
    (2, 9, 6, 7, 6, 3, 2, 9, 2, 1, 1, SeparableTiling(2, 3, 1, 2, 32, 4, 1, 2)),
    (1, 5, 3, 4, 4, 2, 3, 12, 1, "same", 2, SeparableTiling(3, 5, 4, 1, 64, 2, 1, 4)),
    (1, 6, 3, 1, 7, 4, 2, 10, 1, 2, 1, SeparableTiling(4, 5, 2, 3, 32, 4, 1, 4)),
    (2, 4, 5, 5, 3, 3, 3, 11, 1, 1, 1, SeparableTiling(5, 5, 1, 1, 64, 2, 2, 2)),
    (1, 10, 2, 6, 6, 2, 2, 13, 2, 1, 2, SeparableTiling(1, 4, 8, 1, 64, 4, 2, 2)),
    (1, 3, 4, 4, 5, 3, 3, 25, 1, 1, 1, SeparableTiling(2, 2, 1, 1, 32, 4, 2, 2)),
]
# Ranks 1–8 (their own shapes: 8 stage-1 pixels, two rank slices only at rank 8), and a
# rank chunked as 16 + 4 on a shape both chunks have.
LEAN_LOW_SIM_CASES = [
    (2, 5, 5, 6, 4, 3, 3, 1, 1, 1, 1, SeparableTiling(2, 3, 2, 1, 32, 2, 1, 2)),
    (1, 6, 3, 5, 5, 2, 3, 3, 2, 1, 1, SeparableTiling(3, 3, 4, 2, 32, 4, 1, 2)),
    (1, 7, 5, 5, 6, 3, 2, 5, 1, "same", 2, SeparableTiling(5, 5, 1, 1, 64, 2, 1, 4)),
    (2, 4, 6, 6, 3, 3, 3, 2, 1, 0, 1, SeparableTiling(2, 4, 2, 1, 32, 4, 1, 4)),
    (1, 9, 3, 3, 7, 3, 3, 7, 1, 1, 1, SeparableTiling(3, 4, 8, 1, 32, 8, 1, 4)),
    (1, 3, 4, 5, 3, 3, 3, 6, 1, 1, 1, SeparableTiling(2, 5, 2, 1, 32, 8, 1, 4)),
    (1, 10, 5, 6, 5, 2, 2, 8, 2, 1, 2, SeparableTiling(2, 3, 2, 1, 32, 4, 2, 2)),
    (1, 3, 4, 5, 4, 3, 3, 20, 1, 1, 1, SeparableTiling(2, 5, 1, 1, 32, 2, 1, 4)),
]
LEAN_CASES = LEAN_SIM_CASES + LEAN_LOW_SIM_CASES
#: The cases of the default run: one per generated shape, the cheapest in the simulator,
#: together with a split odd rank (11) and a rank chunk (16 + 9, both split in two).
LEAN_QUICK_RANKS = {1, 2, 3, 5, 6, 11, 25}


def lean_id(case) -> str:
    t = case[11]
    return f"r{case[7]}-s{t.ns}-a{t.px}-p{t.px4}"


@pytest.mark.parametrize("case", [slow_unless(c, c[7] in LEAN_QUICK_RANKS) for c in LEAN_CASES],
                         ids=[lean_id(c) for c in LEAN_CASES])
def test_lean_kernel_equals_float64_direct_conv(case):
    n, c, h, w, t, kh, kw, rank, stride, pad, dil, tiling = case
    rng = np.random.default_rng(400 + rank)
    u, f, b = random_case(rng, n, c, h, w, t, kh, kw, rank)
    plan, out = run_plan(u, f, b, stride, pad, dil, method="separable", tiling=tiling)
    assert plan.method == "separable" and plan.tiling == tiling
    assert not np.isnan(out).any()
    assert rel_err(out, direct_conv2d(u, cp_kernel(*f), b, stride, pad, dil)) < TOL


def test_lean_cases_cover_every_generated_shape():
    assert {(c[11].ns, c[11].px, c[11].px4) for c in LEAN_SIM_CASES} == set(CP_LEAN_SHAPES)
    low = [c for c in LEAN_LOW_SIM_CASES if c[7] <= 8]
    assert {(c[11].ns, c[11].px, c[11].px4) for c in low} == set(CP_LEAN_LOW_SHAPES)
    assert all((c[7], c[11].ns, c[11].px, c[11].px4) in cp_lean_variants() for c in low)
    # the default run: every shape once, and a rank chunked into two kernels
    quick = [c for c in LEAN_CASES if c[7] in LEAN_QUICK_RANKS]
    assert {(c[11].ns, c[11].px, c[11].px4) for c in quick} == set(CP_LEAN_SHAPES) | set(CP_LEAN_LOW_SHAPES)
    assert any(c[7] > 16 for c in quick)


@pytest.mark.parametrize("seed", [slow_unless(s, s == 0) for s in range(6)])
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
    from gpu.cuda import simulator
    from gpu.conv import cp as cp_conv, timing as conv_timing

    rng = np.random.default_rng(5)
    u, f, b = random_case(rng, 1, 4, 5, 5, 3, 3, 3, 2)
    ref = direct_conv2d(u, cp_kernel(*f), b, 1, 1, 1)
    g = conv_geometry(u.shape, (3, 3), 1, 1, 1)
    shortlist = separable_shortlist(g, 2, 3)
    # a generated module picks its shuffle at import: load the kernels while the simulator shows
    for shape in {(t.ns, t.px, t.px4) for t in shortlist}:
        cp_lean_kernel(2, *shape)
    cp_taps_kernel(2)
    monkeypatch.setattr(simulator, "simulator_active", lambda: False)
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


def test_shortlist_times_the_best_shapes_of_each_lean_kernel():
    """The shortlist holds, for each lean kernel of the rank, its TUNE_LEAN launch shapes of
    least modelled time; the model's overall first pick is the plan's untimed choice."""
    g = conv_geometry((32, 256, 27, 27), (3, 3), 1, 0, 1)
    for rank in (16, 8):
        lean = sorted(lean_candidates(g, rank, 384), key=lambda t: separable_time(g, rank, 384, t))
        shortlist = separable_shortlist(g, rank, 384)
        shapes = cp_lean_shapes(rank)
        assert len(shortlist) == TUNE_LEAN * len(shapes)
        for shape in shapes:
            mine = [t for t in lean if (t.ns, t.px, t.px4) == shape]
            assert [t for t in shortlist if (t.ns, t.px, t.px4) == shape] == mine[:TUNE_LEAN]
        assert choose_separable_tiling(g, rank, 384) == lean[0]
    # the lean kernels' tiles include the 25-pixel output cut in 4, 3 or 2 parts (7, 9, 13)
    assert {(t.th, t.tw) for t in lean_candidates(g, 16, 384)} >= {(7, 9), (9, 7), (13, 13)}
    # rank 18 runs as chunks of 16 and 2: only the shapes both ranks have
    assert {(t.ns, t.px, t.px4) for t in lean_candidates(g, 18, 384)} == (
        set(CP_LEAN_SHAPES) & set(cp_lean_shapes(2)))


def test_separable_candidates_fit_shared_memory_and_the_layer():
    g = conv_geometry((32, 3, 224, 224), (11, 11), 1, 5, 1)
    cands = lean_candidates(g, 16, 96)
    assert cands and all(separable_shared_bytes(g, t, 16) <= 48 * 1024 for t in cands)
    assert all(t.block in (128, 256) and 32 <= t.th * t.tw <= 512 for t in cands)
    assert {t.cs for t in cands} == {1, 2} and {(t.ns, t.px, t.px4) for t in cands} == set(CP_LEAN_SHAPES)
    small = conv_geometry((1, 2, 3, 3), (3, 3), 1, 0, 1)
    assert lean_candidates(small, 1, 4)
    huge = conv_geometry((1, 1, 200, 200), (61, 61), 1, 0, 3)
    assert lean_candidates(huge, 16, 4) == []
    with pytest.raises(ValueError, match="method='taps'"):
        choose_separable_tiling(huge, 16, 4)


def test_auto_runs_algorithm_2_where_no_separable_tile_fits():
    rng = np.random.default_rng(9)
    u, f, b = random_case(rng, 1, 1, 1, 392, 2, 1, 97, 16)
    assert lean_candidates(conv_geometry(u.shape, (1, 97), 1, 0, (1, 4)), 16, 2) == []
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
