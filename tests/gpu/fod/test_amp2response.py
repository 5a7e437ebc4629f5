"""amp2response, shells and the tensor fit against MRtrix3 on DIPY's small_64D."""

from __future__ import annotations

import numpy as np
import pytest

from gpu.fod.amp2response import amp2response, zsh_amplitudes, zsh_elevation_derivatives
from gpu.fod.response_tensor import tensor_fa_and_direction
from gpu.fod.shells import dw_shells
from tests.gpu.fod.blas_threads import outputs_by_blas_threads
from tests.gpu.fod.response_phantom import three_tissue_phantom
from worker.io.response_files import read_response


@pytest.mark.parametrize("suffix, options", [("", {}), ("_ols", {"constrained": False}), ("_iso", {"isotropic": True})])
def test_amp2response_matches_mrtrix(small_64d_case, suffix, options):
    case = small_64d_case
    voxels = case.image("sf.mif").astype(bool)
    directions = case.image("vec.mif")
    ours, bvalues = amp2response(case.dwi[voxels], directions[voxels], case.scheme, **options)
    theirs, their_shells = read_response(case.path(f"rf{suffix}.txt"))
    assert voxels.sum() == 300
    np.testing.assert_array_equal(np.trunc(bvalues), their_shells)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6 * np.abs(theirs).max())
    if not options:  # the constraints bind here: the unconstrained fit differs
        assert np.abs(ours - read_response(case.path("rf_ols.txt"))[0]).max() > 1e-3


def test_isotropic_fit_needs_no_directions(small_64d_case):
    """The isotropic response is each shell's mean signal × √(4π), whatever the directions."""
    case = small_64d_case
    voxels = case.image("sf.mif").astype(bool)
    ours, _ = amp2response(case.dwi[voxels], np.zeros((300, 3)), case.scheme, isotropic=True)
    np.testing.assert_allclose(ours, read_response(case.path("rf_iso.txt"))[0], rtol=1e-6)
    with pytest.raises(ValueError, match="non-zero fibre direction"):
        amp2response(case.dwi[voxels], np.zeros((300, 3)), case.scheme)


@pytest.mark.parametrize("lmax", [0, 2, 8, 10, 16])
def test_zonal_harmonics_equal_scipys_legendre_functions(lmax):
    """sqrt((2l+1)/4π) P_l(cos θ) and its θ-derivative sqrt((2l+1)/4π) P_l^1(cos θ), P_l^1 scipy's
    (Condon-Shortley phase included), at random angles, the poles and the equator."""
    from scipy.special import eval_legendre, lpmv

    theta = np.concatenate([[0.0, np.pi / 2, np.pi], np.random.default_rng(9).uniform(0, np.pi, 200)])
    ls = np.arange(0, lmax + 1, 2)
    norm = np.sqrt((2 * ls + 1) / (4 * np.pi))
    np.testing.assert_allclose(zsh_amplitudes(np.cos(theta), lmax), norm * eval_legendre(ls, np.cos(theta)[:, None]),
                               rtol=1e-12, atol=1e-12)
    ours = zsh_elevation_derivatives(theta, lmax)
    assert ours.shape == (theta.size, ls.size)
    np.testing.assert_allclose(ours, norm * lpmv(1, ls, np.cos(theta)[:, None]), rtol=1e-12, atol=1e-12)
    # the phase: P_2^1(cos θ) = −3 cos θ sin θ, so the l = 2 column is negative on (0, π/2)
    if lmax >= 2:
        assert ours[3:][theta[3:] < np.pi / 2, 1].max() < 0


def test_tensor_fa_and_direction_match_mrtrix(small_64d_case):
    case = small_64d_case
    fa, direction = tensor_fa_and_direction(case.dwi.reshape(-1, case.dwi.shape[3]), case.scheme)
    np.testing.assert_allclose(fa, case.image("fa.mif").ravel(), atol=1e-6)
    theirs = case.image("vec.mif").reshape(-1, 3)
    np.testing.assert_allclose(np.abs(np.sum(direction * theirs, axis=1)), 1.0, atol=1e-6)


def test_tensor_fit_is_the_same_bytes_whatever_blas_threads():
    """The CLI runs numpy's BLAS on one thread and a service worker on every core: the fit's
    products must not round differently (the FA thresholds pick the response voxels)."""
    code = ("import hashlib, numpy as np; from gpu.fod.phantom import dwi_phantom, shell_scheme; "
            "from gpu.fod.response_tensor import tensor_fa_and_direction; "
            "bvals, bvecs = shell_scheme(2, ((1000, 20), (2000, 20))); "
            "dwi = dwi_phantom((12, 12, 60), bvals, bvecs, seed=3)['dwi'].reshape(-1, 42); "
            "fa, v = tensor_fa_and_direction(dwi, np.column_stack([bvecs, bvals])); "
            "print(hashlib.sha256(fa.tobytes() + v.tobytes()).hexdigest())")
    assert len(outputs_by_blas_threads(code)) == 1


def test_tensor_fit_of_a_degenerate_voxel_is_zero_fa():
    """A voxel whose weighted normal matrix is singular (every volume zero) gets FA 0, not an
    error or NaN: its neighbours' fits stand."""
    bvals, bvecs = (np.r_[0, np.full(12, 1000.0)], np.r_[[[0, 0, 0]], np.eye(3).repeat(4, axis=0)])
    signal = np.ones((3, 13))
    signal[1] = 0
    fa, direction = tensor_fa_and_direction(signal, np.column_stack([bvecs, bvals]))
    assert fa[1] == 0 and np.isfinite(direction).all()


def test_shells_match_mrinfo(small_64d_case):
    # mrinfo -shell_bvalues / -shell_sizes: "0 994.193" / "1 64"; the phantom's "0 1000 2000 3000" / "3 30 30 30"
    shells = dw_shells(small_64d_case.scheme[:, 3])
    assert [round(s.mean_b, 3) for s in shells] == [0.0, 994.193]
    assert [s.volumes.size for s in shells] == [1, 64]
    np.testing.assert_array_equal(shells[1].volumes, np.arange(1, 65))
    phantom = dw_shells(three_tissue_phantom(n=2)[1][:, 3])
    assert [(s.mean_b, s.volumes.size) for s in phantom] == [(0, 3), (1000, 30), (2000, 30), (3000, 30)]


def test_unshelled_scheme_is_refused():
    # small_101D's many b-values: mrinfo -shell_bvalues refuses it too
    from dipy.data import get_fnames
    bvals = np.loadtxt(get_fnames(name="small_101D")[1])
    with pytest.raises(ValueError, match="could not be grouped into shells"):
        dw_shells(bvals)
