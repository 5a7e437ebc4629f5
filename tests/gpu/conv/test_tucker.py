"""Tucker conv: CPU backend and the TDC core kernels (simulator) against a float64 direct
convolution of the reconstructed kernel and PyTorch's conv2d; the tile model (Eqs. 14–19)."""

import dataclasses
import math

import numpy as np
import pytest

from gpu.conv.direct import direct_conv2d, tucker_kernel
from gpu.conv.index_tables import conv_geometry
from gpu.conv.tiling import (
    MODEL_MAX_TN,
    SQUARE_COST,
    CoreTile,
    CostModel,
    GpuSpec,
    comp_latency,
    copy_fits,
    data_volume,
    select_tile_exhaustive,
    select_tile_model,
    select_tile_tdc,
    tile_candidates,
    tile_time,
    uses_square_kernel,
)
from gpu.conv.tucker import (
    TuckerCorePlan,
    check_tucker_factors,
    compile_core_kernels,
    core_kernel_variant,
    tucker_conv2d,
    tucker_core_conv2d,
)

TOL = 1e-5


def rel_err(a, b):
    return np.abs(np.asarray(a, np.float64) - b).max() / np.abs(b).max()


def random_tucker(rng, c, t, kh, kw, d1, d2):
    return (rng.standard_normal((c, d1)).astype(np.float32), rng.standard_normal((d2, d1, kh, kw)).astype(np.float32),
            rng.standard_normal((t, d2)).astype(np.float32), rng.standard_normal(t).astype(np.float32))


# (N, C, H, W, T, kh, kw, D1, D2, stride, padding, dilation)
CPU_CASES = [
    (1, 8, 17, 19, 6, 3, 3, 4, 3, 1, "same", 1),
    (2, 12, 16, 15, 10, 4, 4, 6, 5, 1, "same", 2),
    (3, 5, 12, 13, 9, 5, 2, 5, 9, 2, 1, 1),
    (1, 16, 20, 18, 12, 2, 3, 1, 1, 2, 2, 2),
    (2, 32, 14, 14, 24, 3, 3, 16, 12, 1, 1, 1),
    (1, 20, 13, 11, 16, 1, 1, 8, 8, 1, 0, 1),
    (4, 6, 9, 10, 7, 3, 5, 3, 4, 2, 2, 2),
]


@pytest.mark.parametrize("case", CPU_CASES)
def test_cpu_backend_equals_float64_direct_conv(case):
    n, c, h, w, t, kh, kw, d1, d2, stride, pad, dil = case
    rng = np.random.default_rng(d1 * 31 + d2)
    u = rng.standard_normal((n, c, h, w)).astype(np.float32)
    u_in, core, u_out, b = random_tucker(rng, c, t, kh, kw, d1, d2)
    g = conv_geometry(u.shape, (kh, kw), stride, pad, dil)
    out = np.full((n, t, g.out_h, g.out_w), np.nan, np.float32)
    tucker_conv2d(u, u_in, core, u_out, b, stride, pad, dil, backend="cpu", out=out)
    ref = direct_conv2d(u, tucker_kernel(u_in, core, u_out), b, stride, pad, dil)
    assert not np.isnan(out).any()
    assert rel_err(out, ref) < TOL


