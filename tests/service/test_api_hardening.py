"""What a careless user and an attacker hit, each refused with a problem saying what to fix
(never blamed on the service), or served as a careful user expects: bad headers and a GPU
that is not there, malformed multipart bodies, the Host header, cursors, server paths in
logs and errors, ranges, methods, echoed text and sniffing."""

from __future__ import annotations

import dataclasses
import errno
import re

import httpx
import nibabel as nib
import numpy as np
import pytest

import gpu.cuda.device
import gpu.cuda.simulator
from gpu.peaks.phantom import fod_phantom
from tests.service.conftest import leftovers, run_queued
from tests.service.toy_kind import write_volume
from tests.worker.io.test_voxel_grid import huge_nifti2, raw_nifti
from worker.io.images import load_image_data, read_image_header, save_image
from worker.job_kinds import get_job_kind
from worker.job_runner import run_job
from worker.job_store import JobStatus

pytestmark = pytest.mark.anyio

PROBLEM = "application/problem+json"


async def _expect(response: httpx.Response, status: int, title: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert problem["title"] == title
    assert "fault of the service" not in problem["detail"]
    return problem


def _raw_post(client, body: bytes, boundary: str):
    return client.post("/v1/jobs/scale", content=body,
                       headers={"content-type": f"multipart/form-data; boundary={boundary}"})


async def test_nan_pixdim_is_refused_at_the_door(client, store, tmp_path):
    header = nib.Nifti1Header()
    header.set_sform(np.diag([2.0, 2.0, 2.0, 1.0]), code=1)
    header["pixdim"][2] = np.nan
    path = raw_nifti(tmp_path / "v.nii", header)
    problem = await _expect(await client.post("/v1/jobs/scale", files={"volume": (path.name, path.read_bytes())}),
                            422, "Invalid affine")
    assert problem["detail"] == (
        "the volume file 'v.nii' has voxel sizes [1.0, nan, 1.0] that are not all numbers; fix its "
        "header (pixdim, sform and qform, e.g. with nibabel or mrconvert from the scanner's data) and send it again"
    )
    assert leftovers(store) == []


async def test_zero_sform_is_refused_without_a_qform_and_read_through_it_with_one(client, store, tmp_path):
    header = nib.Nifti1Header()
    header["sform_code"] = 1
    bare = raw_nifti(tmp_path / "bare.nii", header)
    problem = await _expect(await client.post("/v1/jobs/scale", files={"volume": (bare.name, bare.read_bytes())}),
                            422, "Invalid affine")
    assert "collapses an axis" in problem["detail"]
    header.set_qform(np.diag([2.0, 2.0, 3.0, 1.0]), code=1)
    header["sform_code"] = 1
    with_qform = raw_nifti(tmp_path / "qform.nii", header)
    response = await client.post("/v1/jobs/scale", files={"volume": (with_qform.name, with_qform.read_bytes())})
    assert response.status_code == 202

    def copy_through_our_reader(ctx):  # as the real kinds read and write their images
        info = read_image_header(ctx.inputs["volume"], "volume")
        return [save_image(info, load_image_data(info), ctx.out_dir / "copy.nii.gz")]

    record = run_job(store, response.json()["id"],
                     lambda name: dataclasses.replace(get_job_kind(name), run=copy_through_our_reader),
                     heartbeat_interval=1.0, heartbeat_timeout=30.0, max_worker_losses=3)
    assert record.status is JobStatus.succeeded
    written = nib.load(store.outputs_dir(record.id) / "copy.nii.gz")
    np.testing.assert_allclose(written.affine, np.diag([2.0, 2.0, 3.0, 1.0]))
    warning = ("the volume file 'qform.nii' has a voxel-to-scanner transform that collapses an axis (a zero or "
               "degenerate matrix) in its sform; its qform was used instead. Check the result's orientation, "
               "and fix the input's sform")
    assert record.warnings == [warning]
    assert f"warning: {warning}\n" in store.log_path(record.id).read_text()


async def test_nifti2_dims_of_2_to_the_40_meet_the_voxel_limit(client, tmp_path):
    path = huge_nifti2(tmp_path / "huge.nii")
    problem = await _expect(await client.post("/v1/jobs/scale", files={"volume": (path.name, path.read_bytes())}),
                            422, "Too many voxels")
    assert problem["detail"] == (
        f"volume: the image grid 1099511627776×1099511627776×1099511627776 has {2**120} voxels, more than "
        "this server's limit of 100000 (FIBERTENSOR_MAX_VOXELS); crop it"
    )


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(gpu.cuda.simulator, "simulator_active", lambda: False)
    monkeypatch.setattr(gpu.cuda.device, "cuda_available", lambda: False)


@pytest.fixture
def fod(tmp_path):
    return write_volume(tmp_path / "fod.nii.gz", fod_phantom((3, 3, 2), lmax=4, seed=2)["sh"].astype(np.float32))


async def test_backend_cuda_without_a_gpu_is_refused_at_the_door(client, store, fod, no_gpu):
    response = await client.post("/v1/jobs/peaks", files={"fod": (fod.name, fod.read_bytes())},
                                 data={"backend": "cuda"})
    problem = await _expect(response, 422, "No GPU for backend cuda")
    assert problem["detail"] == (
        "backend 'cuda' was asked for, but the machine that runs this job has no usable CUDA GPU; use backend "
        "auto (the GPU where there is one, else the CPU) or cpu"
    )
    assert leftovers(store) == []


async def test_backend_cuda_on_a_worker_without_a_gpu_fails_as_an_input_error(client, store, fod, no_gpu):
    """A distributed API cannot see its workers' GPUs: the worker refuses before running."""
    job = (await client.post("/v1/jobs/peaks", files={"fod": (fod.name, fod.read_bytes())})).json()

    def ask_for_cuda(record):
        record.params["backend"] = "cuda"
        return record

    store.update(job["id"], ask_for_cuda)
    [record] = run_queued(store)
    assert record.status is JobStatus.failed
    assert record.error.title == "No GPU for backend cuda"
    assert "fault of the service" not in record.error.detail


async def test_boundary_over_256_characters_is_400(client, store):
    boundary = "b" * 300
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"factor\"\r\n\r\n2\r\n--{boundary}--\r\n").encode()
    problem = await _expect(await _raw_post(client, body, boundary), 400, "Bad request")
    assert problem["detail"] == (
        "the multipart body could not be parsed (Boundary length 300 exceeds maximum of 256); send a valid "
        "multipart/form-data request"
    )
    assert leftovers(store) == []


