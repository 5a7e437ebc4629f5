"""Every /v1/jobs route and its error paths, in-process over httpx's ASGI transport."""

from __future__ import annotations

import gzip
import hashlib
import json
import socket
import subprocess
import sys
import threading

import anyio
import httpx

import nibabel as nib
import numpy as np
import pytest

from service.settings import Settings
from tests.service.conftest import run_queued
from worker.job_kinds import UploadedInput
from worker.job_store import JobStatus, JobStore, utc_now

pytestmark = pytest.mark.anyio


async def _submit(client, volume, **fields):
    with open(volume, "rb") as handle:
        return await client.post(
            "/v1/jobs/scale",
            files={"volume": (volume.name, handle)},
            data={k: str(v) for k, v in fields.items()},
        )


async def test_submit_returns_202_job_and_location(client, volume, store):
    response = await _submit(client, volume, factor=3, label="batch-1")
    assert response.status_code == 202
    job = response.json()
    assert response.headers["location"] == f"/v1/jobs/{job['id']}"  # never from the Host header
    assert job["kind"] == "scale" and job["label"] == "batch-1" and job["status"] == "queued"
    assert job["params"] == {"factor": 3.0, "chunks": 4, "delay": 0.0, "fail": "none"}
    assert job["progress"] == 0.0 and job["results"] == [] and job["error"] is None
    # the job folder holds the input under its slot name, inflated (the NIfTI-1 header and
    # data the upload inflates to), and the record what was uploaded; the queue the id
    record = store.read(job["id"])
    assert record.inputs == {"volume": "volume.nii"}
    assert record.uploaded == {"volume": UploadedInput(name="volume.nii.gz",
                                                       sha256=hashlib.sha256(volume.read_bytes()).hexdigest())}
    assert sorted(p.name for p in store.inputs_dir(job["id"]).iterdir()) == ["volume.nii"]
    stored, uploaded = nib.load(store.inputs_dir(job["id"]) / "volume.nii"), nib.load(volume)
    np.testing.assert_array_equal(np.asarray(stored.dataobj), np.asarray(uploaded.dataobj))
    assert stored.header.binaryblock == uploaded.header.binaryblock
    inflated = gzip.decompress(volume.read_bytes())
    assert (store.inputs_dir(job["id"]) / "volume.nii").read_bytes() == inflated[: uploaded.dataobj.offset + 5 * 4 * 3 * 4]
    messages = list((store.data_dir / "broker" / "queue").iterdir())
    assert len(messages) == 1
    body = json.loads(messages[0].read_text())
    assert body["headers"]["task"] == "fibertensor.run_job"
    assert body["content-type"] == "application/json"


async def test_a_job_keeps_its_inputs_names_as_uploaded_and_errors_use_them(client, volume, store, tmp_path):
    with open(volume, "rb") as handle:
        response = await client.post("/v1/jobs/scale", files={"volume": ("sub-01_T1w.nii.gz", handle)})
    job = response.json()
    assert job["input_names"] == {"volume": "sub-01_T1w.nii.gz"}
    assert store.read(job["id"]).input_names == {"volume": "sub-01_T1w.nii.gz"}
    listed = (await client.get("/v1/jobs")).json()["jobs"]
    assert [j["input_names"] for j in listed] == [{"volume": "sub-01_T1w.nii.gz"}]
    # refused at the door: the message names the file as uploaded, not as stored (volume.nii.gz)
    broken = tmp_path / "broken.nii.gz"
    broken.write_bytes(gzip.compress(b"not a NIfTI header" * 30))
    with open(broken, "rb") as handle:
        refused = await client.post("/v1/jobs/scale", files={"volume": ("sub-02_T1w.nii.gz", handle)})
    assert refused.status_code == 422
    detail = refused.json()["detail"]
    assert "sub-02_T1w.nii.gz" in detail and "volume.nii" not in detail, detail


async def test_job_runs_and_results_download_with_etag(client, volume, store):
    job_id = (await _submit(client, volume, factor=3)).json()["id"]
    run_queued(store)
    job = (await client.get(f"/v1/jobs/{job_id}")).json()
    assert job["status"] == "succeeded" and job["progress"] == 1.0
    assert job["started_at"] and job["finished_at"]
    assert [r["name"] for r in job["results"]] == ["scaled.nii.gz", "scaled.json"]
    result = job["results"][0]
    download = await client.get(result["url"])
    assert download.status_code == 200
    assert int(download.headers["content-length"]) == result["bytes"] == len(download.content)
    assert hashlib.sha256(download.content).hexdigest() == result["sha256"]
    assert download.headers["etag"] == f'"{result["sha256"]}"'
    scaled = nib.Nifti1Image.from_bytes(__import__("gzip").decompress(download.content))
    np.testing.assert_array_equal(
        np.asarray(scaled.dataobj), 3.0 * np.asarray(nib.load(volume).dataobj, dtype=np.float64)
    )
    cached = await client.get(result["url"], headers={"If-None-Match": download.headers["etag"]})
    assert cached.status_code == 304