# Core kernel in the simulator: generic kernels (any stride/dilation) and the row-register
# kernels (kernel width 3 or 5, unit horizontal stride and dilation); several channel
# tiles exercise the atomic accumulation.
SIM_CORE_CASES = [
    # (N, D1, H, W, D2, kh, kw, stride, padding, dilation, TH, TW, TC)
    (1, 3, 6, 7, 5, 3, 3, 1, 1, 1, 2, 4, 3),        # row kernel kw3, one channel tile
    (2, 4, 5, 2, 3, 3, 3, 1, "same", 1, 4, 2, 1),   # row kernel, atomics over 4 tiles
    (1, 3, 3, 3, 4, 2, 5, (2, 1), 2, (2, 1), 2, 2, 2),  # row kernel kw5, vertical stride/dilation
    (1, 5, 8, 8, 3, 4, 4, 2, 1, 2, 1, 2, 2),        # generic: even kernel, stride 2, dilation 2
    (2, 2, 5, 6, 6, 2, 3, 2, 0, 1, 2, 1, 2),        # generic: kw 3 but stride 2
    (1, 4, 5, 5, 2, 1, 1, 1, 0, 1, 4, 4, 4),        # generic: 1x1 core
]
# Channel slices inside the block (split), alone and with atomics over channel tiles;
# channel counts that the slices do not divide, more output channels than one warp, and
# two and four output channels per thread (TN = 2, 4, row kernels) with odd channel
# counts; the copy's unrolled passes end inside a pass (tile sizes not a multiple of 4·block).
SIM_SPLIT_CASES = [
    # (N, D1, H, W, D2, kh, kw, stride, padding, dilation, TH, TW, TC, split, TN)
    (1, 5, 6, 7, 3, 3, 3, 1, 1, 1, 2, 4, 5, 2, 1),        # row kernel, 5 channels over 2 slices
    (2, 7, 5, 2, 4, 3, 3, 1, "same", 1, 4, 2, 4, 4, 1),   # row kernel, slices and 2 atomic tiles
    (1, 6, 5, 4, 3, 3, 5, (2, 1), 2, (2, 1), 2, 4, 8, 8, 1),  # row kw5, more slices than channels
    (1, 5, 8, 9, 2, 3, 3, 2, 1, 2, 2, 2, 2, 2, 1),        # generic, stride 2, dilation 2
    (1, 3, 1, 4, 34, 3, 3, 1, 1, 1, 1, 2, 2, 2, 1),       # 34 output channels: 64 threads a slice
    (1, 4, 6, 7, 5, 3, 3, 1, 1, 1, 2, 4, 4, 2, 2),        # TN 2: 5 channels on 16-thread slices
    (2, 3, 2, 5, 35, 3, 3, 1, "same", 1, 1, 4, 2, 1, 2),  # TN 2, 35 channels, atomic tiles
    (1, 3, 8, 7, 3, 3, 5, (2, 1), 2, (2, 1), 2, 2, 4, 4, 2),  # TN 2, kw 5, vertical stride
    (1, 6, 3, 5, 7, 3, 3, 1, 1, 1, 2, 4, 6, 4, 4),        # TN 4: 7 channels on 8-thread slices
    (2, 3, 2, 5, 37, 3, 3, 1, "same", 1, 1, 4, 2, 2, 4),  # TN 4, 37 channels, atomic tiles
    (1, 4, 9, 8, 5, 3, 5, (2, 1), 2, (2, 1), 2, 2, 4, 2, 4),  # TN 4, kw 5, vertical stride
    (1, 17, 2, 2, 3, 3, 3, 1, 1, 1, 1, 2, 17, 16, 2),     # 16 slices, 17 channels
    (1, 5, 8, 7, 6, 3, 3, (2, 1), 1, 1, 2, 4, 5, 2, 2),   # row kw 3 (not the 3x3 kernel: stride 2x1)
    (1, 4, 6, 7, 5, 2, 3, 1, 1, 1, 2, 4, 4, 2, 4),        # row kw 3 under a 2-row kernel, TN 4
]


def slow_unless(cases, quick):
    """The cases as pytest parameters, those not at the indices ``quick`` under ``slow``."""
    return [pytest.param(c, marks=() if i in quick else pytest.mark.slow) for i, c in enumerate(cases)]


# The default run takes one case of each kernel (row, generic, 3x3) and of channel slices
# with atomics and TN 4; the others run with ``-m slow``.
@pytest.mark.parametrize("case", slow_unless(SIM_CORE_CASES, {0, 3}))
def test_cuda_core_kernel_equals_float64_direct_conv(case):
    from numba import cuda

    n, d1, h, w, d2, kh, kw, stride, pad, dil, th, tw, tc = case
    rng = np.random.default_rng(th * 100 + tw * 10 + tc)
    z = rng.standard_normal((n, d1, h, w)).astype(np.float32)
    core = rng.standard_normal((d2, d1, kh, kw)).astype(np.float32)
    g = conv_geometry(z.shape, (kh, kw), stride, pad, dil)
    plan = TuckerCorePlan(core, g, CoreTile(th, tw, tc))
    d_out = cuda.to_device(np.full((n, d2, g.out_h, g.out_w), np.nan, np.float32))
    plan(cuda.to_device(z), d_out)
    out = d_out.copy_to_host()
    assert not np.isnan(out).any()
    assert rel_err(out, direct_conv2d(z, core, None, stride, pad, dil)) < TOL


