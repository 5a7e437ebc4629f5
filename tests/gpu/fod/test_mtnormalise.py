"""Multi-tissue intensity normalisation against MRtrix3's ``mtnormalise`` on a biased
multi-tissue fit: the same field (``-check_norm``), balance factors (``-check_factors``) and
kept voxels (``-check_mask``), for every polynomial order and with fewer compartments."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from gpu.fod.mtnormalise import mtnormalise
from tests.worker.jobs.fod_phantom import write_biased_compartments
from worker.io.images import load_image_data, read_image_header

pytestmark = pytest.mark.requires_mrtrix


@pytest.fixture(scope="module")
def fit(tmp_path_factory):
    return write_biased_compartments(tmp_path_factory.mktemp("fit"))


def _image(path):
    return load_image_data(read_image_header(path, "image"))


@pytest.mark.parametrize("order, tissues", [(3, ("wmfod", "gm", "csf")), (2, ("wmfod", "gm", "csf")),
                                            (1, ("wmfod", "csf")), (0, ("wmfod", "gm", "csf")), (3, ("wmfod",))])
def test_field_factors_and_kept_voxels_are_mtnormalise_s(fit, tmp_path, order, tissues):
    pairs = [str(item) for role in tissues for item in (fit[role], tmp_path / f"out_{role}.nii")]
    subprocess.run(["mtnormalise", "-quiet", "-nthreads", "1", *pairs, "-mask", str(fit["mask"]), "-order", str(order),
                    "-check_norm", str(tmp_path / "norm.nii"), "-check_factors", str(tmp_path / "factors.txt"),
                    "-check_mask", str(tmp_path / "kept.nii")], check=True, capture_output=True)
    info = read_image_header(fit["wmfod"], "wmfod")
    compartments = [_image(fit[role]).reshape(info.shape[:3] + (-1,))[..., 0] for role in tissues]
    ours = mtnormalise(compartments, _image(fit["mask"]) > 0, info.affine, order=order)
    np.testing.assert_allclose(ours.field, _image(tmp_path / "norm.nii"), rtol=1e-6)
    np.testing.assert_allclose(ours.balance, np.atleast_1d(np.loadtxt(tmp_path / "factors.txt")), rtol=1e-5)
    np.testing.assert_array_equal(ours.kept, _image(tmp_path / "kept.nii") > 0)
    normalised = _image(fit["wmfod"]) / ours.field[..., None]
    np.testing.assert_allclose(normalised, _image(tmp_path / "out_wmfod.nii"), rtol=1e-5, atol=1e-7)


def test_the_field_removes_the_bias():
    """A known smooth bias on a constant sum is what the field finds: the normalised sum is the
    reference everywhere in the mask."""
    shape = (14, 12, 10)
    x, y, z = np.indices(shape)
    bias = np.exp(0.1 * (x - 7) / 7 - 0.05 * ((y - 6) / 6) ** 2 + 0.02 * ((z - 5) / 5) ** 3)
    rng = np.random.default_rng(0)
    share = rng.uniform(0.2, 0.8, shape)
    wm, csf = 0.28209479177 * bias * share, 0.28209479177 * bias * (1 - share)
    ours = mtnormalise([wm, csf], np.ones(shape, bool), np.diag([2.0, 2.0, 2.0, 1.0]))
    np.testing.assert_allclose((wm + csf) / ours.field, 0.28209479177, rtol=1e-4)
    np.testing.assert_allclose(ours.balance, 1.0, rtol=1e-4)


@pytest.mark.parametrize("case", ["normal", "ties", "nan", "infinite", "strided", "tiny"])
def test_quartiles_are_the_sorted_values(case):
    """The bracketed selection gives the values a sort gives (NaN first), also where the strided
    sample misses the values it brackets and every value is partitioned."""
    from gpu.fod.mtnormalise import _order_statistics

    rng = np.random.default_rng(len(case))
    values = rng.normal(size=50_000)
    if case == "ties":
        values = np.round(values, 1)
    elif case == "nan":
        values[rng.random(values.size) < 0.3] = np.nan
    elif case == "infinite":
        values[rng.random(values.size) < 0.2] = np.inf
    elif case == "strided":
        # every 12th value (the sample's stride at this size) is the one a sample sees
        values = np.where(np.arange(values.size) % 12 == 0, 0.0, np.arange(values.size) % 7 + 1.0)
    elif case == "tiny":
        values = values[:3]
    ranks = (int(np.round(values.size * 0.25)), int(np.round(values.size * 0.75)))
    ordered = np.concatenate([values[np.isnan(values)], np.sort(values[~np.isnan(values)])])
    np.testing.assert_array_equal(_order_statistics(values, ranks), ordered[list(ranks)])