async def test_unknown_result_and_unknown_job_are_404_problems(client, volume, store):
    job_id = (await _submit(client, volume)).json()["id"]
    run_queued(store)
    missing = await client.get(f"/v1/jobs/{job_id}/results/../../job.json")
    assert missing.status_code == 404
    missing = await client.get(f"/v1/jobs/{job_id}/results/nope.nii.gz")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"
    assert "scaled.nii.gz" in missing.json()["detail"]
    for url in ("/v1/jobs/0123456789abcdef0123456789ab", "/v1/jobs/NOT-an-id"):
        response = await client.get(url)
        assert response.status_code == 404
        assert response.json()["status"] == 404 and "GET /v1/jobs" in response.json()["detail"]


async def test_failed_job_reports_title_and_detail(client, volume, store):
    bad = (await _submit(client, volume, fail="input")).json()["id"]
    crash = (await _submit(client, volume, fail="crash")).json()["id"]
    run_queued(store)
    job = (await client.get(f"/v1/jobs/{bad}")).json()
    assert job["status"] == "failed"
    assert job["error"] == {"title": "Bad values", "detail": "volume: contains values this job cannot use"}
    job = (await client.get(f"/v1/jobs/{crash}")).json()
    assert job["status"] == "failed" and job["error"]["title"] == "Job failed"
    assert "RuntimeError: engine exploded" in job["error"]["detail"] and crash in job["error"]["detail"]
    assert job["results"] == []


async def test_list_filters_and_pages_with_cursor(client, volume, store):
    ids = [(await _submit(client, volume, label="a" if i % 2 else "b")).json()["id"] for i in range(5)]
    listing = (await client.get("/v1/jobs")).json()
    assert [j["id"] for j in listing["jobs"]] == ids[::-1] and listing["next_cursor"] is None
    labelled = (await client.get("/v1/jobs", params={"label": "a"})).json()["jobs"]
    assert [j["id"] for j in labelled] == [ids[3], ids[1]]
    pages, cursor = [], None
    while True:
        params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = (await client.get("/v1/jobs", params=params)).json()
        pages.append([j["id"] for j in page["jobs"]])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == [ids[4:2:-1], ids[2:0:-1], ids[:1]]
    run_queued(store)
    (await client.delete(f"/v1/jobs/{ids[0]}"))
    succeeded = (await client.get("/v1/jobs", params={"status": "succeeded"})).json()["jobs"]
    assert {j["id"] for j in succeeded} == set(ids[1:])
    bad = await client.get("/v1/jobs", params={"status": "done", "limit": 0})
    assert bad.status_code == 422 and bad.headers["content-type"] == "application/problem+json"
    fields = {e["field"] for e in bad.json()["errors"]}
    assert fields == {"status", "limit"}


async def test_listed_result_urls_are_the_routes_urls_behind_a_proxy_prefix(app_factory, settings, volume, store):
    """The listing builds its download URLs from one lookup per request: they must be the
    route's path for each job and name, under a proxy's root path too (without
    FIBERTENSOR_PUBLIC_URL, a path: never the Host header's address)."""
    app = app_factory(settings)
    transport = httpx.ASGITransport(app=app, root_path="/fibertensor")
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway.example:8443") as client:
        ids = [(await _submit(client, volume, label="batch")).json()["id"] for _ in range(2)]
        run_queued(store)
        listing = (await client.get("/v1/jobs", params={"label": "batch"})).json()["jobs"]
    assert {j["id"] for j in listing} == set(ids)
    for job in listing:
        assert [r["url"] for r in job["results"]] == [
            f"/fibertensor/v1/jobs/{job['id']}/results/{name}"
            for name in ("scaled.nii.gz", "scaled.json")
        ]


async def test_delete_queued_job_cancels_it_and_worker_skips_it(client, volume, store):
    job_id = (await _submit(client, volume)).json()["id"]
    response = await client.delete(f"/v1/jobs/{job_id}")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert run_queued(store) == []
    assert store.read(job_id).status is JobStatus.cancelled
    assert not store.outputs_dir(job_id).exists()
    # a second DELETE removes the finished (cancelled) job and its files
    assert (await client.delete(f"/v1/jobs/{job_id}")).status_code == 204
    assert (await client.get(f"/v1/jobs/{job_id}")).status_code == 404
    assert list(store.jobs_dir.iterdir()) == []


async def test_delete_running_job_stops_it_at_the_next_chunk(client, volume, store):
    job_id = (await _submit(client, volume, chunks=5, delay=0.2)).json()["id"]
    worker = threading.Thread(target=run_queued, args=(store,))
    worker.start()
    for _ in range(100):
        if store.read(job_id).progress > 0:
            break
        await anyio.sleep(0.05)
    response = await client.delete(f"/v1/jobs/{job_id}")
    assert response.status_code == 202 and response.json()["status"] == "running"
    worker.join()
    final = store.read(job_id)
    assert final.status is JobStatus.cancelled and final.cancel_requested
    assert 0 < final.progress < 1 and final.results == []
    assert not store.outputs_dir(job_id).exists()
    assert "cancelled" in store.log_path(job_id).read_text()