async def test_body_without_its_closing_boundary_is_400(client, store, volume):
    boundary = "xyz"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"volume\"; filename=\"v.nii.gz\"\r\n\r\n"
            ).encode() + volume.read_bytes() + f"\r\n--{boundary}\r\n".encode()
    problem = await _expect(await _raw_post(client, body, boundary), 400, "Bad request")
    assert problem["detail"] == ("the multipart body ends before its closing boundary; the upload was cut short "
                                 "or malformed, send it again")
    assert leftovers(store) == []


async def test_urls_never_come_from_the_host_header(client, volume, store, settings, app_factory):
    files = {"volume": (volume.name, volume.read_bytes())}
    response = await client.post("/v1/jobs/scale", files=files, headers={"Host": "evil.example"})
    job_id = response.json()["id"]
    assert response.headers["location"] == f"/v1/jobs/{job_id}"
    run_queued(store)
    job = (await client.get(f"/v1/jobs/{job_id}", headers={"Host": "evil.example"})).json()
    assert [r["url"] for r in job["results"]] == [f"/v1/jobs/{job_id}/results/{n}" for n in ("scaled.nii.gz", "scaled.json")]
    public = settings.model_copy(update={"public_url": "https://mri.example.org"})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app_factory(public)),
                                 base_url="http://evil.example") as other:
        response = await other.post("/v1/jobs/scale", files=files)
        assert response.headers["location"] == f"https://mri.example.org/v1/jobs/{response.json()['id']}"
        listed = (await other.get("/v1/jobs", params={"status": "succeeded"})).json()["jobs"]
    assert listed[0]["results"][0]["url"] == f"https://mri.example.org/v1/jobs/{job_id}/results/scaled.nii.gz"