@pytest.mark.parametrize("case", slow_unless(SIM_SPLIT_CASES, {1, 8}))
def test_cuda_core_kernel_channel_slices_equal_float64_direct_conv(case):
    from numba import cuda

    n, d1, h, w, d2, kh, kw, stride, pad, dil, th, tw, tc, split, tn = case
    rng = np.random.default_rng(th * 1000 + tw * 100 + tc * 10 + split + d2)
    z = rng.standard_normal((n, d1, h, w)).astype(np.float32)
    core = rng.standard_normal((d2, d1, kh, kw)).astype(np.float32)
    g = conv_geometry(z.shape, (kh, kw), stride, pad, dil)
    plan = TuckerCorePlan(core, g, CoreTile(th, tw, tc, split, tn))
    unit = 32 // tn
    assert plan.block == split * unit * math.ceil(math.ceil(d2 / tn) / unit)
    d_out = cuda.to_device(np.full((n, d2, g.out_h, g.out_w), np.nan, np.float32))
    plan(cuda.to_device(z), d_out)
    out = d_out.copy_to_host()
    assert not np.isnan(out).any()
    assert rel_err(out, direct_conv2d(z, core, None, stride, pad, dil)) < TOL


# The 3x3 unit-stride kernel (one iteration per channel, rows at a 16-byte pitch, weights
# warp-interleaved): tiles that do not divide the map, channel slices and atomic channel
# tiles, TN 1/2/4, slices of two warps (34 channels), several output-channel groups, paddings.
SIM_SQUARE_CASES = [
    # (N, D1, H, W, D2, padding, TH, TW, TC, split, TN)
    (1, 3, 6, 7, 5, 1, 2, 4, 3, 1, 1),
    (2, 3, 2, 5, 35, "same", 1, 4, 2, 1, 2),     # atomic channel tiles, batch 2
    (1, 6, 3, 5, 7, 1, 2, 4, 6, 4, 4),           # TN 4, 7 channels on 8-thread slices
    (1, 3, 1, 4, 34, 1, 1, 2, 2, 2, 1),          # 64-thread slices: two warp rows of weights
    (1, 4, 2, 3, 40, 1, 2, 2, 4, 8, 1),          # 32-thread slices, two output-channel groups
    (1, 5, 3, 5, 3, 1, 4, 8, 5, 2, 2),           # 4x8 tile over a 3x5 map, 5 channels, 2 slices
    (1, 2, 2, 2, 150, 1, 1, 1, 2, 8, 4),         # TN 4, two groups of 128 channels
    (1, 3, 6, 6, 4, 0, 2, 2, 3, 1, 2),           # no padding
    (1, 3, 5, 5, 4, 2, 1, 7, 3, 2, 1),           # padding 2, a 1x7 tile wider than the map
]


@pytest.mark.parametrize("case", slow_unless(SIM_SQUARE_CASES, {0}))
def test_cuda_square_kernel_equals_float64_direct_conv(case):
    from numba import cuda

    n, d1, h, w, d2, pad, th, tw, tc, split, tn = case
    rng = np.random.default_rng(th * 1000 + tw * 100 + tc * 10 + split + d2)
    z = rng.standard_normal((n, d1, h, w)).astype(np.float32)
    core = rng.standard_normal((d2, d1, 3, 3)).astype(np.float32)
    g = conv_geometry(z.shape, (3, 3), 1, pad, 1)
    plan = TuckerCorePlan(core, g, CoreTile(th, tw, tc, split, tn))
    assert plan.variant == (th, tw, 3, 3, tn)
    d_out = cuda.to_device(np.full((n, d2, g.out_h, g.out_w), np.nan, np.float32))
    plan(cuda.to_device(z), d_out)
    out = d_out.copy_to_host()
    assert not np.isnan(out).any()
    assert rel_err(out, direct_conv2d(z, core, None, 1, pad, 1)) < TOL

def test_cuda_full_tucker_layer_with_model_tiles():
    rng = np.random.default_rng(5)
    u = rng.standard_normal((2, 6, 4, 3)).astype(np.float32)
    u_in, core, u_out, b = random_tucker(rng, 6, 4, 3, 3, 3, 2)
    out = np.full((2, 4, 4, 3), np.nan, np.float32)
    tucker_conv2d(u, u_in, core, u_out, b, padding="same", backend="cuda", out=out)
    assert rel_err(out, direct_conv2d(u, tucker_kernel(u_in, core, u_out), b, 1, "same", 1)) < TOL


