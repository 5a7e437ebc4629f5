"""The FMLS tables against independent references: the SH matrix against DIPY's tournier07
basis (scipy's Legendre functions), the integration weights against exact SH integrals, the
adjacency against the geometry of the direction set; the stored adjacency and weights
against the convex hull and the least-squares solve that made them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpu.fixels.fmls_tables import (MAX_NEIGHBOURS, direction_neighbours, fmls_tables, integration_weights,
                                    sampling_directions)
from gpu.fixels.segment import segment_fods
from gpu.sh_basis import mrtrix_sh_matrix, real_sh_matrix


@pytest.mark.parametrize("lmax", [2, 8, 12])
def test_sh_matrix_is_mrtrix_basis(lmax):
    unit = sampling_directions()
    from dipy.reconst.shm import real_sh_tournier

    azimuth, elevation = np.arctan2(unit[:, 1], unit[:, 0]), np.arccos(unit[:, 2])
    ours = mrtrix_sh_matrix(lmax, azimuth, elevation)
    np.testing.assert_allclose(ours, real_sh_tournier(lmax, elevation, azimuth, legacy=False)[0], atol=1e-12)
    np.testing.assert_allclose(fmls_tables(lmax).sh_to_amp, ours, atol=0)


def test_weights_integrate_even_sh():
    unit = sampling_directions()
    weights = integration_weights()
    rng = np.random.default_rng(0)
    coeffs = rng.normal(size=45)
    # ∫ Σ c_lm Y_lm dΩ = c_00 √(4π): only Y_00 has a non-zero integral (to the least-squares
    # residual of the weights, which fit 1326 conditions with 1281 unknowns)
    assert weights @ (real_sh_matrix(8, unit, "mrtrix") @ coeffs) == pytest.approx(coeffs[0] * math.sqrt(4 * math.pi),
                                                                                 rel=1e-6)
    assert weights.sum() == pytest.approx(4 * math.pi, rel=1e-6)


def test_neighbours_are_the_hull_edges():
    unit = sampling_directions()
    table = direction_neighbours()
    pairs = {(a, b) for a, row in enumerate(table) for b in row if b >= 0}
    assert all((b, a) in pairs for a, b in pairs)
    # the hull of 2562 points has 3·2562 − 6 edges, each pair of antipodal edges one pair here
    assert len(pairs) == 3 * 2562 - 6
    assert set(np.count_nonzero(table >= 0, axis=1)) == {5, 6}
    # neighbours are the nearest directions (sign-blind), about 4° apart on this set
    cos = np.abs(np.einsum("ij,ikj->ik", unit, unit[np.maximum(table, 0)]))[table >= 0]
    assert np.degrees(np.arccos(cos.min())) < 6.0


def test_stored_neighbours_are_the_convex_hull_computed_again():
    from scipy.spatial import ConvexHull

    unit = sampling_directions()
    n = len(unit)
    hull = ConvexHull(np.concatenate([unit, -unit]))
    pairs = set()
    for a, b, c in hull.simplices % n:
        pairs.update({(a, b), (b, a), (b, c), (c, b), (a, c), (c, a)})
    table = np.full((n, MAX_NEIGHBOURS), -1, np.int32)
    fill = np.zeros(n, np.int64)
    for a, b in sorted(pairs):
        table[a, fill[a]] = b
        fill[a] += 1
    np.testing.assert_array_equal(direction_neighbours(), table)


def test_stored_weights_are_the_least_squares_solve_computed_again():
    from scipy.linalg import lstsq

    unit = sampling_directions()
    basis = mrtrix_sh_matrix(50, np.arctan2(unit[:, 1], unit[:, 0]), np.arccos(np.clip(unit[:, 2], -1.0, 1.0)))
    target = np.zeros(basis.shape[1])
    target[0] = 2.0 * math.sqrt(math.pi)
    weights = lstsq(basis.T, target, lapack_driver="gelsy")[0]
    # another LAPACK build, or another CPU's kernels, rounds the solve otherwise: by up to
    # about the condition number (5e4 here) times the unit roundoff, relative
    rtol = 10 * np.linalg.cond(basis.T) * np.finfo(np.float64).eps
    np.testing.assert_allclose(integration_weights(), weights, rtol=rtol, atol=1e-15)


def test_wrong_coefficient_count_is_refused():
    assert [fmls_tables(lmax).sh_to_amp.shape[1] for lmax in (2, 4, 6, 8, 10, 12)] == [6, 15, 28, 45, 66, 91]
    with pytest.raises(ValueError, match="46 SH coefficients are not an even-order SH series"):
        segment_fods(np.zeros((1, 1, 1, 46)), backend="cpu")
