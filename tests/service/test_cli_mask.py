"""``fibertensor mask`` and ``POST /v1/jobs/mask``: the brain mask ``dwi2mask`` makes (the same
voxels), the same bytes from both doors, and a DWI the mask cannot be made from refused at the
door with nothing written."""

from __future__ import annotations

import json
import subprocess

import nibabel as nib
import numpy as np
import pytest

from service.cli import main
from tests.service.conftest import run_queued
from tests.worker.jobs.fod_phantom import AFFINE, write_head_in_noise, write_phantom
from worker.io.images import load_image_data, read_image_header, write_image

pytestmark = pytest.mark.requires_mrtrix


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    return write_head_in_noise(tmp_path_factory.mktemp("head"))


def _image(path):
    return load_image_data(read_image_header(path, "image"))


def test_cli_writes_dwi2mask_s_mask(head, tmp_path, capsys):
    assert main(["mask", str(head["dwi"]), str(tmp_path / "sub"), "--bval", str(head["bval"]), "--bvec",
                 str(head["bvec"])]) == 0
    assert "brain mask of" in capsys.readouterr().out
    subprocess.run(["dwi2mask", "-quiet", "-fslgrad", str(head["bvec"]), str(head["bval"]), str(head["dwi"]),
                    str(tmp_path / "theirs.nii")], check=True)
    ours = _image(tmp_path / "sub_mask.nii")
    assert nib.load(tmp_path / "sub_mask.nii").get_data_dtype() == np.uint8
    np.testing.assert_array_equal(ours > 0, _image(tmp_path / "theirs.nii") > 0)
    sidecar = json.loads((tmp_path / "sub_mask.json").read_text())
    assert sidecar["voxels"] == int(ours.sum()) and sidecar["shells"] == [0.0, 1000.0, 2000.0]
    assert sidecar["outputs"] == {"mask": "sub_mask.nii"} and sidecar["warnings"] == []


def test_cli_refuses_a_3d_image(head, tmp_path, capsys):
    volume = write_image(tmp_path / "b0.nii", np.ascontiguousarray(_image(head["dwi"])[..., 0]), AFFINE)
    assert main(["mask", str(volume), str(tmp_path / "out" / "sub"), "--bval", str(head["bval"]), "--bvec",
                 str(head["bvec"])]) == 2
    assert "Not a diffusion-weighted series" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.anyio
async def test_api_runs_a_mask_job_as_the_cli(client, store, tmp_path):
    head = write_phantom(tmp_path)["paths"]  # small enough for the test server's upload limit
    files = {slot: (head[slot].name, head[slot].read_bytes()) for slot in ("dwi", "bval", "bvec")}
    response = await client.post("/v1/jobs/mask", files=files)
    assert response.status_code == 202, response.text
    run_queued(store)
    job = (await client.get(f"/v1/jobs/{response.json()['id']}")).json()
    assert job["status"] == "succeeded", job["error"]
    results = {r["name"]: r["url"] for r in job["results"]}
    assert sorted(results) == ["mask.json", "mask.nii"]
    (tmp_path / "api_mask.nii").write_bytes((await client.get(results["mask.nii"])).content)
    assert main(["mask", str(head["dwi"]), str(tmp_path / "cli"), "--bval", str(head["bval"]), "--bvec",
                 str(head["bvec"]), "--quiet"]) == 0
    np.testing.assert_array_equal(_image(tmp_path / "api_mask.nii"), _image(tmp_path / "cli_mask.nii"))
    response = await client.post("/v1/jobs/mask", files={"dwi": files["dwi"]})
    assert response.status_code == 422 and response.json()["title"] == "No gradient table"
