"""``fibertensor fod`` and ``fibertensor response`` refuse unusable inputs from their headers
and gradient tables, before reading any data, with a message saying what to fix (exit 2), as
``POST /v1/jobs/fod`` does (422 problem+json); the API runs a fod job from its form slots, its
peaks options among the form's fields."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from service.cli import main
from tests.file_contents import file_content
from tests.service.conftest import run_queued
from tests.worker.jobs.fod_phantom import AFFINE, write_exact_responses, write_fsl, write_phantom
from worker.io.images import load_image_data, read_image_header, write_image


@pytest.fixture
def phantom(tmp_path):
    return write_phantom(tmp_path)


def _bad_volume_count(phantom, tmp_path):
    bval, bvec = write_fsl(tmp_path, phantom["bvals"][:-1], phantom["dirs"][:-1], "short")
    return {"bval": bval, "bvec": bvec}


def _no_bzero(phantom, tmp_path):
    keep = phantom["bvals"] > 0
    dwi = write_image(tmp_path / "no_b0.nii", np.ascontiguousarray(phantom["dwi"][..., keep]), AFFINE)
    bval, bvec = write_fsl(tmp_path, phantom["bvals"][keep], phantom["dirs"][keep], "no_b0")
    return {"dwi": dwi, "bval": bval, "bvec": bvec}


def _stray_bvalue(phantom, tmp_path):
    bvals = phantom["bvals"].copy()
    bvals[-1] = 5000.0
    bval, bvec = write_fsl(tmp_path, bvals, phantom["dirs"], "stray")
    return {"bval": bval, "bvec": bvec}


def _other_shells(phantom, tmp_path):
    return {"responses": write_exact_responses(tmp_path, [0.0, 1000.0, 2000.0], "other_")}


def _single_volume(phantom, tmp_path):
    return {"dwi": write_image(tmp_path / "b0.nii", np.ascontiguousarray(phantom["dwi"][..., 0]), AFFINE)}


def _no_gradients(phantom, tmp_path):
    return {"bval": None, "bvec": None}


BAD_INPUTS = {
    "volume count": (_bad_volume_count, "Gradient table does not match the image: the bvals file 'short.bval' gives "
                     "138 gradient rows but the image has 139 volumes"),
    "no b=0": (_no_bzero, "No b=0 volume: the DWI has no b=0 volume"),
    "b-value in no shell": (_stray_bvalue, "B-values in no shell: volumes [138] (b = 5000) belong to no shell"),
    "response shells": (_other_shells, "Response does not match the data's shells: the wm response 'other_wm.txt' "
                        "is for b = 0, 1000, 2000 but the DWI has shells b = 0, 1000, 2000, 3000"),
    "3D image": (_single_volume, "Not a diffusion-weighted series: the DWI 'b0.nii' has shape (12, 6, 4)"),
    "no gradients": (_no_gradients, "No gradient table: the DWI needs its gradients"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_cli_refuses_bad_input(case, phantom, tmp_path, capsys):
    make, message = BAD_INPUTS[case]
    given = {**phantom["paths"], "responses": {t: phantom["paths"][t] for t in ("wm", "gm", "csf")}}
    given.update(make(phantom, tmp_path))
    argv = ["fod", str(given["dwi"]), str(tmp_path / "out" / "sub"), "--backend", "cpu",
            *(arg for slot in ("bval", "bvec") if given[slot] is not None for arg in (f"--{slot}", str(given[slot]))),
            *given.get("options", [])]
    if given["responses"]:
        argv += ["--response", *map(str, given["responses"].values())]
    (tmp_path / "out").mkdir()
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not any((tmp_path / "out").iterdir())


def test_response_cli_refuses_a_3d_image(phantom, tmp_path, capsys):
    p = phantom["paths"]
    dwi = _single_volume(phantom, tmp_path)["dwi"]
    assert main(["response", str(dwi), str(tmp_path / "r"), "--bval", str(p["bval"]), "--bvec", str(p["bvec"])]) == 2
    assert "Not a diffusion-weighted series" in capsys.readouterr().err


def test_cli_needs_both_fsl_files(phantom, tmp_path, capsys):
    p = phantom["paths"]
    assert main(["fod", str(p["dwi"]), str(tmp_path / "o"), "--bval", str(p["bval"])]) == 2
    assert "give --bval and --bvec together" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["fod", "response"])
def test_a_failed_run_removes_the_folder_it_made(command, phantom, tmp_path, capsys):
    """OUT_PREFIX ending in / makes its folder (and missing parents); a run that fails after
    the checks (here the response estimation: the phantom's eroded mask leaves no voxel)
    removes them again, a folder that was there before stays."""
    p = phantom["paths"]
    args = [str(p["dwi"]), "--bval", str(p["bval"]), "--bvec", str(p["bvec"]), "--mask", str(p["mask"]),
            "--backend", "cpu", "--quiet"]
    assert main([command, args[0], f"{tmp_path / 'new' / 'out'}/", *args[1:]]) == 2
    assert "Responses cannot be estimated: no brain-mask voxel has usable signal" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
    (tmp_path / "old").mkdir()
    assert main([command, args[0], f"{tmp_path / 'old'}/", *args[1:]]) == 2
    assert (tmp_path / "old").is_dir() and not any((tmp_path / "old").iterdir())


def test_cli_refuses_peaks_options_as_the_peaks_command_does(phantom, tmp_path, capsys):
    p = phantom["paths"]
    assert main(["fod", str(p["dwi"]), str(tmp_path / "o"), "--bval", str(p["bval"]), "--bvec", str(p["bvec"]),
                 "--peaks", "--peaks-npeaks", "9", "--peaks-starts", "4"]) == 2
    assert "--peaks-npeaks: 9 peaks cannot come from 4 starts" in capsys.readouterr().err
    assert main(["fod", str(p["dwi"]), str(tmp_path / "o"), "--peaks-metrics", "all,rgb"]) == 2
    assert "--peaks-metrics: all,rgb: give all, none, or a list of metric names, not a mix" in capsys.readouterr().err
    assert not list(tmp_path.glob("o*"))


def test_a_job_too_large_for_memory_is_told_its_way_round(phantom, tmp_path, capsys, monkeypatch):
    """Above the memory limit, a fod job without responses is told to estimate them apart (the
    estimation holds the whole DWI; a fit from given responses runs in slabs), a response job
    to estimate on the DWI before upsampling, and a fod job whose peaks step tips it over to
    run peaks apart; each refused from its headers, leaving nothing."""
    from dataclasses import replace

    from worker.jobs.fod import fod_memory_bytes, plan_fod
    from worker.params.fod import FodParams

    p = phantom["paths"]
    gradients = ["--bval", str(p["bval"]), "--bvec", str(p["bvec"])]
    plan = plan_fod(p["dwi"], FodParams(peaks=True), bval=p["bval"], bvec=p["bvec"],
                    responses={t: p[t] for t in ("wm", "gm", "csf")})
    limit = max(fod_memory_bytes(replace(plan, peaks_bytes=0)), plan.peaks_bytes)
    assert limit < fod_memory_bytes(plan)
    monkeypatch.setenv("FIBERTENSOR_MAX_JOB_MEMORY_BYTES", str(limit))
    out = tmp_path / "out"
    out.mkdir()
    for argv, advice in (
            (["fod", str(p["dwi"]), f"{out}/a", *gradients],
             "; estimate the responses first, with a response job on this DWI before it was upsampled or on a crop "
             "of it (responses need no more), and give them: from given responses a DWI too large to hold is fitted "
             "a slab at a time, or ask the operator to raise the limit"),
            (["response", str(p["dwi"]), f"{out}/b", *gradients],
             "; estimate the responses on this DWI before it was upsampled, or on a crop of it to the brain"),
            (["fod", str(p["dwi"]), f"{out}/c", *gradients, "--peaks", "--response", str(p["wm"]), str(p["gm"]),
              str(p["csf"])],
             "; leave out peaks and run a peaks job on the written WM FOD, or ask the operator")):
        assert main(argv) == 2
        error = capsys.readouterr().err
        assert "Job too large for memory" in error and advice in error, error
    assert not any(out.iterdir())


def _form(paths, **slots):
    return {slot: (path.name, path.read_bytes()) for slot, path in {**paths, **slots}.items()}


@pytest.mark.anyio
async def test_api_refuses_bad_input(client, store, phantom, tmp_path):
    p = phantom["paths"]
    short = _bad_volume_count(phantom, tmp_path)
    response = await client.post("/v1/jobs/fod", files=_form({"dwi": p["dwi"]}, **short))
    assert response.status_code == 422 and response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["title"] == "Gradient table does not match the image"
    other = _other_shells(phantom, tmp_path)["responses"]
    response = await client.post("/v1/jobs/fod", files=_form({s: p[s] for s in ("dwi", "bval", "bvec")}, **other))
    assert response.status_code == 422 and response.json()["title"] == "Response does not match the data's shells"
    assert "b = 0, 1000, 2000 but the DWI has shells b = 0, 1000, 2000, 3000" in response.json()["detail"]
    assert "or fit the shells it is for alone (shells 0,1000,2000)" in response.json()["detail"]
    # which the form's shells field does
    files = _form({s: p[s] for s in ("dwi", "bval", "bvec")}, **other)
    response = await client.post("/v1/jobs/fod", files=files, data={"shells": "0,1000,2000", "backend": "cpu"})
    assert response.status_code == 202, response.text
    run_queued(store)
    job = (await client.get(f"/v1/jobs/{response.json()['id']}")).json()
    assert job["status"] == "succeeded", job["error"]
    sidecar = (await client.get(next(r["url"] for r in job["results"] if r["name"] == "fod.json"))).json()
    assert sidecar["shells"] == [0.0, 1000.0, 2000.0] and sidecar["parameters"]["shells"] == [0.0, 1000.0, 2000.0]
    response = await client.post("/v1/jobs/fod", files=files, data={"shells": "0,1500"})
    assert response.status_code == 422 and response.json()["title"] == "Shell not found"
    assert "lies between shells" in response.json()["detail"]


@pytest.mark.anyio
async def test_api_runs_a_fod_job_as_the_cli(client, store, phantom, tmp_path):
    p = phantom["paths"]
    slots = ("dwi", "bval", "bvec", "mask", "wm", "gm", "csf")
    response = await client.post("/v1/jobs/fod", files=_form({s: p[s] for s in slots}), data={"backend": "cpu"})
    assert response.status_code == 202, response.text
    run_queued(store)
    job = (await client.get(f"/v1/jobs/{response.json()['id']}")).json()
    assert job["status"] == "succeeded", job["error"]
    results = {r["name"]: r["url"] for r in job["results"]}
    assert sorted(results) == ["csf.nii", "fod.json", "gm.nii", "wmfod.nii"]
    (tmp_path / "api_wmfod.nii").write_bytes((await client.get(results["wmfod.nii"])).content)
    assert main(["fod", str(p["dwi"]), str(tmp_path / "cli"), "--bval", str(p["bval"]), "--bvec", str(p["bvec"]),
                 "--mask", str(p["mask"]), "--response", str(p["wm"]), str(p["gm"]), str(p["csf"]),
                 "--backend", "cpu", "--quiet"]) == 0
    api, cli = (load_image_data(read_image_header(tmp_path / f"{name}_wmfod.nii", "fod")) for name in ("api", "cli"))
    np.testing.assert_array_equal(api, cli)
    assert (await client.get(results["fod.json"])).json()["input"]["dwi"] == "dwi.nii"


@pytest.mark.anyio
async def test_api_runs_a_response_job_as_the_cli(client, store, phantom, tmp_path):
    p = phantom["paths"]
    small = {"erode": "0", "sfwm": "20", "gm": "20", "csf": "20"}
    response = await client.post("/v1/jobs/response", files=_form({s: p[s] for s in ("dwi", "bval", "bvec", "mask")}),
                                 data=small)
    assert response.status_code == 202, response.text
    run_queued(store)
    job = (await client.get(f"/v1/jobs/{response.json()['id']}")).json()
    assert job["status"] == "succeeded", job["error"]
    results = {r["name"]: r["url"] for r in job["results"]}
    assert sorted(results) == ["csf.txt", "gm.txt", "response.json", "voxels.nii", "wm.txt"]
    assert main(["response", str(p["dwi"]), str(tmp_path / "cli"), "--bval", str(p["bval"]), "--bvec",
                 str(p["bvec"]), "--mask", str(p["mask"]), *(f"--{k}={v}" for k, v in small.items()), "--quiet"]) == 0
    for tissue in ("wm", "gm", "csf"):
        assert (await client.get(results[f"{tissue}.txt"])).text == (tmp_path / f"cli_{tissue}.txt").read_text()
    sidecar = (await client.get(results["response.json"])).json()
    assert sidecar["input"]["gradients"] == "fsl" and sidecar["parameters"]["erode"] == 0


@pytest.mark.anyio
async def test_api_form_offers_the_peaks_options(client):
    spec = (await client.get("/openapi.json")).json()
    props = spec["paths"]["/v1/jobs/fod"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
    props = props["properties"]
    assert props["peaks"]["type"] == "boolean" and props["peaks"]["default"] is False
    assert props["peaks_npeaks"]["maximum"] == 255 and props["peaks_npeaks"]["default"] == 3
    assert props["peaks_seeding"]["enum"] == ["local-max", "all"]
    assert "basis" in props and "peaks_basis" not in props and "peaks_checksums" not in props


@pytest.mark.anyio
async def test_api_fod_job_writes_the_peaks_job_outputs(client, store, phantom, tmp_path):
    p = phantom["paths"]
    slots = ("dwi", "bval", "bvec", "mask", "wm", "gm", "csf")
    response = await client.post("/v1/jobs/fod", files=_form({s: p[s] for s in slots}),
                                 data={"backend": "cpu", "peaks": "true", "peaks_npeaks": "2",
                                       "peaks_metrics": "afd_max", "peaks_qc": "false", "peaks_format": "fixel"})
    assert response.status_code == 202, response.text
    run_queued(store)
    job = (await client.get(f"/v1/jobs/{response.json()['id']}")).json()
    assert job["status"] == "succeeded", job["error"]
    results = {r["name"]: r["url"] for r in job["results"]}
    # the peaks job writes NIfTI as .nii.gz whatever the FOD's compression
    assert sorted(results) == ["afd_max.nii.gz", "amplitudes.nii.gz", "count.nii.gz", "csf.nii", "fixels.tar",
                               "fod.json", "gm.nii", "peaks.json", "peaks.nii.gz", "wmfod.nii"]
    (tmp_path / "wmfod.nii").write_bytes((await client.get(results["wmfod.nii"])).content)
    assert main(["peaks", str(tmp_path / "wmfod.nii"), str(tmp_path / "cli"), "--mask", str(p["mask"]), "--npeaks",
                 "2", "--metrics", "afd_max", "--no-qc", "--backend", "cpu", "--quiet"]) == 0
    for name in ("peaks", "amplitudes", "count", "afd_max"):
        served = gzip.decompress((await client.get(results[f"{name}.nii.gz"])).content)
        assert served == file_content(tmp_path / f"cli_{name}.nii.gz"), name
    sidecar = (await client.get(results["peaks.json"])).json()
    assert sidecar["parameters"]["npeaks"] == 2 and sidecar["input"]["fod"] == "wmfod.nii"


@pytest.mark.anyio
async def test_api_normalises_as_the_cli_and_refuses_a_slab_fit_without_a_mask(client, store, phantom, tmp_path,
                                                                               monkeypatch):
    import worker.jobs.fod.plan as fod_plan

    p = phantom["paths"]
    slots = ("dwi", "bval", "bvec", "mask", "wm", "gm", "csf")
    data = {"backend": "cpu", "mtnormalise": "true"}
    response = await client.post("/v1/jobs/fod", files=_form({s: p[s] for s in slots}), data=data)
    assert response.status_code == 202, response.text
    run_queued(store)
    job = (await client.get(f"/v1/jobs/{response.json()['id']}")).json()
    assert job["status"] == "succeeded", job["error"]
    results = {r["name"]: r["url"] for r in job["results"]}
    (tmp_path / "api_wmfod.nii").write_bytes((await client.get(results["wmfod.nii"])).content)
    assert main(["fod", str(p["dwi"]), str(tmp_path / "cli"), "--bval", str(p["bval"]), "--bvec", str(p["bvec"]),
                 "--mask", str(p["mask"]), "--response", str(p["wm"]), str(p["gm"]), str(p["csf"]),
                 "--backend", "cpu", "--mtnormalise", "--quiet"]) == 0
    api, cli = (load_image_data(read_image_header(tmp_path / f"{name}_wmfod.nii", "fod")) for name in ("api", "cli"))
    np.testing.assert_array_equal(api, cli)
    assert "balance_factors" in (await client.get(results["fod.json"])).json()["mtnormalise"]

    monkeypatch.setattr(fod_plan, "FIT_IN_MEMORY_BYTES", 0)
    no_mask = _form({s: p[s] for s in slots if s != "mask"})
    response = await client.post("/v1/jobs/fod", files=no_mask, data=data)
    assert response.status_code == 422 and response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["title"] == "No mask to normalise within" and "give a brain mask" in response.json()["detail"]


@pytest.mark.anyio
async def test_api_fits_wm_and_csf_as_the_cli_and_refuses_wm_and_gm(client, store, phantom, tmp_path):
    p = phantom["paths"]

    def form(*slots):
        return _form({slot: p[slot] for slot in ("dwi", "bval", "bvec", "mask", *slots)})

    response = await client.post("/v1/jobs/fod", files=form("wm", "gm"))
    assert response.status_code == 422 and response.json()["title"] == "Incomplete responses"
    assert "pass the CSF response too" in response.json()["detail"]
    response = await client.post("/v1/jobs/fod", files=form("wm", "csf"), data={"backend": "cpu"})
    assert response.status_code == 202, response.text
    run_queued(store)
    job = (await client.get(f"/v1/jobs/{response.json()['id']}")).json()
    assert job["status"] == "succeeded", job["error"]
    results = {r["name"]: r["url"] for r in job["results"]}
    assert sorted(results) == ["csf.nii", "fod.json", "wmfod.nii"]
    (tmp_path / "api_csf.nii").write_bytes((await client.get(results["csf.nii"])).content)
    assert main(["fod", str(p["dwi"]), str(tmp_path / "cli"), "--bval", str(p["bval"]), "--bvec", str(p["bvec"]),
                 "--mask", str(p["mask"]), "--response", str(p["wm"]), str(p["csf"]), "--backend", "cpu",
                 "--quiet"]) == 0
    api, cli = (load_image_data(read_image_header(tmp_path / f"{name}_csf.nii", "csf")) for name in ("api", "cli"))
    np.testing.assert_array_equal(api, cli)


@pytest.mark.anyio
async def test_api_writes_the_predicted_signal_as_the_cli(client, store, phantom, tmp_path):
    p = phantom["paths"]
    slots = ("dwi", "bval", "bvec", "mask", "wm", "gm", "csf")
    response = await client.post("/v1/jobs/fod", files=_form({s: p[s] for s in slots}),
                                 data={"backend": "cpu", "predicted_signal": "true"})
    assert response.status_code == 202, response.text
    run_queued(store)
    job = (await client.get(f"/v1/jobs/{response.json()['id']}")).json()
    assert job["status"] == "succeeded", job["error"]
    results = {r["name"]: r["url"] for r in job["results"]}
    assert sorted(results) == ["csf.nii", "fod.json", "gm.nii", "predicted_signal.nii", "wmfod.nii"]
    (tmp_path / "api_predicted_signal.nii").write_bytes((await client.get(results["predicted_signal.nii"])).content)
    assert main(["fod", str(p["dwi"]), str(tmp_path / "cli"), "--bval", str(p["bval"]), "--bvec", str(p["bvec"]),
                 "--mask", str(p["mask"]), "--response", str(p["wm"]), str(p["gm"]), str(p["csf"]),
                 "--backend", "cpu", "--predicted-signal", "--quiet"]) == 0
    api, cli = (load_image_data(read_image_header(tmp_path / f"{name}_predicted_signal.nii", "image"))
                for name in ("api", "cli"))
    assert api.shape == load_image_data(read_image_header(p["dwi"], "dwi")).shape
    np.testing.assert_array_equal(api, cli)
