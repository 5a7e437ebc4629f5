"""The numba.cuda TTMc kernels under the CUDA simulator equal the CPU backend (tiny shapes).

The simulator runs every thread as a Python thread, so the default run takes one case of
each kernel and launch shape; the other dtypes, modes and orders are the ``slow`` sweep.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpu.compress.ttmc import ttmc
from gpu.compress.bound import PRECISIONS, step_theta
from gpu.compress.backend_cpu import CpuTTMcOps
from gpu.compress.backend_cuda import CudaTTMcOps
from gpu.cuda.simulator import simulator_active

# these tests set the kernels' block constants, which the simulator reads at run time and a
# GPU compiles in: on a GPU their launches would not match the compiled kernels
simulator_only = pytest.mark.skipif(not simulator_active(), reason="sets kernel block constants: simulator only")


@pytest.fixture(scope="module")
def ops():
    return CpuTTMcOps(), CudaTTMcOps(gemm="numba")


def tensor(rng, shape):
    return rng.standard_normal(shape) * np.exp(rng.uniform(-6, 6, shape))


def reference(x, mats):
    y = x
    for n, u in enumerate(mats):
        y = np.moveaxis(np.tensordot(u, y, axes=([1], [n])), 0, n)
    return y


@pytest.mark.parametrize("shape", [(3, 4, 5), pytest.param((2, 3, 2, 4), marks=pytest.mark.slow), pytest.param((2, 2, 3, 2, 2), marks=pytest.mark.slow)])
def test_stats_kernel_equals_cpu(ops, shape):
    cpu, gpu = ops
    rng = np.random.default_rng(1)
    x = tensor(rng, shape)
    x[(0,) * len(shape)] = np.inf
    mc, sc, bc = cpu.stats(x)
    mg, sg, bg = gpu.stats(gpu.asarray(x))
    for a, b in zip(mc, mg):
        np.testing.assert_array_equal(a, b)
    assert sg == pytest.approx(sc, rel=1e-13) and bc == bg == 1


@simulator_only
@pytest.mark.parametrize("block", [64, pytest.param(256, marks=pytest.mark.slow)])
def test_stats_kernel_column_chunks(ops, monkeypatch, block):
    """More columns than one block's shared buffer: the column-chunk grid dimension.

    The simulator reads the module constants at run time, so a chunk of 8 columns is real
    here; 64-thread blocks (2 threads a row in the first reduction stage) keep the simulator,
    which runs each thread as a Python thread, quicker than the 256 of the GPU build.
    """
    import gpu.compress.backend_cuda as mod

    cpu, gpu = ops
    monkeypatch.setattr(mod, "_CHUNK", 8)
    monkeypatch.setattr(mod, "_BLOCK", block)
    monkeypatch.setattr(mod, "_PARTS", block // mod._GROUP)
    x = tensor(np.random.default_rng(2), (2, 3, 2))  # 12 columns: a full chunk and a part
    mg, sg, _ = gpu.stats(gpu.asarray(x))
    mc, sc, _ = cpu.stats(x)
    for a, b in zip(mc, mg):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float16, pytest.param(np.float32, marks=pytest.mark.slow), pytest.param(np.float64, marks=pytest.mark.slow)])
def test_kron_scale_kernel_equals_cpu_bit_for_bit(ops, dtype):
    cpu, gpu = ops
    rng = np.random.default_rng(3)
    x = tensor(rng, (3, 4, 5))
    exps = [rng.integers(-12, 12, s) for s in x.shape]
    a, bad_a = cpu.kron_scale(x, exps, dtype)
    b, bad_b = gpu.kron_scale(gpu.asarray(x), exps, dtype)
    assert a.tobytes() == gpu.to_host(b).tobytes() and bad_a == gpu.read_int(bad_b)


@simulator_only
# By default FP16 output from float32 data and a scan alone of float64 data: both working
# types and both kinds of pass.
@pytest.mark.parametrize(
    "dtype, source",
    [(np.float16, np.float32), (None, np.float64), pytest.param(np.float16, np.float64, marks=pytest.mark.slow),
     pytest.param(np.float32, np.float32, marks=pytest.mark.slow), pytest.param(np.float32, np.float64, marks=pytest.mark.slow),
     pytest.param(None, np.float32, marks=pytest.mark.slow)],
)
def test_scale_scan_kernel_equals_cpu(ops, monkeypatch, dtype, source):
    """The fused pass: same X̃ bit for bit, same Σx², max |X̃| and counts (rows of one chunk
    of 2 × 32 columns and a remainder, so both the unrolled and the tail loop run; float32
    and float64 working types). The simulator reads the block constants at run time, so
    32-thread blocks are real here."""
    import gpu.compress.backend_cuda as mod

    cpu, gpu = ops
    monkeypatch.setattr(mod, "_BLOCK", 32)
    monkeypatch.setattr(mod, "_UNROLL", 2)
    rng = np.random.default_rng(8)
    x = tensor(rng, (2, 3, 24)).astype(source)
    x[1, 2, 23] = 3e5  # 7.5e4 once scaled by 2^(-3 - 1 + 2): beyond FP16
    exps = [rng.integers(-3, 3, s) for s in x.shape]
    a, scan_a = cpu.scale_scan(x, exps, dtype)
    b, handle = gpu.scale_scan(gpu.asarray(x), exps, dtype)
    scan_b = gpu.read_scan(handle)
    assert scan_b[1:] == scan_a[1:] and scan_b[0] == pytest.approx(scan_a[0], rel=1e-12)
    assert scan_a[2] == 0 and scan_a[3] == (1 if dtype is np.float16 else 0)
    if dtype is None:
        assert a is None and b is None
    else:
        assert a.tobytes() == gpu.to_host(b).tobytes()
    x[0, 1, 5] = np.nan  # counted on both backends; the sums then mean nothing
    _, (_, _, bad_in, bad_out) = cpu.scale_scan(x, exps, dtype)
    _, handle = gpu.scale_scan(gpu.asarray(x), exps, dtype)
    assert gpu.read_scan(handle)[2:] == (bad_in, bad_out) == (1, 0 if dtype is None else 1 + scan_a[3])


@simulator_only
@pytest.mark.parametrize("source", [np.float32, pytest.param(np.float16, marks=pytest.mark.slow)])
def test_scale_scan_row_groups_and_partial_chunks(ops, monkeypatch, source):
    """Many rows, several column chunks and a partial one: with small block constants (the
    simulator reads them at run time) a tiny tensor exercises the whole segment grid."""
    import gpu.compress.backend_cuda as mod

    cpu, gpu = ops
    for name, value in (("_BLOCK", 32), ("_UNROLL", 2), ("_ROW_GROUP", 3)):
        monkeypatch.setattr(mod, name, value)
    rng = np.random.default_rng(10)
    x = tensor(rng, (7, 5, 40)).astype(source)
    exps = [rng.integers(-4, 4, s) for s in x.shape]
    a, scan_a = cpu.scale_scan(x, exps, np.float16)
    b, handle = gpu.scale_scan(gpu.asarray(x), exps, np.float16)
    scan_b = gpu.read_scan(handle)
    assert a.tobytes() == gpu.to_host(b).tobytes()
    assert scan_b[1:] == scan_a[1:] and scan_b[0] == pytest.approx(scan_a[0], rel=1e-12)


def test_gather_equals_cpu(ops):
    from gpu.compress.scaling import sample_positions

    cpu, gpu = ops
    x = tensor(np.random.default_rng(9), (3, 5, 4))
    positions = sample_positions(x.shape, per_index=2)
    np.testing.assert_array_equal(cpu.gather(x, positions), gpu.gather(gpu.asarray(x), positions))


def test_power_of_two_scaling_round_trip_is_exact_on_the_device(ops):
    _, gpu = ops
    rng = np.random.default_rng(4)
    x = tensor(rng, (2, 3, 4, 2))
    exps = [rng.integers(-40, 40, s) for s in x.shape]
    scaled, _ = gpu.kron_scale(gpu.asarray(x), exps, np.float64)
    back, _ = gpu.kron_scale(scaled, [-e for e in exps], np.float64)
    assert gpu.to_host(back).tobytes() == x.tobytes()


def test_fiber_scaling_kernels_equal_cpu(ops):
    cpu, gpu = ops
    rng = np.random.default_rng(5)
    x = tensor(rng, (3, 4, 5))
    xs_c, s_c, inv_c = cpu.fiber_scale(x, 1, 3, np.float16)
    xs_g, s_g, inv_g = gpu.fiber_scale(gpu.asarray(x), 1, 3, np.float16)
    assert xs_c.tobytes() == gpu.to_host(xs_g).tobytes()
    np.testing.assert_array_equal(s_c.ravel(), gpu.to_host(s_g))
    assert gpu.read_norm(inv_g) == pytest.approx(inv_c, rel=1e-14)
    rows = rng.integers(-3, 3, 4)
    back_c = cpu.fiber_unscale(xs_c, 1, rows, s_c, np.float32)
    back_g = gpu.fiber_unscale(xs_g, 1, rows, s_g, np.float32)
    assert back_c.tobytes() == gpu.to_host(back_g).tobytes()


# Each precision (FP32 or FP64 accumulation) once and each mode (first, middle, last: three
# stride patterns) once by default. The mode of 18 spans two 16-wide tiles of the inner
# dimension; the others give two tiles of output columns (first mode), two batches (middle)
# and two tiles of output rows (last, one GEMM).
@pytest.mark.parametrize(
    "precision, mode",
    [(p, m) if (p, m) in {("fp16", 1), ("fp32", 2), ("fp64", 0)} else pytest.param(p, m, marks=pytest.mark.slow)
     for p in ("fp16", "fp32", "fp64") for m in (0, 1, 2)],
)
def test_gemm_kernel_equals_cpu(ops, precision, mode):
    cpu, gpu = ops
    prec = PRECISIONS[precision]
    rng = np.random.default_rng(6)
    shape = [2, 9, 3]
    shape[mode] = 18
    x = rng.standard_normal(shape).astype(prec.storage)
    u = rng.standard_normal((4, x.shape[mode])).astype(prec.storage)
    a = cpu.ttm(x, u, mode, prec).astype(np.float64)
    b = gpu.to_host(gpu.ttm(gpu.asarray(x), gpu.asarray(u), mode, prec)).astype(np.float64)
    # Both satisfy |fl(UX) − UX| ≤ θ|U||X|; only the summation order differs.
    theta = step_theta(x.shape[mode], prec)
    tol = 2 * theta * np.abs(cpu.ttm(np.abs(x), np.abs(u), mode, prec).astype(np.float64)) + prec.eta
    assert np.all(np.abs(a - b) <= tol)


def _column_major_strided_batched_gemm(ta, tb, m, n, k, a, lda, sa, b, ldb, sb, c, ldc, sc, batch):
    """cublasGemmStridedBatchedEx's definition (alpha 1, beta 0) on flat float64 buffers:
    column-major matrices, element (r, s) of one at offset + r + s·ld."""
    for z in range(batch):
        for r in range(m):
            for col in range(n):
                total = 0.0
                for t in range(k):
                    left = a[z * sa + (t + r * lda if ta else r + t * lda)]
                    right = b[z * sb + (col + t * ldb if tb else t + col * ldb)]
                    total += left * right
                c[z * sc + r + col * ldc] = total


@pytest.mark.parametrize("shape, mode", [((3, 4, 2), 0), ((3, 4, 2), 1), ((3, 4, 2), 2), ((5, 3), 1)])
def test_cublas_arguments_compute_the_mode_product(shape, mode):
    """The strided-batched GEMM the cuBLAS path launches, evaluated as cuBLAS defines it on
    the same flat buffers, is ``X ×_mode U`` (float64 tensordot), the last mode (Q = 1)
    included."""
    from gpu.compress.backend_cpu import mode_view
    from gpu.compress.backend_cuda import _gemm_arguments

    rng = np.random.default_rng(8)
    x = rng.standard_normal(shape)
    u = rng.standard_normal((3, shape[mode]))
    p, i, q = mode_view(shape, mode)
    j = u.shape[0]
    y = np.full(p * j * q, np.nan)
    _column_major_strided_batched_gemm(*_gemm_arguments(x.ravel(), u.ravel(), y, p, i, q, j))
    expected = np.moveaxis(np.tensordot(u, x, axes=([1], [mode])), 0, mode)
    np.testing.assert_allclose(y.reshape(expected.shape), expected, rtol=1e-13, atol=1e-13)


@simulator_only
@pytest.mark.parametrize("scaling", [pytest.param("none", marks=pytest.mark.slow), pytest.param("onesided", marks=pytest.mark.slow), "kronecker"])
def test_ttmc_cuda_backend_equals_cpu_backend(ops, monkeypatch, scaling):
    """The whole TTMc on the device equals the CPU backend. The simulator runs one Python
    thread per device thread and reads the module constants at run time, so it runs with
    64-thread blocks and 8×8 GEMM tiles here."""
    import gpu.compress.backend_cuda as mod

    cpu, gpu = ops
    for name, value in (("_BLOCK", 64), ("_PARTS", 64 // mod._GROUP), ("_TILE", 8)):
        monkeypatch.setattr(mod, name, value)
    rng = np.random.default_rng(7)
    x = tensor(rng, (4, 3, 5))
    mats = [rng.standard_normal((2, s)) for s in x.shape]
    y64 = reference(x, mats)
    for precision in ("fp16", "fp64"):
        rc = ttmc(x, mats, precision=precision, scaling=scaling, order="best", ops=cpu)
        rg = ttmc(x, mats, precision=precision, scaling=scaling, order="best", ops=gpu)
        yg = gpu.to_host(rg.y)
        assert rg.report.order == rc.report.order and rg.report.backend == "cuda"
        assert rg.report.bound == pytest.approx(rc.report.bound, rel=1e-12)
        assert np.linalg.norm(yg - y64) <= rg.report.bound
        if precision == "fp16":
            # Inner products of length ≤ 5 in FP32 round to the same FP16 value.
            np.testing.assert_array_equal(yg, rc.y)
        else:
            np.testing.assert_allclose(yg, rc.y, rtol=1e-13, atol=1e-13 * np.abs(rc.y).max())


def test_overflow_count_matches_rounding_to_infinity(ops):
    """65519.99 rounds to 65504, 65520 to inf: the kernel counts exactly the latter."""
    cpu, gpu = ops
    x = np.array([[[65519.99, 65520.0, -1e6, 1.0]]])
    zero = [np.zeros(s, np.int64) for s in x.shape]
    a, bad_a = cpu.kron_scale(x, zero, np.float16)
    b, bad_b = gpu.kron_scale(gpu.asarray(x), zero, np.float16)
    assert bad_a == gpu.read_int(bad_b) == 2
    assert a.tobytes() == gpu.to_host(b).tobytes()
