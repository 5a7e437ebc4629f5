"""tournier responses against ``dwi2response tournier`` (MRtrix3 3.0.3, outputs kept in data/:
each file's first line is the command) on DIPY's small_64D and on a multi-shell phantom."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpu.fod.response_tournier import tournier_response
from tests.gpu.fod.response_phantom import three_tissue_phantom
from worker.io.response_files import read_response
from worker.jobs.fod.response import fixel_lobe_peaks

DATA = Path(__file__).parent / "data"


def _reference(name: str, shape: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    response, bvalues = read_response(DATA / f"tournier_{name}_wm.txt")
    voxels = np.zeros(shape, bool)
    voxels[tuple(np.loadtxt(DATA / f"tournier_{name}_voxels.txt", dtype=int).T)] = True
    return response, bvalues, voxels


def _assert_matches(ours, name: str) -> None:
    theirs, bvalues, their_voxels = _reference(name, ours.voxels.shape)
    assert ours.converged
    np.testing.assert_allclose(ours.bvalue, bvalues[0], atol=1.0)
    assert ours.wm.shape == theirs.shape == (1, 6)
    np.testing.assert_allclose(ours.wm[0, 0], theirs[0, 0], rtol=0.05)
    np.testing.assert_allclose(ours.wm, theirs, rtol=0, atol=1e-6 * theirs[0, 0])
    overlap = np.sum(ours.voxels & their_voxels) / their_voxels.sum()
    assert ours.voxels.sum() == their_voxels.sum() == 20
    assert overlap == 1.0


def test_small_64d_matches_dwi2response(small_64d_case):
    """Single shell b≈1000, 64 directions: the same 20 voxels, the same response."""
    mask = np.zeros(small_64d_case.mask.shape, bool)
    mask[2:8, 2:8, 2:8] = True
    ours = tournier_response(small_64d_case.dwi, small_64d_case.scheme, mask, fixel_lobe_peaks, number=20,
                             iter_voxels=60)
    _assert_matches(ours, "small_64D")


def test_phantom_matches_dwi2response():
    """Three shells: the highest (b=3000) alone, as dwi2response tournier extracts it."""
    signal, scheme = three_tissue_phantom(n=10)
    ours = tournier_response(signal, scheme, np.ones(signal.shape[:3], bool), fixel_lobe_peaks, number=20,
                             iter_voxels=100)
    _assert_matches(ours, "phantom")


@pytest.mark.parametrize("options, message", [({"max_iters": 1}, "at least 2"),
                                              ({"number": 20, "iter_voxels": 10}, "iter_voxels")])
def test_bad_options_are_refused(options, message):
    signal, scheme = three_tissue_phantom(n=4)
    with pytest.raises(ValueError, match=message):
        tournier_response(signal, scheme, np.ones(signal.shape[:3], bool), fixel_lobe_peaks, **options)


def test_signal_without_fod_lobes_is_refused():
    """An all-zero DWI deconvolves to FODs without a positive lobe."""
    signal, scheme = three_tissue_phantom(n=4)
    with pytest.raises(ValueError, match="no voxel under test has a positive FOD lobe"):
        tournier_response(np.zeros_like(signal), scheme, np.ones(signal.shape[:3], bool), fixel_lobe_peaks)
