"""Fixels of the CPU backend against MRtrix3's ``fod2fixel`` on a phantom and on a CSD FOD of
real data: fixel counts, directions, AFD, peak amplitude and dispersion; and byte-identical
repeats."""

from __future__ import annotations

import numpy as np
import pytest

from gpu.fixels.segment import FmlsOptions, segment_fods
from gpu.peaks.phantom import fod_phantom
from tests.gpu.fixels.mrtrix_fixels import fixel_differences, read_fixel_directory, real_fod, run_fod2fixel
from worker.io.images import load_image_data, read_image_header, write_image

pytestmark = pytest.mark.requires_mrtrix


def assert_matches(diff: dict) -> None:
    """The agreement asked of us: counts in ≥ 99.5 % of voxels, direction p99 ≤ 0.5°, afd,
    peak_amp and disp relative difference median ≤ 1e-3 and p99 ≤ 1e-2."""
    assert diff["same_count"] >= 0.995
    assert diff["angle"].size > 0
    assert np.percentile(diff["angle"], 99) <= 0.5
    for name in ("afd", "peak_amp", "disp"):
        assert np.median(diff[name]) <= 1e-3, name
        assert np.percentile(diff[name], 99) <= 1e-2, name


@pytest.fixture(scope="module")
def phantom_fod(tmp_path_factory):
    folder = tmp_path_factory.mktemp("phantom")
    fod = fod_phantom((8, 8, 4), 8)["sh"]
    write_image(folder / "fod.mif", fod, np.eye(4))
    return folder / "fod.mif", fod


@pytest.fixture(scope="session")
def csd_fod(tmp_path_factory):
    path = real_fod(tmp_path_factory.mktemp("small_64D"))
    return path, load_image_data(read_image_header(path, "fod"))


def test_phantom_matches_fod2fixel(phantom_fod, tmp_path):
    path, fod = phantom_fod
    reference = read_fixel_directory(run_fod2fixel(path, tmp_path / "fixels"))
    diff = fixel_differences(reference, segment_fods(fod, backend="cpu"))
    assert_matches(diff)
    assert diff["same_count"] == 1.0 and diff["n_fixels"] > 256


@pytest.mark.parametrize("mrtrix_options, options", [
    ((), FmlsOptions()),
    (("-fmls_no_thresholds",), FmlsOptions(no_thresholds=True)),
    (("-fmls_integral", "0.1", "-fmls_peak_value", "0.2"), FmlsOptions(integral=0.1, peak_value=0.2)),
    (("-maxnum", "2", "-dirpeak"), FmlsOptions(maxnum=2, dirpeak=True)),
])
def test_csd_fod_matches_fod2fixel(csd_fod, tmp_path, mrtrix_options, options):
    path, fod = csd_fod
    reference = read_fixel_directory(run_fod2fixel(path, tmp_path / "fixels", *mrtrix_options))
    diff = fixel_differences(reference, segment_fods(fod, options=options, backend="cpu"))
    assert_matches(diff)
    assert diff["n_fixels"] > 1000


def test_mask_matches_fod2fixel(csd_fod, tmp_path):
    path, fod = csd_fod
    mask = np.zeros(fod.shape[:3], np.float32)
    mask[2:7, 3:9, 1:5] = 1
    # every corner in: fod2fixel also segments voxel (0, 0, 0) when the last voxel of its
    # loop is outside the mask (its queue returns the loop's reset position once more)
    mask[::mask.shape[0] - 1, ::mask.shape[1] - 1, ::mask.shape[2] - 1] = 1
    info = read_image_header(path, "fod")
    write_image(tmp_path / "mask.mif", mask, info.affine)
    reference = read_fixel_directory(run_fod2fixel(path, tmp_path / "fixels", "-mask", str(tmp_path / "mask.mif")))
    ours = segment_fods(fod, mask=mask, backend="cpu")
    diff = fixel_differences(reference, ours)
    assert_matches(diff)
    assert diff["same_count"] == 1.0
    assert ours.index[..., 0][mask == 0].max() == 0 and ours.index[..., 0][mask != 0].min() > 0


def test_two_runs_identical(phantom_fod):
    _, fod = phantom_fod
    first, second = (segment_fods(fod, backend="cpu") for _ in range(2))
    for name in ("index", "directions", "afd", "peak_amp", "disp"):
        assert getattr(first, name).tobytes() == getattr(second, name).tobytes(), name