def test_public_url_setting_is_checked(settings):
    from pydantic import ValidationError
    from service.settings import Settings

    assert Settings(public_url="https://mri.example.org/api/").public_url == "https://mri.example.org/api"
    with pytest.raises(ValidationError, match="FIBERTENSOR_PUBLIC_URL must be an http"):
        Settings(public_url="ftp://mri.example.org")


async def test_cursors_are_checked(client, volume):
    ids = [(await client.post("/v1/jobs/scale", files={"volume": (volume.name, volume.read_bytes())})).json()["id"]
           for _ in range(3)]
    page = (await client.get("/v1/jobs", params={"limit": 2})).json()
    assert [j["id"] for j in page["jobs"]] == ids[::-1][:2] and page["next_cursor"] == ids[1]
    rest = (await client.get("/v1/jobs", params={"limit": 2, "cursor": page["next_cursor"]})).json()
    assert [j["id"] for j in rest["jobs"]] == [ids[0]] and rest["next_cursor"] is None
    for cursor in ("", "garbage"):
        problem = await _expect(await client.get("/v1/jobs", params={"cursor": cursor}), 422, "Invalid request")
        assert problem["detail"] == (
            f"cursor {cursor!r} is not one this service handed out; pass the next_cursor of the previous "
            "page, or leave cursor out for the first page"
        )
        assert problem["errors"] == [{"field": "cursor", "message": "not a cursor from next_cursor"}]


async def test_log_lines_and_errors_hold_one_line_and_no_server_path(client, volume, store, settings):
    job_ids = [(await client.post("/v1/jobs/scale", files={"volume": (volume.name, volume.read_bytes())})).json()["id"]
               for _ in range(2)]

    def disk_full(ctx):
        raise OSError(errno.ENOSPC, "No space left on device\nwhile writing", str(ctx.out_dir / "scaled.nii.gz"))

    def crash(ctx):
        raise RuntimeError(f"cannot open {ctx.inputs['volume']}\nor {settings.data_dir.resolve()}/x/y.bin")

    for job_id, run in zip(job_ids, (disk_full, crash)):
        record = run_job(store, job_id, lambda name: dataclasses.replace(get_job_kind(name), run=run),
                         heartbeat_interval=1.0, heartbeat_timeout=30.0, max_worker_losses=3)
        assert record.status is JobStatus.failed
    full_log = (await client.get(f"/v1/jobs/{job_ids[0]}/log")).text.splitlines()
    assert re.fullmatch(r"\S+ data volume full: \[Errno 28\] No space left on device while writing: "
                        r"'outputs\.partial-1/scaled\.nii\.gz'", full_log[-1])
    crash_job = (await client.get(f"/v1/jobs/{job_ids[1]}")).json()
    assert crash_job["error"]["detail"].startswith(
        "RuntimeError: cannot open volume.nii.gz or x/y.bin. This is a fault of the service")  # as uploaded
    crash_log = (await client.get(f"/v1/jobs/{job_ids[1]}/log")).text
    assert str(settings.data_dir.resolve()) not in crash_log and str(settings.data_dir) not in crash_log
    assert "cannot open volume.nii.gz or x/y.bin" in crash_log.splitlines()[-1]


async def test_range_past_the_end_is_416_problem(client, volume, store):
    job_id = (await client.post("/v1/jobs/scale", files={"volume": (volume.name, volume.read_bytes())})).json()["id"]
    run_queued(store)
    result = (await client.get(f"/v1/jobs/{job_id}")).json()["results"][0]
    response = await client.get(result["url"], headers={"Range": f"bytes={result['bytes'] + 10}-"})
    problem = await _expect(response, 416, "Range not satisfiable")
    assert response.headers["content-range"] == f"bytes */{result['bytes']}"
    assert problem["detail"].startswith(f"the range 'bytes={result['bytes'] + 10}-' starts past the end of this "
                                        f"{result['bytes']}-byte file")
    first = await client.get(result["url"], headers={"Range": "bytes=0-9"})
    assert first.status_code == 206 and len(first.content) == 10


