"""SH bases against DIPY and MRtrix3 ``sh2amp``; volume counts; basis conversion."""

from __future__ import annotations

import math
import subprocess

import nibabel as nib
import numpy as np
import pytest

from gpu.sh_basis import (
    SUPPORTED_LMAX,
    convert_sh_basis,
    legendre_sph,
    lmax_from_ncoeffs,
    mrtrix_sh_matrix,
    n_coeffs,
    real_sh_matrix,
    sh_degrees_orders,
)


def unit_vectors(count: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(count, 3))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def polar_azimuth(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.arccos(np.clip(d[:, 2], -1.0, 1.0)), np.arctan2(d[:, 1], d[:, 0])


@pytest.mark.parametrize("lmax", SUPPORTED_LMAX)
def test_mrtrix_basis_equals_dipy_tournier07_non_legacy(lmax):
    from dipy.reconst.shm import real_sh_tournier

    d = unit_vectors(500, lmax)
    polar, azimuth = polar_azimuth(d)
    dipy_matrix, m_values, l_values = real_sh_tournier(lmax, polar, azimuth, legacy=False)
    ls, ms = sh_degrees_orders(lmax)
    np.testing.assert_array_equal(l_values, ls)
    np.testing.assert_array_equal(m_values, ms)
    np.testing.assert_allclose(real_sh_matrix(lmax, d, "mrtrix"), dipy_matrix, rtol=0, atol=1e-12)


@pytest.mark.filterwarnings("ignore:The legacy descoteaux07 SH basis:PendingDeprecationWarning")
@pytest.mark.parametrize("lmax", SUPPORTED_LMAX)
def test_dipy_basis_equals_dipy_descoteaux07_legacy(lmax):
    from dipy.reconst.shm import real_sh_descoteaux

    d = unit_vectors(500, 100 + lmax)
    polar, azimuth = polar_azimuth(d)
    dipy_matrix, m_values, l_values = real_sh_descoteaux(lmax, polar, azimuth, legacy=True)
    ls, ms = sh_degrees_orders(lmax)
    np.testing.assert_array_equal(l_values, ls)
    np.testing.assert_array_equal(m_values, ms)
    np.testing.assert_allclose(real_sh_matrix(lmax, d, "dipy"), dipy_matrix, rtol=0, atol=1e-12)


@pytest.mark.parametrize("basis", ["mrtrix", "dipy"])
def test_basis_is_orthonormal_on_the_sphere(basis):
    # Quadrature on a dense Fibonacci grid: (4π/N) Bᵀ B ≈ I.
    from gpu.peaks.symmetric_tensor import sphere_points

    points = sphere_points(40000)
    b = real_sh_matrix(12, points, basis)
    gram = b.T @ b * (4.0 * np.pi / len(points))
    np.testing.assert_allclose(gram, np.eye(n_coeffs(12)), atol=2e-3)


@pytest.mark.requires_mrtrix
def test_mrtrix_basis_equals_sh2amp_on_random_coefficients(tmp_path):
    rng = np.random.default_rng(7)
    d = unit_vectors(60, 8)
    directions = tmp_path / "directions.txt"
    np.savetxt(directions, d, fmt="%.17g")
    worst = {}
    for lmax in SUPPORTED_LMAX:
        coeffs = rng.normal(size=(2, 3, 2, n_coeffs(lmax))).astype(np.float32)
        src, dst = tmp_path / f"sh{lmax}.nii", tmp_path / f"amp{lmax}.nii"
        nib.save(nib.Nifti1Image(coeffs, np.eye(4)), src)
        subprocess.run(["sh2amp", "-quiet", str(src), str(directions), str(dst)], check=True, capture_output=True)
        theirs = np.asarray(nib.load(dst).dataobj, np.float64)
        ours = coeffs.astype(np.float64) @ real_sh_matrix(lmax, d, "mrtrix").T
        assert theirs.shape == ours.shape, (lmax, theirs.shape, ours.shape)
        scale = np.abs(ours).max()
        worst[lmax] = float(np.abs(theirs - ours).max() / scale)
        np.testing.assert_allclose(theirs, ours, rtol=1e-5, atol=1e-5 * scale, err_msg=f"lmax {lmax}")
    print("sh2amp vs real_sh_matrix, max |difference| / max |amplitude| per lmax:", worst)


def test_dipy_basis_is_not_the_mrtrix_basis():
    # Guards the tests above against comparing a basis with itself.
    d = unit_vectors(50, 3)
    assert np.abs(real_sh_matrix(8, d, "mrtrix") - real_sh_matrix(8, d, "dipy")).max() > 0.1


@pytest.mark.parametrize("lmax", SUPPORTED_LMAX)
def test_lmax_from_ncoeffs_valid_counts(lmax):
    assert n_coeffs(lmax) == (6, 15, 28, 45, 66, 91)[SUPPORTED_LMAX.index(lmax)]
    assert lmax_from_ncoeffs(n_coeffs(lmax)) == lmax


@pytest.mark.parametrize("count", [0, 1, 5, 7, 44, 46, 92, 153])
def test_lmax_from_ncoeffs_names_the_valid_counts(count):
    with pytest.raises(ValueError) as info:
        lmax_from_ncoeffs(count)
    message = str(info.value)
    assert message.startswith(f"{count} SH coefficients")
    for valid, lmax in zip((6, 15, 28, 45, 66, 91), SUPPORTED_LMAX):
        assert f"{valid} (lmax {lmax})" in message


def test_unsupported_lmax_and_basis_are_errors():
    with pytest.raises(ValueError, match="lmax must be one of"):
        sh_degrees_orders(14)
    with pytest.raises(ValueError, match="basis must be one of"):
        real_sh_matrix(8, unit_vectors(3, 0), "fsl")
    with pytest.raises(ValueError, match="basis must be one of"):
        convert_sh_basis(np.zeros(45), "mrtrix", "descoteaux")


@pytest.mark.parametrize("lmax", SUPPORTED_LMAX)
def test_convert_sh_basis_round_trip_and_amplitudes(lmax):
    rng = np.random.default_rng(lmax)
    coeffs = rng.normal(size=(4, 5, n_coeffs(lmax)))
    as_dipy = convert_sh_basis(coeffs, "mrtrix", "dipy")
    np.testing.assert_array_equal(convert_sh_basis(as_dipy, "dipy", "mrtrix"), coeffs)
    np.testing.assert_array_equal(convert_sh_basis(coeffs, "mrtrix", "mrtrix"), coeffs)
    # The converted coefficients describe the same function on the sphere.
    d = unit_vectors(200, lmax)
    np.testing.assert_allclose(
        as_dipy @ real_sh_matrix(lmax, d, "dipy").T, coeffs @ real_sh_matrix(lmax, d, "mrtrix").T, rtol=0, atol=1e-12
    )
    # The m = 0 coefficients are common to both bases; the others move.
    _, m = sh_degrees_orders(lmax)
    np.testing.assert_array_equal(as_dipy[..., m == 0], coeffs[..., m == 0])
    assert not np.array_equal(as_dipy, coeffs)


def _scipy_real_sh(lmax: int, polar: np.ndarray, azimuth: np.ndarray, basis: str) -> np.ndarray:
    """The real basis of the module docstring from scipy's complex Y_l^m (float64)."""
    from scipy.special import sph_harm_y

    columns = []
    for l in range(0, lmax + 1, 2):
        for m in range(-l, l + 1):
            y = sph_harm_y(l, abs(m), polar, azimuth)
            if m == 0:
                columns.append(y.real)
            elif (m > 0) == (basis == "mrtrix"):
                columns.append(math.sqrt(2.0) * y.real)
            else:
                columns.append(math.sqrt(2.0) * y.imag)
    return np.stack(columns, axis=1)


@pytest.mark.parametrize("basis", ["mrtrix", "dipy"])
@pytest.mark.parametrize("lmax", SUPPORTED_LMAX)
def test_real_sh_matrix_equals_scipy_sph_harm_y(lmax, basis):
    d = np.vstack([unit_vectors(300, 50 + lmax), [[0, 0, 1], [0, 0, -1], [1, 0, 0]]])
    polar, azimuth = polar_azimuth(d)
    np.testing.assert_allclose(real_sh_matrix(lmax, d, basis), _scipy_real_sh(lmax, polar, azimuth, basis), rtol=0,
                               atol=1e-12)


@pytest.mark.parametrize("lmax", [*SUPPORTED_LMAX, 16])
def test_mrtrix_sh_matrix_equals_scipy_sph_harm_y(lmax):
    # beyond the supported degrees too: the FMLS integration weights take a higher degree
    d = unit_vectors(80, lmax)
    polar, azimuth = polar_azimuth(d)
    ours = mrtrix_sh_matrix(lmax, azimuth, polar)
    assert ours.shape == (80, (lmax + 1) * (lmax + 2) // 2) and ours.dtype == np.float64
    np.testing.assert_allclose(ours, _scipy_real_sh(lmax, polar, azimuth, "mrtrix"), rtol=0, atol=1e-12)


@pytest.mark.parametrize("m", [0, 1, 2, 5, 12, 16])
def test_legendre_sph_equals_scipy_lpmv(m):
    """P̄_l^m = √((2l+1)/(4π) (l−m)!/(l+m)!) P_l^m, P_l^m scipy's (Condon–Shortley phase included)."""
    from scipy.special import lpmv

    lmax = 16
    x = np.concatenate([np.linspace(-1.0, 1.0, 41), np.random.default_rng(m).uniform(-1, 1, 50)])
    ours = legendre_sph(lmax, m, x)
    for l in range(m, lmax + 1):
        norm = math.sqrt((2 * l + 1) / (4 * math.pi) * math.factorial(l - m) / math.factorial(l + m))
        np.testing.assert_allclose(ours[l], norm * lpmv(m, l, x), rtol=0, atol=1e-12, err_msg=f"l={l}")


def test_legendre_sph_at_the_poles_and_rows_below_m():
    x = np.array([-1.0, 0.3, 1.0])
    p = legendre_sph(6, 3, x)
    assert p.shape == (7, 3)
    assert not p[:3].any()
    # P̄_l^m vanishes at the poles for m > 0; P̄_3^3(x) = −√(35/(64π)) (1−x²)^{3/2}
    assert not p[:, [0, 2]].any()
    np.testing.assert_allclose(p[3, 1], -math.sqrt(35 / (64 * math.pi)) * (1 - 0.09) ** 1.5, rtol=1e-14)
    np.testing.assert_allclose(legendre_sph(4, 0, x)[2], math.sqrt(5 / (4 * math.pi)) * (3 * x * x - 1) / 2,
                               rtol=1e-14)
