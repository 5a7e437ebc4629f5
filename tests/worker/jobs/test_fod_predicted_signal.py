"""``fod --predicted-signal``: the signal the fitted compartments predict is ``dwi2fod msmt_csd
-predicted_signal``'s, on the DWI's header (a ``.mif`` keeps its ``dw_scheme``), with ``--shells``
one volume per DWI volume as ``dwi2fod -shells`` writes it, the same bytes fitted a slab at a
time, counted in the memory estimate, and in BIDS derivatives a DWI of its own. The API's
form takes it too (tests/service/test_cli_fod.py)."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

import worker.jobs.fod.plan as fod_plan
from service.cli import main
from tests.worker.jobs.fod_phantom import SHAPE, write_exact_responses, write_phantom
from worker.io.images import load_image_data, read_image_header
from worker.io.mif import read_mif_header
from worker.jobs.fod import fod_memory_bytes, plan_fod
from worker.params.fod import FodParams

pytestmark = pytest.mark.requires_mrtrix

TISSUES = ("wm", "gm", "csf")


def image(path):
    return load_image_data(read_image_header(path, "image"))


def relative_l2(ours, theirs):
    ours, theirs = ours.reshape(-1, ours.shape[-1]), theirs.reshape(-1, theirs.shape[-1])
    return np.linalg.norm(ours - theirs, axis=1) / np.linalg.norm(theirs, axis=1)


@pytest.fixture(scope="module")
def phantom(tmp_path_factory):
    """b = 0 ×4, 1000 ×30, 2000 ×45, 3000 ×60, exact responses of all shells and of b = 0,
    1000 and 3000 (``chosen``)."""
    folder = tmp_path_factory.mktemp("predicted")
    found = write_phantom(folder)
    found["chosen"] = write_exact_responses(folder, [0.0, 1000.0, 3000.0], stem="chosen_")
    return found


def _fod(p, dwi, prefix, responses, *extra):
    gradients = [] if str(dwi).endswith(".mif") else ["--bval", str(p["bval"]), "--bvec", str(p["bvec"])]
    return main(["fod", str(dwi), str(prefix), *gradients, "--mask", str(p["mask"]), "--response",
                 *map(str, responses), "--backend", "cpu", "--predicted-signal", "--quiet", *extra])


def _dwi2fod(p, folder, responses, *extra):
    """dwi2fod msmt_csd's predicted signal (``folder/theirs.mif``)."""
    outputs = [a for tissue, response in zip(TISSUES, responses) for a in (str(response), str(folder / f"{tissue}.mif"))]
    subprocess.run(["dwi2fod", "msmt_csd", "-quiet", "-nthreads", "1", "-fslgrad", str(p["bvec"]), str(p["bval"]),
                    "-mask", str(p["mask"]), str(p["dwi"]), *outputs, "-predicted_signal", str(folder / "theirs.mif"),
                    *extra], check=True)
    return image(folder / "theirs.mif")


def test_the_predicted_signal_is_dwi2fod_s(phantom, tmp_path):
    p = phantom["paths"]
    responses = [p[tissue] for tissue in TISSUES]
    assert _fod(p, p["dwi"], tmp_path / "ours", responses) == 0
    theirs = _dwi2fod(p, tmp_path, responses)
    ours = image(tmp_path / "ours_predicted_signal.nii")
    assert ours.shape == theirs.shape == (*SHAPE, phantom["bvals"].size)
    assert relative_l2(ours, theirs).max() <= 1e-5
    # the DWI it was fitted to, but for the noise: σ a fiftieth of b = 0, 6 % of this signal's norm
    dwi = image(p["dwi"])
    assert 0.03 < np.linalg.norm(dwi - ours) / np.linalg.norm(dwi) < 0.08
    sidecar = json.loads((tmp_path / "ours_fod.json").read_text())
    assert sidecar["outputs"]["predicted_signal"] == "ours_predicted_signal.nii"
    assert read_image_header(tmp_path / "ours_predicted_signal.nii", "image").affine.tolist() == \
        read_image_header(p["dwi"], "dwi").affine.tolist()


