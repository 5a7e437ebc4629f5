"""The single-fibre WM step's lmax-2 peak: the largest amplitude of the FOD on the sphere."""

from __future__ import annotations

import subprocess

import nibabel as nib
import numpy as np

from gpu.fod.response_sfwm import lmax2_peak
from gpu.sh_basis import real_sh_matrix
from tests.conftest import require_system_package


def _coefficients(amplitude, directions: np.ndarray) -> np.ndarray:
    """lmax-2 coefficients of ``amplitude(directions)`` (a function in their span), by least squares."""
    return np.linalg.lstsq(real_sh_matrix(2, directions), amplitude(directions), rcond=None)[0]


def test_known_quadratic_forms_peak_where_they_should():
    """α + β (u·v)² with β > 0 peaks at α + β along v; α + Σ βᵢ (u·vᵢ)² at α + max βᵢ."""
    rng = np.random.default_rng(0)
    samples = rng.standard_normal((200, 3))
    samples /= np.linalg.norm(samples, axis=1, keepdims=True)
    rows, expected = [], []
    for _ in range(50):
        frame, _ = np.linalg.qr(rng.standard_normal((3, 3)))
        alpha, betas = rng.uniform(-1, 1), rng.uniform(0.1, 3, 3)
        rows.append(_coefficients(lambda u: alpha + ((u @ frame) ** 2) @ betas, samples))
        expected.append(alpha + betas.max())
    np.testing.assert_allclose(lmax2_peak(np.array(rows)), np.array(expected), rtol=1e-6)


def test_no_sampled_amplitude_exceeds_the_peak():
    rng = np.random.default_rng(1)
    sh = rng.standard_normal((300, 6))
    sh[:, 0] += rng.uniform(0, 4, 300)
    directions = rng.standard_normal((100_000, 3))
    sampled = np.maximum((real_sh_matrix(2, directions) @ sh.T).max(axis=0), 0)
    ours = lmax2_peak(sh).astype(np.float64)
    scale = np.abs(sh).max(axis=1)
    assert np.all(ours >= sampled - 1e-6 * scale)
    assert np.all(ours <= sampled + 1e-3 * scale)  # within the samples' spacing


def test_isotropic_negative_and_non_finite_fods():
    sh = np.zeros((4, 6))
    sh[0, 0] = 2.0  # isotropic: the amplitude everywhere, 2 Y00
    sh[1, 0] = -1.0  # negative everywhere: no peak
    sh[2] = [-3.0, 0, 0, 0.5, 0, 0]  # negative everywhere though anisotropic
    sh[3, 2] = np.nan
    np.testing.assert_allclose(lmax2_peak(sh), [2.0 / np.sqrt(4 * np.pi), 0, 0, 0], rtol=1e-6)


def test_equals_sh2peaks_largest_peak(tmp_path):
    """``dwi2response dhollander`` ranks by ``sh2peaks -num 1``'s amplitude: ours to float32
    rounding, among them FODs whose lobes FMLS (``fod2fixel``) leaves out."""
    require_system_package("requires_mrtrix")
    rng = np.random.default_rng(1)
    sh = rng.standard_normal((500, 6))
    sh[:, 0] = np.abs(sh[:, 0]) + rng.uniform(0, 4, 500)
    sh = sh.astype(np.float32)
    nib.save(nib.Nifti1Image(sh.reshape(500, 1, 1, 6), np.eye(4)), tmp_path / "fod.nii")
    subprocess.run(["sh2peaks", "-quiet", "-num", "1", str(tmp_path / "fod.nii"), str(tmp_path / "peaks.nii")],
                   check=True, capture_output=True)
    theirs = np.linalg.norm(np.asarray(nib.load(tmp_path / "peaks.nii").dataobj, np.float64).reshape(500, 3), axis=1)
    np.testing.assert_allclose(lmax2_peak(sh), theirs, rtol=2e-6)