async def test_delete_finished_job_removes_its_files(client, volume, store):
    job_id = (await _submit(client, volume)).json()["id"]
    run_queued(store)
    assert (await client.delete(f"/v1/jobs/{job_id}")).status_code == 204
    assert not store.job_dir(job_id).exists() and list(store.trash_dir.iterdir()) == []
    assert (await client.delete(f"/v1/jobs/{job_id}")).status_code == 404


async def test_unknown_route_and_method_are_problems(client):
    response = await client.get("/v2/jobs")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert "/v1" in response.json()["detail"]
    response = await client.put("/v1/jobs")
    assert response.status_code == 405 and response.json()["title"] == "Method not allowed"


async def test_openapi_documents_the_generated_form(client):
    spec = (await client.get("/openapi.json")).json()
    body = spec["paths"]["/v1/jobs/scale"]["post"]["requestBody"]["content"]["multipart/form-data"]
    props = body["schema"]["properties"]
    assert props["volume"] == {"type": "string", "format": "binary", "x-suffixes": [".nii", ".nii.gz"],
                               "description": "the volume. A file ending in .nii or .nii.gz."}
    assert props["factor"]["type"] == "number" and props["fail"]["enum"] == ["none", "input", "crash", "transient"]
    assert set(body["schema"]["required"]) == {"volume"}
    assert (await client.get("/docs")).status_code == 200


async def test_janitor_removes_jobs_past_the_results_ttl(app_factory, tmp_path, volume):
    from datetime import timedelta

    from service.app import sweep_once

    settings = Settings(data_dir=tmp_path / "data", results_ttl_hours=2)
    app = app_factory(settings)
    store = JobStore(settings.data_dir)

    def finished(job_id, hours):
        store.update(job_id, lambda r: r.model_copy(update={
            "status": JobStatus.succeeded, "finished_at": utc_now() - timedelta(hours=hours)}))

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        old, recent, kept = [(await _submit(client, volume)).json()["id"] for _ in range(3)]
        for job_id, hours in ((old, 3), (recent, 1), (kept, 1)):
            finished(job_id, hours)
        sweep_once(app)
        assert (await client.get(f"/v1/jobs/{old}")).status_code == 404
        assert (await client.get(f"/v1/jobs/{recent}")).json()["status"] == "succeeded"
    # the next scan waits its minute (a TTL counts in hours), then expires what is due
    finished(recent, 3)
    sweep_once(app)
    assert sorted(store.job_ids()) == sorted([recent, kept])
    app.state.expiry_scan_due = 0.0
    sweep_once(app)
    assert store.job_ids() == [kept]
    # 0 keeps finished jobs until they are deleted
    app.state.settings = Settings(data_dir=tmp_path / "data", results_ttl_hours=0)
    app.state.expiry_scan_due = 0.0
    finished(kept, 400 * 24)
    sweep_once(app)
    assert store.job_ids() == [kept]


async def test_one_api_process_of_those_sharing_a_data_volume_sweeps(app_factory, tmp_path):
    from service.app import holds_janitor_lock

    settings = Settings(data_dir=tmp_path / "data", janitor_interval=0.05)
    first, second = app_factory(settings), app_factory(settings)
    async with first.router.lifespan_context(first):
        await anyio.sleep(0.2)
        assert holds_janitor_lock(first) and not holds_janitor_lock(second)
    # the sweeper's lifespan ended (its process exited): the next one to try takes over
    async with second.router.lifespan_context(second):
        assert holds_janitor_lock(second) and not holds_janitor_lock(first)


async def test_janitor_requeues_a_job_whose_worker_died(app_factory, tmp_path, volume):
    settings = Settings(data_dir=tmp_path / "data", janitor_interval=0.1)
    app = app_factory(settings)
    store = JobStore(settings.data_dir)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        job_id = (await _submit(client, volume)).json()["id"]
    queue = settings.data_dir / "broker" / "queue"
    for message in queue.iterdir():  # the worker took the message ...
        message.unlink()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    # ... claimed the job, and died (a SIGKILLed pool process on this host)
    store.update(job_id, lambda r: r.model_copy(update={
        "status": JobStatus.running, "runner": f"{socket.gethostname()}:{dead.stdout.strip()}", "attempts": 1}))
    async with app.router.lifespan_context(app):
        for _ in range(50):
            await anyio.sleep(0.1)
            if store.read(job_id).status is JobStatus.queued:
                break
    record = store.read(job_id)
    assert record.status is JobStatus.queued and record.worker_losses == 1
    messages = list(queue.iterdir())
    assert len(messages) == 1 and job_id in messages[0].read_text()
    assert "runner lost; job is now queued" in store.log_path(job_id).read_text()
