"""Response estimation's tensor fit on the GPU (numba's simulator) against the CPU's passes:
the same FA and principal directions to rounding, float32 and float64 signals, and a voxel
without signal given FA 0 on both."""

from __future__ import annotations

import numpy as np
import pytest

from gpu.fod.backend_cuda import tensor_fit_cuda
from gpu.fod.phantom import dwi_phantom, shell_scheme
from gpu.fod.response_tensor import _design, _products, tensor_fa_and_direction


@pytest.fixture(scope="module")
def case():
    """Twelve voxels of a three-tissue phantom (WM with 1 to 3 fibres, GM, CSF) and one of zeros."""
    bvals, bvecs = shell_scheme(2, ((1000, 12), (2000, 15)), seed=1)
    signals = dwi_phantom((3, 4, 1), bvals, bvecs, snr=30.0, seed=5)["dwi"].reshape(-1, bvals.size)
    return np.vstack([signals, np.zeros(bvals.size, np.float32)]), np.column_stack([bvecs, bvals])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_tensor_fit_is_the_cpus(case, dtype):
    signals, scheme = case
    fa, direction = tensor_fa_and_direction(signals.astype(dtype), scheme, backend="cuda")
    fa_cpu, direction_cpu = tensor_fa_and_direction(signals.astype(dtype), scheme, backend="cpu")
    np.testing.assert_allclose(fa, fa_cpu, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.abs(np.sum(direction * direction_cpu, axis=1)), 1.0, atol=1e-12)
    assert fa[-1] == fa_cpu[-1] == 0 and np.isfinite(direction[-1]).all()
    assert (fa[:-1] > 0.02).all() and (fa[:-1] < 1).all()


def test_a_voxel_without_signal_gets_nan_parameters(case):
    signals, scheme = case
    design = _design(scheme)
    params = tensor_fit_cuda(signals, design, _products(design), 2)
    assert params.shape == (len(signals), 7)
    assert np.isnan(params[-1]).all() and np.isfinite(params[:-1]).all()
    # log S0 of each voxel near the log of its mean b=0 signal
    np.testing.assert_allclose(params[:-1, 6], np.log(signals[:-1, :2].mean(axis=1)), atol=0.2)


def test_the_layout_and_chunks_of_the_signals_change_no_byte(case, monkeypatch):
    """Rows gathered a volume at a time (F order, as a NIfTI's masked rows) go to the kernel
    uncopied; voxel-major rows and launches of a few voxels give the same parameters."""
    from gpu.fod import backend_cuda

    signals, scheme = case
    design = _design(scheme)
    whole = tensor_fit_cuda(np.ascontiguousarray(signals), design, _products(design), 2)
    np.testing.assert_array_equal(tensor_fit_cuda(np.asfortranarray(signals), design, _products(design), 2), whole)
    monkeypatch.setattr(backend_cuda, "TENSOR_CHUNK_VOXELS", 5)
    for layout in (np.ascontiguousarray, np.asfortranarray):
        np.testing.assert_array_equal(tensor_fit_cuda(layout(signals), design, _products(design), 2), whole)
