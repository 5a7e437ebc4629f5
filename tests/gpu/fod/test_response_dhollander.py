"""dhollander responses against ``dwi2response dhollander`` on a multi-shell 3-tissue phantom."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from gpu.fod.response_dhollander import dhollander_response
from tests.gpu.fod.response_phantom import three_tissue_phantom
from worker.io.response_files import read_response
from worker.jobs.fod.response import fixel_lobe_peaks


def _dice(a: np.ndarray, b: np.ndarray) -> float:
    return 2.0 * np.sum(a & b) / (a.sum() + b.sum())


@pytest.fixture(scope="module")
def ours(phantom_case):
    return dhollander_response(phantom_case.dwi, phantom_case.scheme, phantom_case.mask, fixel_lobe_peaks)


@pytest.mark.parametrize("tissue, index", [("csf", 0), ("gm", 1)])
def test_isotropic_tissues_match_mrtrix(phantom_case, ours, tissue, index):
    """CSF and GM: the same voxels, the same responses."""
    theirs, shells = read_response(phantom_case.path(f"{tissue}.txt"))
    np.testing.assert_allclose(getattr(ours, tissue), theirs, rtol=1e-5)
    np.testing.assert_array_equal(np.trunc(ours.bvalues), shells)
    their_voxels = phantom_case.image("voxels.mif").astype(bool)[..., index]
    assert their_voxels.sum() > 0
    assert _dice(ours.voxels[..., index], their_voxels) == 1.0


def test_white_matter_matches_mrtrix(phantom_case, ours):
    """Single-fibre WM: the same voxels (ranked by a WM/CSF CSD's peak fraction), the same response."""
    theirs, _ = read_response(phantom_case.path("wm.txt"))
    assert ours.wm.shape == theirs.shape == (4, 6)
    np.testing.assert_allclose(ours.wm[:, 0], theirs[:, 0], rtol=0.05)
    np.testing.assert_allclose(ours.wm, theirs, rtol=1e-5, atol=1e-5 * np.abs(theirs).max())
    their_voxels = phantom_case.image("voxels.mif").astype(bool)[..., 2]
    assert ours.voxels[..., 2].sum() == their_voxels.sum() == 7
    assert _dice(ours.voxels[..., 2], their_voxels) == 1.0


def test_a_white_matter_only_mask_is_refused(small_64d_case):
    """small_64D is nearly all WM: ``dwi2response dhollander`` fails on its crude GM too."""
    case = small_64d_case
    with pytest.raises(ValueError, match="no crude GM voxel"):
        dhollander_response(case.dwi, case.scheme, case.mask, fixel_lobe_peaks)


def test_the_cuda_backend_picks_the_cpu_backends_voxels_and_responses():
    """Every GPU step of the estimation (tensor fit, the single-fibre WM step's MSMT-CSD and
    FMLS lobes at lmax 6), in the simulator, on a phantom small enough for it (10³ voxels, one erosion)."""
    dwi, scheme = three_tissue_phantom(10)
    mask = np.ones(dwi.shape[:3], bool)
    cpu = dhollander_response(dwi, scheme, mask, fixel_lobe_peaks, erode=1)
    cuda = dhollander_response(dwi, scheme, mask, partial(fixel_lobe_peaks, backend="cuda"), erode=1, backend="cuda")
    np.testing.assert_array_equal(cuda.voxels, cpu.voxels)
    assert cpu.voxels[..., 2].sum() >= 1
    for tissue in ("wm", "gm", "csf"):
        np.testing.assert_allclose(getattr(cuda, tissue), getattr(cpu, tissue), rtol=1e-12,
                                   atol=1e-12 * np.abs(getattr(cpu, tissue)).max())
