"""fodf_metrics vs a float64 reference written voxel by voxel from the documented formulas
(scilpy's scil_fodf_metrics conventions), and afd_total vs a quadrature of the fODF over the
sphere with DIPY's own basis functions, on phantom peaks found by the CPU backend."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from dipy.core.sphere import Sphere
from dipy.reconst.shm import sh_to_sf_matrix

from gpu.peaks.fodf_metrics import directional_colour, fodf_metrics, largest_afd_max
from gpu.peaks.phantom import fod_phantom
from gpu.peaks.search import PeaksOptions, sshopm_peaks

SHAPE = (5, 4, 3)


@functools.cache
def peaks_of_phantom(basis: str):
    """A phantom with a masked-out voxel, a zero voxel (no peak), a non-finite voxel, and a
    peak threshold that leaves some voxels with fewer peaks than fibers."""
    sh = fod_phantom(SHAPE, 8, basis=basis, seed=5)["sh"]
    sh[0, 0, 0] = 0.0
    sh[1, 0, 0, 3] = np.nan
    mask = np.ones(SHAPE, bool)
    mask[4, 3, 2] = False
    result = sshopm_peaks(sh, basis=basis, mask=mask, options=PeaksOptions(npeaks=3, relative_threshold=0.5),
                          backend="cpu")
    return sh, result


def reference_metrics(sh, directions, amplitudes, count):
    """The formulas of gpu.peaks.fodf_metrics, one voxel at a time in float64."""
    spatial, k = count.shape, amplitudes.shape[-1]
    afd_max, afd_sum, afd_total = np.zeros(spatial), np.zeros(spatial), np.zeros(spatial)
    fraction, rgb = np.zeros((*spatial, k)), np.zeros((*spatial, 3), np.uint8)
    for v in np.ndindex(spatial):
        afd_total[v] = math.sqrt(4.0 * math.pi) * float(sh[v][0])
        n = int(count[v])
        if n == 0:
            continue
        a = amplitudes[v][:n].astype(np.float64)
        afd_max[v] = a[0]
        afd_sum[v] = a.sum()
        fraction[v][:n] = a / a.sum()
    largest = afd_max.max()
    for v in np.ndindex(spatial):
        if count[v] > 0:
            rgb[v] = np.floor(255.0 * np.abs(directions[v][0].astype(np.float64)) * afd_max[v] / largest)
    return afd_max, afd_total, afd_sum, fraction, rgb


@pytest.mark.parametrize("basis", ["mrtrix", "dipy"])
def test_metrics_equal_float64_reference(basis):
    sh, result = peaks_of_phantom(basis)
    got = fodf_metrics(sh, result.directions, result.amplitudes, result.count)
    afd_max, afd_total, afd_sum, fraction, rgb = reference_metrics(sh, result.directions, result.amplitudes,
                                                                   result.count)
    # The phantom has voxels with 1, 2 and 3 reported peaks, and voxels with none.
    assert set(np.unique(result.count)) == {0, 1, 2, 3}
    np.testing.assert_allclose(got.afd_max, afd_max, rtol=1e-5, atol=0)
    np.testing.assert_allclose(got.afd_sum, afd_sum, rtol=1e-5, atol=0)
    np.testing.assert_allclose(got.peak_fraction, fraction, rtol=1e-5, atol=0)
    np.testing.assert_allclose(got.afd_total, afd_total, rtol=1e-5, atol=0)
    # float32 vs float64 may cross an integer at truncation.
    assert np.abs(got.rgb.astype(int) - rgb.astype(int)).max() <= 1
    # The strongest voxel's colour is a unit vector × 255.
    strongest = np.unravel_index(np.argmax(got.afd_max), SHAPE)
    assert np.linalg.norm(got.rgb[strongest].astype(float)) == pytest.approx(255.0, abs=2.0)
    np.testing.assert_array_equal(got.nufo, result.count)
    assert {m.dtype for m in (got.afd_max, got.afd_total, got.afd_sum, got.peak_fraction)} == {np.dtype(np.float32)}
    assert got.rgb.dtype == np.uint8 and got.nufo.dtype == np.uint8


def test_voxels_without_peaks_are_zero_as_scilpy_writes_them():
    sh, result = peaks_of_phantom("mrtrix")
    got = fodf_metrics(sh, result.directions, result.amplitudes, result.count)
    for voxel in [(0, 0, 0), (1, 0, 0), (4, 3, 2)]:  # zero, non-finite, masked out
        assert result.count[voxel] == 0
        assert got.afd_max[voxel] == 0 and got.afd_sum[voxel] == 0 and got.nufo[voxel] == 0
        assert not got.peak_fraction[voxel].any() and not got.rgb[voxel].any()
    # afd_total is the l = 0 term wherever it is given, mask or not (scilpy writes it unmasked).
    assert got.afd_total[0, 0, 0] == 0
    assert got.afd_total[4, 3, 2] == pytest.approx(math.sqrt(4 * math.pi) * sh[4, 3, 2, 0], rel=1e-6)
    # Past a voxel's count, fractions are 0; over its peaks they sum to 1.
    with_peaks = result.count > 0
    np.testing.assert_allclose(got.peak_fraction.sum(-1)[with_peaks], 1.0, rtol=1e-6)
    past = np.arange(3) >= result.count[..., None]
    assert not got.peak_fraction[past].any()


@pytest.mark.filterwarnings("ignore:The legacy descoteaux07 SH basis")
@pytest.mark.parametrize("basis, dipy_basis, legacy", [("mrtrix", "tournier07", False),
                                                       ("dipy", "descoteaux07", True)])
def test_afd_total_is_the_integral_of_the_fod_over_the_sphere(basis, dipy_basis, legacy):
    sh = fod_phantom((3, 2), 8, basis=basis, seed=2)["sh"]
    # Gauss–Legendre in cos θ × uniform φ: exact for the degree-8 series.
    nodes, weights = np.polynomial.legendre.leggauss(12)
    phi = np.linspace(0.0, 2.0 * np.pi, 24, endpoint=False)
    theta = np.repeat(np.arccos(nodes), phi.size)
    sphere = Sphere(theta=theta, phi=np.tile(phi, nodes.size))
    area = np.repeat(weights, phi.size) * (2.0 * np.pi / phi.size)
    b_matrix, _ = sh_to_sf_matrix(sphere, sh_order_max=8, basis_type=dipy_basis, legacy=legacy)
    integral = (sh.astype(np.float64) @ b_matrix) @ area
    no_peaks = np.zeros((3, 2), np.uint8)
    got = fodf_metrics(sh, np.full((3, 2, 1, 3), np.nan), np.full((3, 2, 1), np.nan), no_peaks)
    np.testing.assert_allclose(got.afd_total, integral, rtol=1e-5)


def test_mismatched_shapes_say_what_is_expected():
    with pytest.raises(ValueError, match=r"expected \(\.\.\., n_coeffs\)"):
        fodf_metrics(np.zeros((2, 45)), np.zeros((3, 1, 3)), np.zeros((3, 1)), np.zeros(3, np.uint8))


def test_a_slice_coloured_alone_matches_the_volume_map():
    """The QC picture colours three slices from the raw peaks (NaN past a voxel's count) with
    the volume's largest AFD_max: the same bytes as the whole map's slices."""
    sh, result = peaks_of_phantom("mrtrix")
    got = fodf_metrics(sh, result.directions, result.amplitudes, result.count)
    largest = largest_afd_max(result.amplitudes[..., 0], result.count)
    assert largest == got.afd_max.max() > 0
    for index in range(SHAPE[1]):
        plane = np.s_[:, index]
        colour = directional_colour(result.directions[plane][..., 0, :], result.amplitudes[plane][..., 0],
                                    result.count[plane], largest)
        assert colour.dtype == np.uint8 and colour.tobytes() == got.rgb[plane].tobytes()


def float32_formulas(sh, directions, amplitudes, count) -> dict[str, np.ndarray]:
    """The maps by the module docstring's formulas in numpy, float32 in the passes' order of
    operations: peak fractions as the sum's inverse times each amplitude, rgb truncated."""
    values = np.where(np.arange(amplitudes.shape[-1]) < count[..., None], amplitudes, 0.0).astype(np.float32)
    afd_sum = values[..., 0].copy()
    for peak in range(1, values.shape[-1]):
        afd_sum += values[..., peak]
    inverse = np.divide(np.float32(1.0), afd_sum, out=np.zeros_like(afd_sum), where=afd_sum != 0)
    afd_max = values[..., 0]
    largest = np.float32(np.max(afd_max, where=count > 0, initial=0.0))
    scale = np.float32(255.0 / largest if largest > 0 else 0.0)
    channel = np.abs(directions[..., 0, :]) * (afd_max * scale)[..., None]
    channel[count == 0] = 0.0
    return {"afd_max": afd_max, "afd_total": np.float32(math.sqrt(4.0 * math.pi)) * sh[..., 0].astype(np.float32),
            "afd_sum": afd_sum, "peak_fraction": values * inverse[..., None],
            "rgb": np.clip(channel, 0.0, 255.0).astype(np.uint8), "nufo": count.astype(np.uint8)}


@pytest.mark.parametrize("basis", ["mrtrix", "dipy"])
def test_the_passes_give_the_float32_formulas_bits(basis):
    sh, result = peaks_of_phantom(basis)
    rng = np.random.default_rng(7)
    # and amplitudes past each count that must be ignored, float64 inputs, an empty volume
    amplitudes = np.where(np.isnan(result.amplitudes), rng.uniform(size=result.amplitudes.shape), result.amplitudes)
    cases = [(sh, result.directions, result.amplitudes, result.count),
             (sh.astype(np.float32), result.directions, amplitudes.astype(np.float32), result.count),
             (sh[:, :0], result.directions[:, :0], result.amplitudes[:, :0], result.count[:, :0])]
    for case in cases:
        maps, formulas = fodf_metrics(*case), float32_formulas(*case)
        for name, expected in formulas.items():
            got = getattr(maps, name)
            assert got.dtype == expected.dtype and got.shape == expected.shape, name
            assert got.tobytes() == expected.tobytes(), name
