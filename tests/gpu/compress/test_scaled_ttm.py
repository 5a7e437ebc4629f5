"""The fused first mode product (X scaled in the GEMM's loads).

Host-side parts run everywhere. The kernel itself is CUDA C++ on the tensor cores, which
numba's simulator cannot run, so its tests need a GPU and CuPy; on the device machine:
``NUMBA_ENABLE_CUDASIM=0 python3 -m pytest tests/gpu/compress/test_scaled_ttm.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpu.cuda.device import cuda_available
from gpu.compress.ttmc import make_ops, ttmc
from gpu.compress.bound import get_precision
from gpu.compress.backend_cpu import CpuTTMcOps, mode_product
from gpu.compress.scaled_ttm import MAX_ROWS, fused_shape_ok, padded_factor


def test_padded_factor_rounds_to_fp16_and_pads_with_zeros():
    rng = np.random.default_rng(0)
    u = rng.standard_normal((20, 80))
    pad = padded_factor(u)
    assert pad.shape == (32, 96) and pad.dtype == np.float16
    np.testing.assert_array_equal(pad[:20, :80], u.astype(np.float16))
    assert not pad[20:].any() and not pad[:, 80:].any()
    assert padded_factor(rng.standard_normal((128, 512))).shape == (128, 512)
    assert padded_factor(rng.standard_normal((3, 3))).shape == (16, 32)


def test_fused_shape_rules():
    assert fused_shape_ok(1, 256, 256 * 2048, 64)
    assert fused_shape_ok(96, 40, 64, 12)
    assert not fused_shape_ok(1, 256, 256 * 2048, MAX_ROWS + 1)  # more rows than registers hold
    assert not fused_shape_ok(7, 50, 1, 8)  # last mode first: no column tiles
    assert not fused_shape_ok(4, 8, 66, 8)  # columns not a multiple of four


def test_cpu_scaled_ttm_is_the_scaling_pass_then_the_product():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 6, 7)).astype(np.float32)
    exps = [rng.integers(-3, 4, n) for n in x.shape]
    u = rng.standard_normal((4, 6))
    ops, fp16 = CpuTTMcOps(), get_precision("fp16")
    y, scan = ops.scaled_ttm(x, exps, u, 1, fp16)
    x_tilde, scan_ref = ops.scale_scan(x, exps, np.float16)
    np.testing.assert_array_equal(y, mode_product(x_tilde, u.astype(np.float16), 1, fp16))
    assert scan == scan_ref


def _cupy():
    try:
        import cupy
    except ImportError:
        return None
    return cupy


needs_gpu = pytest.mark.skipif(
    not cuda_available() or _cupy() is None, reason="the fused kernel runs on a CUDA GPU with CuPy only"
)


def _orthonormal_rows(rng, j, i):
    q, _ = np.linalg.qr(rng.standard_normal((i, j)))
    return np.ascontiguousarray(q.T)


@needs_gpu
@pytest.mark.parametrize(
    "shape, rank",
    [
        ((3, 40, 96), 3),  # I = 3: one partial chunk; 1 row tile
        ((64, 64, 512), 16),
        ((24, 24, 24, 24), 20),  # 2 row tiles
        ((96, 40, 64), 12),  # first mode in the middle: P = 96 batches
        ((40, 70, 100), 40),  # 4 row tiles, I not a multiple of 32
        ((128, 128, 256), 128),  # 8 row tiles
    ],
)
def test_fused_product_equals_the_unfused_route_and_float64(shape, rank):
    cp = _cupy()
    rng = np.random.default_rng(2)
    mats = [_orthonormal_rows(rng, min(rank, i), i) for i in shape]
    host = rng.standard_normal(shape).astype(np.float32) * np.float32(1e3)
    x = cp.asarray(host)
    fused_ops, plain_ops = make_ops("cuda", gemm="cublas"), make_ops("cuda", gemm="cublas")
    plain_ops.fuse = False
    fused, plain = ttmc(x, mats, ops=fused_ops), ttmc(x, mats, ops=plain_ops)
    names = [name for name, _ in fused.report.times]
    assert names[1] == f"scale+ttm{fused.report.order[0]}"
    assert [name for name, _ in plain.report.times][1] == "scale"
    y, y_plain = cp.asnumpy(fused.y).astype(np.float64), cp.asnumpy(plain.y).astype(np.float64)
    # Same X̃, same Ũ: only the FP32 accumulation order may differ.
    assert np.linalg.norm(y - y_plain) <= 1e-3 * np.linalg.norm(y_plain)
    assert fused.report.norm_x == pytest.approx(plain.report.norm_x, rel=1e-12)
    assert fused.report.bound == pytest.approx(plain.report.bound, rel=1e-12)
    y64 = host.astype(np.float64)
    for m in fused.report.order:
        y64 = mode_product(y64, mats[m], m, get_precision("fp64"))
    assert np.linalg.norm(y - y64) <= fused.report.bound
    assert not fused.report.overflow


@needs_gpu
def test_fused_product_falls_back_when_the_sample_misses_the_maximum():
    cp = _cupy()
    rng = np.random.default_rng(3)
    host = rng.standard_normal((32, 48, 64)).astype(np.float32)
    from gpu.compress.scaling import sample_positions

    hit = np.zeros(host.shape, bool)
    hit[tuple(sample_positions(host.shape))] = True
    spot = tuple(int(i[0]) for i in np.nonzero(~hit))
    host[spot] = 1e30
    mats = [_orthonormal_rows(rng, 8, n) for n in host.shape]
    result = ttmc(cp.asarray(host), mats, ops=make_ops("cuda", gemm="cublas"))
    names = [name for name, _ in result.report.times]
    assert names[:4] == ["sample", "scale+ttm0", "norms", "rescale"] and result.report.maxima_from == "exact"
    y64 = host.astype(np.float64)
    for m in result.report.order:
        y64 = mode_product(y64, mats[m], m, get_precision("fp64"))
    y = cp.asnumpy(result.y).astype(np.float64)
    assert math.isfinite(result.report.bound) and np.linalg.norm(y - y64) <= result.report.bound