def test_core_conv_cpu_equals_torch_conv2d():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    z = rng.standard_normal((2, 16, 15, 17)).astype(np.float32)
    core = rng.standard_normal((12, 16, 3, 3)).astype(np.float32)
    ours = tucker_core_conv2d(z, core, 1, 1, 1, backend="cpu")
    ref = torch.nn.functional.conv2d(torch.from_numpy(z), torch.from_numpy(core), padding=1).numpy()
    assert np.abs(ours - ref).max() / np.abs(ref).max() < TOL


def test_full_layer_cpu_equals_torch_conv2d():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(10)
    u = rng.standard_normal((3, 24, 19, 16)).astype(np.float32)
    u_in, core, u_out, b = random_tucker(rng, 24, 20, 3, 5, 8, 6)
    ours = tucker_conv2d(u, u_in, core, u_out, b, 2, 2, 1, backend="cpu")
    k = torch.from_numpy(tucker_kernel(u_in, core, u_out).astype(np.float32))
    ref = torch.nn.functional.conv2d(torch.from_numpy(u), k, torch.from_numpy(b), 2, 2, 1).numpy()
    assert np.abs(ours - ref).max() / np.abs(ref).max() < TOL


def test_factor_errors_say_what_is_wrong():
    rng = np.random.default_rng(0)
    u_in, core, u_out, b = random_tucker(rng, 4, 3, 3, 3, 2, 2)
    with pytest.raises(ValueError, match="input ranks"):
        check_tucker_factors(u_in[:, :1], core, u_out)
    with pytest.raises(ValueError, match="output ranks"):
        check_tucker_factors(u_in, core, u_out[:, :1])
    bad = core.copy()
    bad[0, 0, 0, 0] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        check_tucker_factors(u_in, bad, u_out)
    with pytest.raises(ValueError, match="5 channels but U_in has 4 rows"):
        tucker_conv2d(np.zeros((1, 5, 6, 6), np.float32), u_in, core, u_out, backend="cpu")


SHAPE = dict(C=64, N=32, Ho=28, Wo=28, kh=3, kw=3, sh=1, sw=1, dh=1, dw=1, batch=1)


def test_waves_and_latency_follow_eq14():
    spec = GpuSpec(sms=2, threads_per_sm=2048, blocks_per_sm=32, regs_per_sm=65536,
                   shared_per_sm=228 * 1024, peak_flops=1e12)
    tile = CoreTile(4, 4, 16)
    # 7·7 tiles × 4 channel chunks, 32 threads each; occupancy: 32 blocks of 32 threads → 0.5
    threads = 7 * 7 * 4 * 32
    waves = math.ceil(threads / (2 * 2048 * 0.5))
    blk = 2 * (4 + 2) * (4 + 2) * 16 * (2 * 2048) * 9 / 1e12
    assert comp_latency(tile, SHAPE, spec) == pytest.approx(waves * blk)


def test_data_volume_follows_eqs16_to_19():
    tile = CoreTile(4, 7, 16)
    tiles = 7 * 4
    expected = tiles * 64 * 6 * 9 + tiles * 64 * 32 * 9 + 28 * 28 * 32 * 4
    assert data_volume(tile, SHAPE) == expected


def test_model_picks_a_candidate_and_exhaustive_picks_the_fastest():
    cands = tile_candidates(SHAPE)
    assert select_tile_model(SHAPE) in cands
    times = {t: (t.th * 7 + t.tw * 3 + t.tc) % 11 + 1 for t in cands}
    best, timings = select_tile_exhaustive(SHAPE, times.__getitem__)
    assert timings == times and times[best] == min(times.values())


