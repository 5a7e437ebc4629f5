"""A two-tissue fit (WM and CSF, ``--response WM CSF``), as ``dwi2fod msmt_csd`` fits single-shell
data with two responses: the same FODs, through the CLI and a batch (the API: tests/service/test_cli_fod.py)."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from service.cli import main
from tests.worker.jobs.fod_phantom import SHAPE, write_phantom
from worker.io.images import load_image_data, read_image_header

pytestmark = pytest.mark.requires_mrtrix


def image(path):
    return load_image_data(read_image_header(path, "image"))


def relative_l2(ours, theirs):
    ours, theirs = ours.reshape(-1, ours.shape[-1]), theirs.reshape(-1, theirs.shape[-1])
    return np.linalg.norm(ours - theirs, axis=1) / np.linalg.norm(theirs, axis=1)


@pytest.fixture(scope="module")
def single_shell(tmp_path_factory):
    """b = 0 ×4 and 2000 ×60, with the exact WM and CSF responses of those shells."""
    return write_phantom(tmp_path_factory.mktemp("single"), shells=((2000, 60),))["paths"]


def test_wm_and_csf_fit_is_dwi2fod_s(single_shell, tmp_path):
    p = single_shell
    responses = [str(p["wm"]), str(p["csf"])]
    assert main(["fod", str(p["dwi"]), str(tmp_path / "ours"), "--bval", str(p["bval"]), "--bvec", str(p["bvec"]),
                 "--mask", str(p["mask"]), "--response", *responses, "--backend", "cpu", "--quiet"]) == 0
    subprocess.run(["dwi2fod", "msmt_csd", "-quiet", "-nthreads", "1", "-fslgrad", str(p["bvec"]), str(p["bval"]),
                    "-mask", str(p["mask"]), str(p["dwi"]), responses[0], str(tmp_path / "theirs_wm.nii"),
                    responses[1], str(tmp_path / "theirs_csf.nii")], check=True)
    assert sorted(path.name for path in tmp_path.glob("ours_*")) == ["ours_csf.nii", "ours_fod.json",
                                                                      "ours_wmfod.nii"]
    wm = image(tmp_path / "ours_wmfod.nii")
    assert wm.shape == (*SHAPE, 45)
    assert np.mean(relative_l2(wm, image(tmp_path / "theirs_wm.nii")) <= 1e-3) >= 0.999
    csf, their_csf = image(tmp_path / "ours_csf.nii").ravel(), image(tmp_path / "theirs_csf.nii").ravel()
    assert np.all(np.abs(csf - their_csf) <= 1e-3 * np.maximum(np.abs(their_csf), np.abs(their_csf).max() * 1e-3))
    sidecar = json.loads((tmp_path / "ours_fod.json").read_text())
    assert sidecar["lmax"] == {"wmfod": 8, "csf": 0}
    assert sidecar["input"]["responses"] == {"wm": "wm.txt", "csf": "csf.txt"}
    assert sidecar["warnings"] == []


def test_a_three_tissue_fit_of_single_shell_data_is_told_of_the_two_tissue_one(single_shell):
    from worker.jobs.fod.plan import plan_fod
    from worker.params.fod import FodParams

    p = single_shell
    gradients = {"bval": p["bval"], "bvec": p["bvec"]}
    three = {tissue: p[tissue] for tissue in ("wm", "gm", "csf")}
    for responses in (three, None):
        (warning,) = plan_fod(p["dwi"], FodParams(), responses=responses, **gradients).warnings
        assert "GM and CSF trade off" in warning and "WM CSF" in warning
    assert plan_fod(p["dwi"], FodParams(), responses={"wm": p["wm"]}, **gradients).warnings == ()


def test_normalised_two_tissue_fit_names_its_factors(single_shell, tmp_path):
    p = single_shell
    assert main(["fod", str(p["dwi"]), str(tmp_path / "ours"), "--bval", str(p["bval"]), "--bvec", str(p["bvec"]),
                 "--mask", str(p["mask"]), "--response", str(p["wm"]), str(p["csf"]), "--backend", "cpu",
                 "--mtnormalise", "--quiet"]) == 0
    sidecar = json.loads((tmp_path / "ours_fod.json").read_text())
    assert list(sidecar["mtnormalise"]["balance_factors"]) == ["wm", "csf"]


def test_a_batch_takes_wm_and_csf_for_every_dwi(single_shell, tmp_path):
    p = single_shell
    assert main(["batch", "fod", str(p["dwi"]), "--out-dir", str(tmp_path / "out"), "--response", str(p["wm"]),
                 str(p["csf"]), "--backend", "cpu", "--processes", "1", "--quiet"]) == 0
    assert main(["fod", str(p["dwi"]), str(tmp_path / "one"), "--bval", str(p["bval"]), "--bvec", str(p["bvec"]),
                 "--mask", str(p["mask"]), "--response", str(p["wm"]), str(p["csf"]), "--backend", "cpu",
                 "--quiet"]) == 0
    for name in ("wmfod", "csf"):
        np.testing.assert_array_equal(image(tmp_path / "out" / f"dwi_{name}.nii"), image(tmp_path / f"one_{name}.nii"))
    assert not list((tmp_path / "out").glob("dwi_gm*"))


def test_more_than_three_responses_are_refused(single_shell, tmp_path, capsys):
    p = single_shell
    assert main(["fod", str(p["dwi"]), str(tmp_path / "ours"), "--bval", str(p["bval"]), "--bvec", str(p["bvec"]),
                 "--response", *(str(p[f]) for f in ("wm", "gm", "csf", "wm")), "--quiet"]) == 2
    assert "give WM [GM CSF], or WM CSF" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