def test_a_mif_prediction_keeps_the_dwi_s_scheme(phantom, tmp_path):
    p = phantom["paths"]
    dwi = tmp_path / "dwi.mif"
    subprocess.run(["mrconvert", "-quiet", str(p["dwi"]), str(dwi), "-fslgrad", str(p["bvec"]), str(p["bval"])],
                   check=True)
    assert _fod(p, dwi, tmp_path / "ours", [p[tissue] for tissue in TISSUES]) == 0
    predicted = tmp_path / "ours_predicted_signal.mif"
    assert read_mif_header(predicted).keyval["dw_scheme"] == read_mif_header(dwi).keyval["dw_scheme"]
    assert relative_l2(image(predicted), _dwi2fod(p, tmp_path, [p[tissue] for tissue in TISSUES])).max() <= 1e-5


def test_chosen_shells_predict_every_volume_as_dwi2fod(phantom, tmp_path):
    """0 in the volumes the fit leaves out (b = 2000 here), as ``dwi2fod -shells``."""
    p, chosen = phantom["paths"], phantom["chosen"]
    responses = [chosen[tissue] for tissue in TISSUES]
    assert _fod(p, p["dwi"], tmp_path / "ours", responses, "--shells", "0,1000,3000") == 0
    theirs = _dwi2fod(p, tmp_path, responses, "-shells", "0,1000,3000")
    ours = image(tmp_path / "ours_predicted_signal.nii")
    left_out = np.abs(phantom["bvals"] - 2000) < 50
    assert ours.shape == theirs.shape and left_out.sum() == 45
    assert not ours[..., left_out].any() and not theirs[..., left_out].any()
    assert relative_l2(ours[..., ~left_out], theirs[..., ~left_out]).max() <= 1e-5


def test_csd_predicts_its_shell_alone(phantom, tmp_path):
    """``dwi2fod csd`` writes no prediction; ours is Q f in the highest shell's volumes, 0 in the others."""
    from gpu.fod.csd_problem import csd_problem
    from gpu.fod.gradient_scheme import normalise_scheme
    from worker.io.gradients import read_fsl_gradients
    from worker.io.response_files import read_response

    p = phantom["paths"]
    assert _fod(p, p["dwi"], tmp_path / "ours", [p["wm"]], "--algorithm", "csd", "--lmax", "8") == 0
    ours = image(tmp_path / "ours_predicted_signal.nii").reshape(-1, phantom["bvals"].size)
    fod = image(tmp_path / "ours_wmfod.nii").astype(np.float64).reshape(-1, 45)
    scheme = read_fsl_gradients(p["bvec"], p["bval"], read_image_header(p["dwi"], "dwi").affine)
    response = read_response(p["wm"])[0][-1]
    problem = csd_problem(*normalise_scheme(scheme[:, 3], scheme[:, :3]), response, 8)
    expected = np.zeros_like(ours, np.float64)
    expected[:, problem.volumes] = fod @ problem.Q.T
    assert not ours[:, np.setdiff1d(np.arange(ours.shape[1]), problem.volumes)].any()
    assert np.abs(ours - expected).max() <= 1e-5 * np.abs(expected).max()


def test_slabs_predict_the_whole_volume_s_bytes(phantom, tmp_path, monkeypatch):
    p = phantom["paths"]
    responses = [p[tissue] for tissue in TISSUES]
    assert _fod(p, p["dwi"], tmp_path / "whole", responses) == 0
    monkeypatch.setattr(fod_plan, "FIT_IN_MEMORY_BYTES", 0)
    monkeypatch.setattr(fod_plan, "SLAB_VOXELS", SHAPE[0] * SHAPE[1])
    assert _fod(p, p["dwi"], tmp_path / "slabs", responses) == 0
    assert json.loads((tmp_path / "slabs_fod.json").read_text())["outputs"]["predicted_signal"]
    for name in ("wmfod", "predicted_signal"):
        np.testing.assert_array_equal(image(tmp_path / f"slabs_{name}.nii"), image(tmp_path / f"whole_{name}.nii"))


def test_the_memory_estimate_counts_the_prediction(phantom):
    p = phantom["paths"]
    inputs = {"bval": p["bval"], "bvec": p["bvec"], "responses": {tissue: p[tissue] for tissue in TISSUES}}
    plain = fod_memory_bytes(plan_fod(p["dwi"], FodParams(), **inputs))
    predicted = fod_memory_bytes(plan_fod(p["dwi"], FodParams(predicted_signal=True), **inputs))
    threads, volumes = len(os.sched_getaffinity(0)), phantom["bvals"].size
    assert predicted - plain == int(np.prod(SHAPE)) * volumes * 8 + threads * 2048 * (47 * 12 + volumes * 8)
