"""The public API: bad input is refused with a message saying what to fix; masks and shapes."""

from __future__ import annotations

import numpy as np
import pytest

from gpu.fod import csd, msmt_csd
from gpu.fod.phantom import dwi_phantom, shell_scheme, tissue_responses


@pytest.fixture(scope="module")
def data():
    bvals, bvecs = shell_scheme(2, ((1000, 20), (2500, 30)), seed=0)
    phantom = dwi_phantom((2, 2, 1), bvals, bvecs, snr=None, seed=0)
    return phantom["dwi"], bvals, bvecs, tissue_responses([0, 1000, 2500], lmax=8)


@pytest.mark.parametrize("change, message", [
    (lambda d, b, g, r: (d[..., :-1], b, g, r), "volumes but the gradient scheme"),
    (lambda d, b, g, r: (d, b, g[:, :2], r), "bvecs"),
    (lambda d, b, g, r: (d, b, g, [r[0][1:], r[1], r[2]]), "give one row per shell"),
    (lambda d, b, g, r: (d, b, g, []), "at least one tissue response"),
    (lambda d, b, g, r: (d, np.where(b > 0, np.inf, 0.0), g, r), "infinite or NaN b-values"),
])
def test_msmt_csd_refuses_bad_input(data, change, message):
    with pytest.raises(ValueError, match=message):
        msmt_csd(*change(*data))


def test_msmt_csd_refuses_odd_lmax_and_a_lmax_per_tissue(data):
    with pytest.raises(ValueError, match="even integer"):
        msmt_csd(*data, lmax=[7, 0, 0])
    with pytest.raises(ValueError, match="one per tissue"):
        msmt_csd(*data, lmax=[8, 0])


def test_csd_refuses_data_without_diffusion_weighting(data):
    dwi, bvals, bvecs, responses = data
    b0 = bvals == 0
    with pytest.raises(ValueError, match="no b > 0 shell"):
        csd(dwi[..., b0], bvals[b0], bvecs[b0], responses[0][-1])
    with pytest.raises(ValueError, match="one row"):
        csd(dwi, bvals, bvecs, responses[0])


def test_mask_selects_voxels_and_shapes_follow_lmax(data):
    dwi, bvals, bvecs, responses = data
    mask = np.array([[[True], [False]], [[False], [True]]])
    full = msmt_csd(dwi, bvals, bvecs, responses, lmax=[6, 0, 0])
    masked = msmt_csd(dwi, bvals, bvecs, responses, lmax=[6, 0, 0], mask=mask)
    assert [m.shape for m in masked] == [(2, 2, 1, 28), (2, 2, 1, 1), (2, 2, 1, 1)]
    for f, m in zip(full, masked):
        np.testing.assert_array_equal(m[mask], f[mask])
        assert (m[~mask] == 0).all()
    fod = csd(dwi, bvals, bvecs, responses[0][-1], lmax=4, mask=mask)
    assert fod.shape == (2, 2, 1, 15) and (fod[~mask] == 0).all() and (fod[mask] != 0).all()


def test_unknown_backend_is_refused(data):
    with pytest.raises(ValueError, match="backend must be auto, cpu or cuda"):
        msmt_csd(*data, backend="gpu")


def test_the_predicted_signal_is_the_forward_model_of_the_fit(data):
    """H x in float64 for every tissue side by side (Jeurissen et al. 2014, Eq. 3); 0 outside
    the mask; a volume-at-a-time layout is kept."""
    from gpu.fod import msmt_predicted_signal
    from gpu.fod.msmt_problem import msmt_problem

    dwi, bvals, bvecs, responses = data
    mask = np.array([[[True], [False]], [[True], [True]]])
    fods = msmt_csd(dwi, bvals, bvecs, responses, mask=mask)
    predicted = msmt_predicted_signal(fods, bvals, bvecs, responses, mask=mask)
    x = np.concatenate([f.astype(np.float64) for f in fods], axis=-1)
    expected = x @ msmt_problem(bvals, bvecs, responses).H.T
    assert predicted.dtype == np.float32 and not predicted[~mask].any()
    np.testing.assert_allclose(predicted[mask], expected[mask], rtol=1e-6, atol=1e-6 * np.abs(expected).max())
    by_volume = msmt_predicted_signal([np.asfortranarray(f) for f in fods], bvals, bvecs, responses, mask=mask)
    assert by_volume.flags.f_contiguous and by_volume.tobytes("F") == predicted.tobytes("F")
    with pytest.raises(ValueError, match="coefficients but the tissues' lmax"):
        msmt_predicted_signal([fods[0][..., :28], *fods[1:]], bvals, bvecs, responses)


def test_the_prediction_s_blocks_of_voxels_are_one_product(data):
    """Voxels in several blocks, on the pool's threads: the float64 product of every voxel."""
    from gpu.fod import msmt_predicted_signal
    from gpu.fod.deconvolution import PREDICT_BLOCK_VOXELS
    from gpu.fod.msmt_problem import msmt_problem

    _, bvals, bvecs, responses = data
    rng = np.random.default_rng(0)
    shape = (PREDICT_BLOCK_VOXELS // 16 + 3, 8, 5)  # 2.5 blocks
    fods = [rng.standard_normal((*shape, n)).astype(np.float32) for n in (45, 1, 1)]
    predicted = msmt_predicted_signal(fods, bvals, bvecs, responses)
    expected = np.concatenate(fods, axis=-1).astype(np.float64) @ msmt_problem(bvals, bvecs, responses).H.T
    np.testing.assert_allclose(predicted, expected, rtol=1e-6, atol=1e-6 * np.abs(expected).max())
