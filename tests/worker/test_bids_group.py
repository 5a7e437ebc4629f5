"""``fibertensor bids BIDS_DIR OUTPUT_DIR group``: the responses the participant level
estimated, averaged as MRtrix3's ``responsemean`` at the derivatives dataset's root, and a
second participant run from DWIs with them (fixel-based analysis' common responses)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gpu.fod import tissue_responses
from gpu.fod.response import mean_response
from service.cli import main
from tests.file_contents import assert_same_file
from tests.worker.test_bids_dwi import FOD, write_dwi
from worker.io.response_files import read_response, write_response
from worker.jobs.fod import run_fod

LABELS = ("WM", "GM", "CSF")
# where the participant level writes each DWI's responses, and the shells they were estimated on
PARTICIPANTS = (("sub-01/dwi", "sub-01", (0.0, 995.0, 2003.0)),
                ("sub-02/ses-1/dwi", "sub-02_ses-1_acq-hi", (0.0, 1004.0, 1998.0)))


def write_participant_responses(out: Path, participants=PARTICIPANTS) -> dict[str, list[Path]]:
    """Each participant's WM, GM and CSF responses as the participant level names them: the
    phantom's exact ones, each subject's scaled by its own brightness and its WM shape changed."""
    rng = np.random.default_rng(3)
    written = {label: [] for label in LABELS}
    for index, (folder, stem, shells) in enumerate(participants):
        for label, response in zip(LABELS, tissue_responses([0.0, 1000.0, 2000.0])):
            response = response * (1.0 + 0.6 * index)
            if label == "WM":
                response[:, 1:] *= rng.uniform(0.8, 1.2, response[:, 1:].shape)
            path = out / folder / f"{stem}_model-msmtcsd_label-{label}_response.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            write_response(path, response, np.array(shells))
            written[label].append(path)
    return written


def test_group_level_writes_the_mean_responses_with_their_sources(tmp_path, capsys):
    out = tmp_path / "derivatives"
    inputs = write_participant_responses(out)
    assert main(["bids", str(tmp_path / "raw"), str(out), "group"]) == 0
    printed = capsys.readouterr().out.splitlines()
    for label in LABELS:
        group = out / f"model-msmtcsd_label-{label}_desc-groupmean_response.txt"
        assert f"{group}: the mean of 2 responses" in printed
        ours, shells = read_response(group)
        np.testing.assert_array_equal(shells, [0, 1000, 2000])  # the participants' b-values averaged
        np.testing.assert_array_equal(ours, mean_response([read_response(path)[0] for path in inputs[label]]))
        sidecar = json.loads(group.with_suffix(".json").read_text())
        assert sidecar["Sources"] == [f"bids::{path.relative_to(out).as_posix()}" for path in inputs[label]]
        assert sidecar["Description"].startswith(f"{label} response function of the group: the mean of 2")
    # the second subject is brighter: the mean is scaled towards the group's l = 0 terms, not a plain mean
    wm = [read_response(path)[0] for path in inputs["WM"]]
    assert np.abs(read_response(out / "model-msmtcsd_label-WM_desc-groupmean_response.txt")[0]
                  - np.mean(wm, axis=0)).max() > 1.0


def test_group_level_of_selected_participants(tmp_path, capsys):
    out = tmp_path / "derivatives"
    inputs = write_participant_responses(out)
    assert main(["bids", str(tmp_path / "raw"), str(out), "group", "--participant-label", "sub-02", "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    for label in LABELS:
        group = read_response(out / f"model-msmtcsd_label-{label}_desc-groupmean_response.txt")
        np.testing.assert_array_equal(group[0], read_response(inputs[label][1])[0])
        np.testing.assert_array_equal(group[1], [0, 1004, 1998])


@pytest.mark.parametrize("case, message", [
    ("empty", "fibertensor: error: no sub-*/[ses-*/]dwi/*_model-*_label-*_response.txt in"),
    ("other shells", "sub-03_model-msmtcsd_label-WM_response.txt is for b = 0, 1000, 3000, "
                     "sub-01_model-msmtcsd_label-WM_response.txt for b = 0, 995, 2003: average responses of DWIs "
                     "with the same shells"),
    ("options", "the group level averages the participants' responses and takes --participant-label and "
                "--session-label alone"),
    ("a CSF response without signal", "msmtcsd CSF: every response needs finite coefficients and a positive l = 0 "
                                      "term on every shell"),
])
def test_group_level_errors_say_what_to_fix(tmp_path, capsys, case, message):
    out = tmp_path / "derivatives"
    out.mkdir()
    if case == "a CSF response without signal":
        write_participant_responses(out)
        path = out / "sub-01/dwi/sub-01_model-msmtcsd_label-CSF_response.txt"
        response, shells = read_response(path)
        response[2, 0] = 0.0
        write_response(path, response, shells)
    elif case != "empty":
        write_participant_responses(out, PARTICIPANTS + (("sub-03/dwi", "sub-03", (0.0, 1000.0, 3000.0)),))
    options = ["--fixels"] if case == "options" else []
    assert main(["bids", str(tmp_path / "raw"), str(out), "group", *options]) == 2
    error = capsys.readouterr().err
    assert message in error, error
    assert not list(out.glob("*groupmean*"))  # not even the tissues before the one refused
    if case == "empty":
        assert "run the participant level from DWIs without --response first" in error


def test_a_second_participant_run_fits_with_the_group_responses(tmp_path, capsys):
    """The group level's files, given back with --response, fit every DWI with them: the
    FODs of fibertensor fod with those responses."""
    raw, out = tmp_path / "raw", tmp_path / "derivatives"
    dwi = write_dwi(raw / "sub-01/dwi/sub-01_dwi.nii.gz", 1)
    write_participant_responses(out)
    assert main(["bids", str(raw), str(out), "group", "--quiet"]) == 0
    group = [out / f"model-msmtcsd_label-{label}_desc-groupmean_response.txt" for label in LABELS]
    assert main(["bids", str(raw), str(out), "participant", "--from", "dwi", "--response", *map(str, group),
                 "--lmax", str(FOD.lmax), "--backend", "cpu", "--no-qc", "--quiet"]) == 0
    single = run_fod(dwi, tmp_path / "single", FOD, bval=dwi.with_name("sub-01_dwi.bval"),
                     bvec=dwi.with_name("sub-01_dwi.bvec"), responses=dict(zip(("wm", "gm", "csf"), group)))
    for label, output in zip(LABELS, ("wmfod", "gm", "csf")):
        assert_same_file(out / f"sub-01/dwi/sub-01_model-msmtcsd_param-fod_label-{label}_desc-fod_dwimap.nii.gz",
                         tmp_path / single["outputs"][output], label)