def test_cost_model_picks_its_least_time_and_charges_atomics():
    cands = tile_candidates(SHAPE, MODEL_MAX_TN)
    pick = select_tile_model(SHAPE)
    assert tile_time(pick, SHAPE) == min(tile_time(t, SHAPE) for t in cands)
    assert select_tile_tdc(SHAPE) in cands
    # two channel tiles pay the zero-fill and one atomic add per output and channel tile;
    # SHAPE (3x3, unit stride) runs the 3x3 kernel and so takes its constants, a 3x5 kernel not
    halves = CoreTile(2, 4, 32, 8, 2)
    for shape, cost in ((SHAPE, SQUARE_COST), (dict(SHAPE, kw=5), CostModel())):
        free = dataclasses.replace(cost, fill_us=0.0, atomic_us_per_million=0.0)
        extra = tile_time(halves, shape) - tile_time(halves, shape, cost=free)
        assert extra == pytest.approx(cost.fill_us + cost.atomic_us_per_million * 28 * 28 * 32 * 2 / 1e6)
        whole = CoreTile(2, 4, 64, 8, 2)
        assert tile_time(whole, shape) == tile_time(whole, shape, cost=free)
    assert uses_square_kernel(SHAPE) and not uses_square_kernel(dict(SHAPE, sh=2))


def test_cost_model_time_grows_with_the_image():
    small = dict(SHAPE, Ho=14, Wo=14)
    big = dict(SHAPE, Ho=112, Wo=112)
    tile = CoreTile(4, 8, 64, 8, 2)
    assert tile_time(tile, small) <= tile_time(tile, SHAPE) < tile_time(tile, big)


def test_two_channels_per_thread_only_for_row_kernels():
    generic = dict(SHAPE, sw=2)
    assert all(t.tn == 1 for t in tile_candidates(generic))
    assert any(t.tn == 2 for t in tile_candidates(SHAPE))
    with pytest.raises(ValueError, match="2 output channels per thread"):
        g = conv_geometry((1, 4, 9, 9), (3, 3), 2, 1, 1)
        TuckerCorePlan(np.zeros((3, 4, 3, 3), np.float32), g, CoreTile(2, 2, 4, 1, 2))


def test_candidates_give_every_input_tile_column_a_copy_thread():
    # the tile copy takes one column per thread: a 1x16 tile of a 5-wide kernel needs 20
    wide = dict(SHAPE, N=4, kw=5)
    cands = tile_candidates(wide)
    assert cands and all(copy_fits(t, wide) for t in cands)
    assert CoreTile(1, 16, 4, 1, 4) not in cands
    with pytest.raises(ValueError, match="fewer than the 20 input-tile columns"):
        g = conv_geometry((1, 4, 9, 30), (3, 5), 1, "same", 1)
        TuckerCorePlan(np.zeros((4, 4, 3, 5), np.float32), g, CoreTile(1, 16, 4, 1, 4))


def test_model_ranks_the_tn_it_was_fitted_on_and_the_tuner_every_tn():
    assert {t.tn for t in tile_candidates(SHAPE)} == {1, 2, 4}
    assert {t.tn for t in tile_candidates(SHAPE, MODEL_MAX_TN)} == {1, 2}
    assert select_tile_model(SHAPE).tn <= MODEL_MAX_TN and select_tile_tdc(SHAPE).tn <= MODEL_MAX_TN


def test_kernel_variant_names_the_kernel_a_plan_runs_and_each_compiles():
    g = conv_geometry((1, 4, 9, 30), (3, 5), 1, "same", 1)
    assert core_kernel_variant(CoreTile(1, 16, 4, 2, 4), g) == (1, 16, 0, 5, 4)
    g2 = conv_geometry((1, 4, 9, 30), (3, 3), 2, 1, 1)
    assert core_kernel_variant(CoreTile(2, 4, 4, 2, 1), g2) == (2, 4, 0, 0, 1)
    g3 = conv_geometry((1, 4, 9, 30), (3, 3), 1, 1, 1)
    assert core_kernel_variant(CoreTile(2, 4, 4, 2, 2), g3) == (2, 4, 3, 3, 2)
    g4 = conv_geometry((1, 4, 9, 30), (3, 3), (2, 1), 1, 1)
    assert core_kernel_variant(CoreTile(2, 4, 4, 2, 2), g4) == (2, 4, 0, 3, 2)
    # generic kernel, a row kernel with TN 4, the widest tile of a 5-wide kernel, a 3x3 kernel
    compile_core_kernels([(2, 4, 0, 0, 1), (2, 2, 0, 3, 4), (1, 16, 0, 5, 1), (2, 4, 3, 3, 2)])
