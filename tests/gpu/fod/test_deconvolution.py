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