async def test_delete_on_the_batch_zip_route_is_405(client):
    response = await client.delete("/v1/jobs/results.zip")
    await _expect(response, 405, "Method not allowed")
    assert response.headers["allow"] == "GET, HEAD"


async def test_echoed_text_is_cut(client):
    long = "a" * 60_000  # httpx sends up to 64 KiB
    no_route, no_job = await client.get(f"/{long}"), await client.get(f"/v1/jobs/{long}")
    assert no_route.json()["detail"] == (
        f"there is no route /{'a' * 199}… (60001 characters); the API is under /v1 (see /docs)")
    assert no_job.json()["detail"] == f"no job {'a' * 200!r}… (60000 characters) here; list your jobs with GET /v1/jobs"
    for response in (no_route, no_job):
        assert response.status_code == 404 and len(response.content) < 1000


async def test_json_answers_are_not_sniffed(client, volume):
    for response in (await client.get("/v1/jobs"), await client.get("/v1/jobs/nothing"),
                     await client.post("/v1/jobs/scale", files={"volume": (volume.name, volume.read_bytes())})):
        assert response.headers["x-content-type-options"] == "nosniff"
    page = await client.get("/")
    assert page.headers.get_list("x-content-type-options") == ["nosniff"]


async def test_problem_details_are_one_line_without_server_folders(client, settings):
    from service.problems import Problem

    folder = settings.data_dir.resolve()

    @client.app.get("/v1/test-problem")
    def refuse():
        raise Problem(422, f"cannot read {folder}/staging/0a/inputs/fod.nii\nnor /srv/elsewhere/deep/mask.nii")

    problem = await _expect(await client.get("/v1/test-problem"), 422, "Invalid request")
    assert problem["detail"] == "cannot read staging/0a/inputs/fod.nii nor mask.nii"


async def test_mif_transform_of_1e300_is_refused_at_the_door(client, store):
    from tests.worker.io.test_voxel_grid import mif_text

    body = mif_text(["1e300,0,0,0", "0,1,0,0", "0,0,1,0"], dims="2,3,4")
    problem = await _expect(await client.post("/v1/jobs/peaks", files={"fod": ("fod.mif", body)}),
                            422, "Invalid MRtrix image header")
    assert problem["detail"] == (
        "the fod file 'fod.mif' has a voxel-to-scanner transform or voxel sizes beyond 1e+06 mm; write it again "
        "with MRtrix3 (mrconvert in.mif out.mif) or convert it to NIfTI (mrconvert in.mif out.nii.gz)")
    assert leftovers(store) == []


async def test_a_jobs_mif_images_add_the_job_to_their_command_history(client, store, volume):
    from worker.io.mif import read_mif_header, write_mif
    from worker.provenance import generated_by

    job_id = (await client.post("/v1/jobs/scale", files={"volume": (volume.name, volume.read_bytes())},
                                data={"factor": "3"})).json()["id"]
    converted = "mrconvert in.nii in.mif  (version=3.0.3)"

    def write_like_mrtrix_input(ctx):  # as the real kinds write an MRtrix input's outputs
        return [write_mif(ctx.out_dir / "scaled.mif", np.zeros((2, 2, 2), np.float32), np.eye(4),
                          keyval={"command_history": converted})]

    record = run_job(store, job_id, lambda name: dataclasses.replace(get_job_kind(name), run=write_like_mrtrix_input),
                     heartbeat_interval=1.0, heartbeat_timeout=30.0, max_worker_losses=3)
    assert record.status is JobStatus.succeeded
    history = read_mif_header(store.outputs_dir(job_id) / "scaled.mif").keyval["command_history"]
    assert history.splitlines() == [
        converted, f"fibertensor job {job_id} scale factor=3.0 chunks=4 delay=0.0 fail=none  (version={generated_by()['Version']})"]
