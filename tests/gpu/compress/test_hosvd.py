"""ST-HOSVD/HOOI: the tolerance is met (float64 reconstruction as reference), TensorLy as peer."""

from __future__ import annotations

import nibabel as nib
import numpy as np
import pytest

from gpu.compress.hosvd import mode_products, recover_core, select_rank, st_hosvd, tucker_reconstruct
from gpu.cuda.device import cuda_available


def smooth_field(shape=(34, 30, 26)):
    """A smooth scientific field (numerically low multilinear rank)."""
    x, y, z = np.meshgrid(*[np.linspace(0, 1, n) for n in shape], indexing="ij")
    return np.sin(3 * x + y) * np.exp(-z) + 1.0 / (1.0 + 4 * x * x + y * y + 2 * z * z) + 0.5 * np.cos(5 * y * z)


def small_64d() -> np.ndarray:
    from dipy.data import get_fnames

    return nib.load(get_fnames(name="small_64D")[0]).get_fdata()


def achieved(d, x) -> float:
    xhat = tucker_reconstruct(d.core, d.factors, d.core_exp)
    return float(np.linalg.norm(xhat - x) / np.linalg.norm(x))


@pytest.mark.parametrize("precision", ["fp16", "fp32", "fp64"])
@pytest.mark.parametrize("tol", [1e-2, 1e-3])
def test_smooth_field_meets_tolerance(precision, tol):
    x = smooth_field()
    d = st_hosvd(x, tol=tol, precision=precision, backend="cpu")
    err = achieved(d, x)
    assert err <= tol
    # The reported error is the reconstruction error, not an estimate.
    assert d.relative_error == pytest.approx(err, rel=1e-8)
    assert all(r < s for r, s in zip(d.ranks, x.shape))  # it compresses
    assert d.core_error <= d.ttmc_report.bound + np.linalg.norm(recover_core(d.core, d.core_exp)) * 2**-10


def test_fp16_core_is_stored_scaled_in_fp16():
    x = smooth_field() * 1e6  # the core holds values far beyond 65504
    d = st_hosvd(x, tol=1e-2, precision="fp16", backend="cpu")
    assert d.core.dtype == np.float16 and np.all(np.isfinite(d.core))
    assert np.abs(recover_core(d.core, d.core_exp)).max() > 65504
    assert achieved(d, x) <= 1e-2


@pytest.mark.parametrize("tol", [5e-2, 2e-2])
def test_dipy_small_64d_meets_tolerance(tol):
    x = small_64d()
    d = st_hosvd(x, tol=tol, precision="fp16", backend="cpu")
    assert achieved(d, x) <= tol
    assert d.relative_error == pytest.approx(achieved(d, x), rel=1e-8)


def test_tight_tolerance_widens_the_core_when_fp16_cannot_meet_it():
    x = smooth_field()
    d = st_hosvd(x, tol=2e-4, precision="fp16", backend="cpu")
    assert achieved(d, x) <= 2e-4
    assert d.core_precision in ("fp32", "fp64")


def test_fixed_ranks_and_hooi_against_tensorly():
    tl = pytest.importorskip("tensorly")
    from tensorly.decomposition import tucker

    x = small_64d()
    ranks = (6, 6, 6, 20)
    st = st_hosvd(x, ranks=ranks, precision="fp64", backend="cpu")
    hooi = st_hosvd(x, ranks=ranks, precision="fp64", hooi_sweeps=3, backend="cpu")
    assert st.ranks == hooi.ranks == ranks
    assert achieved(hooi, x) <= achieved(st, x) + 1e-12
    tl.set_backend("numpy")
    core, factors = tucker(x, rank=list(ranks), init="svd", n_iter_max=100, tol=1e-10, random_state=0)
    peer = np.linalg.norm(tl.tucker_to_tensor((core, factors)) - x) / np.linalg.norm(x)
    # ST-HOSVD is quasi-optimal; HOOI reaches TensorLy's converged HOOI error.
    assert achieved(st, x) <= 1.05 * peer
    assert achieved(hooi, x) == pytest.approx(peer, rel=5e-3)


def test_select_rank():
    lam = np.array([10.0, 5.0, 1.0, 0.5, 0.1])
    assert select_rank(lam, 0.6) == 3  # tail after 3: 0.6
    assert select_rank(lam, 0.59) == 4
    assert select_rank(lam, 100.0) == 1
    assert select_rank(lam, 0.0) == 5


def test_arguments_are_checked():
    x = smooth_field((5, 6, 7))
    with pytest.raises(ValueError, match="exactly one"):
        st_hosvd(x, backend="cpu")
    with pytest.raises(ValueError, match="ranks"):
        st_hosvd(x, ranks=(2, 2), backend="cpu")
    with pytest.raises(ValueError, match="tol"):
        st_hosvd(x, tol=2.0, backend="cpu")


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("reach", [0, 20, 300])
def test_the_recovered_core_is_the_exact_power_of_two_scaling(dtype, reach):
    """``core ×_n diag(2^{−e_n})`` equals one ldexp of the summed exponents, bit for bit,
    for values over many decades (float64 subnormals too, where the products stop)."""
    rng = np.random.default_rng(reach)
    shape = (7, 6, 5, 4)
    decades = -300 if dtype == np.float64 else -5
    core = (rng.standard_normal(shape) * 10.0 ** rng.uniform(decades, 4, shape)).astype(dtype)
    exponents = [rng.integers(-reach, reach + 1, n) for n in shape]
    total = sum(-e.reshape([n if m == k else 1 for m in range(4)]) for k, (e, n) in enumerate(zip(exponents, shape)))
    np.testing.assert_array_equal(recover_core(core, exponents), np.ldexp(core.astype(np.float64), total))


def _cupy():
    try:
        import cupy
    except ImportError:
        return None
    return cupy


@pytest.mark.skipif(_cupy() is None or not cuda_available(),
                    reason="device mode products take CuPy arrays: a CUDA GPU with CuPy only")
@pytest.mark.parametrize("transposed", [False, True])
def test_device_mode_products_equal_numpy(transposed):
    """On the device each float64 mode product is one strided-batched cuBLAS GEMM: the same
    numbers as numpy's (to the summation order), the last mode (one GEMM) and factors given
    as transposed views (ST-HOSVD's ``Uᵀ``) included."""
    from gpu.compress.hosvd import _mode_product_t

    cp = _cupy()
    rng = np.random.default_rng(5)
    g = rng.standard_normal((5, 4, 3, 6))
    factors = [rng.standard_normal((n + 3, r)) for n, r in enumerate(g.shape)]
    if transposed:
        y, expected = cp.asarray(g), g
        for n, u in enumerate(factors):
            # Y ×_n Wᵀ with W = uᵀ stored C-ordered: the product takes W's transposed view
            y = _mode_product_t(cp, y, cp.asarray(np.ascontiguousarray(u.T)), n)
            expected = np.moveaxis(np.tensordot(u, expected, axes=([1], [n])), 0, n)
    else:
        y = mode_products(cp.asarray(g), [cp.asarray(u) for u in factors])
        expected = mode_products(g, factors)
    assert isinstance(y, cp.ndarray) and y.flags.c_contiguous
    np.testing.assert_allclose(cp.asnumpy(y), expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())
