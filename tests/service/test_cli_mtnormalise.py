"""``fibertensor mtnormalise`` and ``POST /v1/jobs/mtnormalise``: the compartments MRtrix3's
``mtnormalise`` writes, in the inputs' formats (an MRtrix image with its ``lognorm_scale``), the
same bytes from both doors, and inputs it cannot use refused at the door with nothing written."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from service.cli import main
from tests.service.conftest import run_queued
from tests.worker.jobs.fod_phantom import AFFINE, write_biased_compartments
from worker.io.images import load_image_data, read_image_header, write_image

pytestmark = pytest.mark.requires_mrtrix


@pytest.fixture(scope="module")
def fit(tmp_path_factory):
    return write_biased_compartments(tmp_path_factory.mktemp("fit"))


def _image(path):
    return load_image_data(read_image_header(path, "image"))


def test_cli_writes_mtnormalise_s_compartments(fit, tmp_path, capsys):
    subprocess.run(["mrconvert", "-quiet", str(fit["wmfod"]), str(tmp_path / "wmfod.mif")], check=True)
    compartments = [str(tmp_path / "wmfod.mif"), str(fit["gm"]), str(fit["csf"])]
    assert main(["mtnormalise", *compartments, str(tmp_path / "sub"), "--mask", str(fit["mask"])]) == 0
    assert "normalised on" in capsys.readouterr().out
    subprocess.run(["mtnormalise", "-quiet", "-nthreads", "1", compartments[0], str(tmp_path / "t_wmfod.mif"),
                    compartments[1], str(tmp_path / "t_gm.nii"), compartments[2], str(tmp_path / "t_csf.nii"),
                    "-mask", str(fit["mask"])], check=True)
    for ours, theirs in (("sub_wmfod.mif", "t_wmfod.mif"), ("sub_gm.nii", "t_gm.nii"), ("sub_csf.nii", "t_csf.nii")):
        np.testing.assert_allclose(_image(tmp_path / ours), _image(tmp_path / theirs), rtol=1e-5, atol=1e-7)
    theirs_scale = float(read_image_header(tmp_path / "t_wmfod.mif", "t").keyval["lognorm_scale"])
    ours_scale = float(read_image_header(tmp_path / "sub_wmfod.mif", "o").keyval["lognorm_scale"])
    assert ours_scale == pytest.approx(theirs_scale, rel=1e-6)
    sidecar = json.loads((tmp_path / "sub_mtnormalise.json").read_text())
    assert sorted(sidecar["balance_factors"]) == ["csf", "gm", "wmfod"] and sidecar["warnings"] == []
    assert sidecar["outputs"] == {"wmfod": "sub_wmfod.mif", "gm": "sub_gm.nii", "csf": "sub_csf.nii"}


@pytest.mark.parametrize("case, says", [
    ("off grid", "Images on different grids"),
    ("empty mask", "Empty mask"),
    ("four", "give at most 3 compartments"),
])
def test_cli_refuses_what_it_cannot_use(fit, tmp_path, capsys, case, says):
    mask, compartments = fit["mask"], [fit["wmfod"], fit["gm"], fit["csf"]]
    if case == "off grid":
        compartments[1] = write_image(tmp_path / "small_gm.nii", _image(fit["gm"])[:-1], AFFINE)
    elif case == "empty mask":
        mask = write_image(tmp_path / "empty.nii", np.zeros(_image(fit["mask"]).shape, np.uint8),
                           read_image_header(fit["mask"], "m").affine)
    else:
        compartments.append(fit["csf"])
    out = tmp_path / "out"
    assert main(["mtnormalise", *map(str, compartments), f"{out}/", "--mask", str(mask)]) == 2
    assert says in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.anyio
async def test_api_runs_an_mtnormalise_job_as_the_cli(client, store, fit, tmp_path):
    # cropped to fit the test server's upload limit
    affine = read_image_header(fit["mask"], "m").affine
    fit = {role: write_image(tmp_path / f"{role}.nii", _image(fit[role])[4:20, 4:20], affine)
           for role in ("wmfod", "gm", "csf", "mask")}
    files = {role: (fit[role].name, fit[role].read_bytes()) for role in ("wmfod", "gm", "csf", "mask")}
    response = await client.post("/v1/jobs/mtnormalise", files=files, data={"order": "2"})
    assert response.status_code == 202, response.text
    run_queued(store)
    job = (await client.get(f"/v1/jobs/{response.json()['id']}")).json()
    assert job["status"] == "succeeded", job["error"]
    results = {r["name"]: r["url"] for r in job["results"]}
    assert sorted(results) == ["csf.nii", "gm.nii", "mtnormalise.json", "wmfod.nii"]
    (tmp_path / "api_wmfod.nii").write_bytes((await client.get(results["wmfod.nii"])).content)
    assert main(["mtnormalise", str(fit["wmfod"]), str(fit["gm"]), str(fit["csf"]), str(tmp_path / "cli"), "--mask",
                 str(fit["mask"]), "--order", "2", "--quiet"]) == 0
    np.testing.assert_array_equal(_image(tmp_path / "api_wmfod.nii"), _image(tmp_path / "cli_wmfod.nii"))
    response = await client.post("/v1/jobs/mtnormalise", files={"wmfod": files["wmfod"]})
    assert response.status_code == 422
