"""``results.zip`` of a job and of a batch: the same bytes as the single downloads, streamed,
and only for the caller's tenant."""

from __future__ import annotations

import hashlib
import io
import zipfile

import pytest

from service.api.archives import _zip_stream
from service.settings import Settings
from tests.service.conftest import run_queued

pytestmark = pytest.mark.anyio

KEY_A, KEY_B = "key-of-lab-a-0123456789", "key-of-lab-b-9876543210"
A, B = {"X-API-Key": KEY_A}, {"X-API-Key": KEY_B}


@pytest.fixture
def settings(tmp_path):
    return Settings(data_dir=tmp_path / "data", api_keys=f"{KEY_A}=lab-a,{KEY_B}=lab-b")


async def _submit(client, volume, headers, filename=None, **fields):
    with open(volume, "rb") as handle:
        response = await client.post("/v1/jobs/scale", files={"volume": (filename or volume.name, handle)},
                                     data={k: str(v) for k, v in fields.items()}, headers=headers)
    assert response.status_code == 202, response.text
    return response.json()["id"]


async def _results(client, job_id, headers):
    job = (await client.get(f"/v1/jobs/{job_id}", headers=headers)).json()
    return {r["name"]: (await client.get(r["url"], headers=headers)).content for r in job["results"]}


async def test_job_zip_holds_the_result_bytes(client, volume, store):
    job_id = await _submit(client, volume, A, factor=3, label="run <1>")
    run_queued(store)
    response = await client.get(f"/v1/jobs/{job_id}/results.zip", headers=A)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/zip"
    assert "content-length" not in response.headers  # streamed, chunked
    assert response.headers["content-disposition"] == (
        f"attachment; filename=\"run_1_-{job_id}.zip\"; filename*=UTF-8''run%20%3C1%3E-{job_id}.zip"
    )
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        assert archive.testzip() is None
        members = {name: archive.read(name) for name in archive.namelist()}
    assert members == await _results(client, job_id, A)
    assert set(members) == {"scaled.nii.gz", "scaled.json"}


async def test_batch_zip_has_a_folder_per_succeeded_job_named_after_its_input(client, volume, store):
    uploads = {"sub-01_T1w.nii.gz": "sub-01_T1w", "sub-02_T1w.nii.gz": "sub-02_T1w",
               "sub-01_T1w.NII.GZ": "sub-01_T1w-2", "C:\\scans\\sub-01_T1w.nii.gz": "sub-01_T1w-3"}
    ids = [await _submit(client, volume, A, name, factor=f, label="batch") for f, name in enumerate(uploads, 2)]
    await _submit(client, volume, A, label="other")
    failing = await _submit(client, volume, A, "sub-03_T1w.nii.gz", label="batch", fail="input")
    run_queued(store)
    assert store.read(failing).status.value == "failed"
    response = await client.get("/v1/jobs/results.zip", params={"label": "batch"}, headers=A)
    assert response.status_code == 200
    folders = list(uploads.values())
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        names = archive.namelist()
        assert names == [f"{folder}/{name}" for folder in folders for name in ("scaled.nii.gz", "scaled.json")]
        for job_id, folder in zip(ids, folders):
            expected = await _results(client, job_id, A)
            assert {n: archive.read(f"{folder}/{n}") for n in expected} == expected


async def test_batch_zip_names_a_job_recorded_without_input_names_by_its_id(client, volume, store):
    job_id = await _submit(client, volume, A, "sub-01_T1w.nii.gz", label="old")
    store.update(job_id, lambda record: record.model_copy(update={"input_names": {}}))
    run_queued(store)
    response = await client.get("/v1/jobs/results.zip", params={"label": "old"}, headers=A)
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        assert archive.namelist() == [f"{job_id}/scaled.nii.gz", f"{job_id}/scaled.json"]


async def test_zips_keep_tenants_apart_and_explain_empty_answers(client, volume, store):
    job_id = await _submit(client, volume, A, label="batch")
    queued = await _submit(client, volume, A, label="later")
    # run only the first job
    from worker.job_runner import run_job
    from worker.job_kinds import get_job_kind

    run_job(store, job_id, get_job_kind, heartbeat_interval=1.0, heartbeat_timeout=30.0, max_worker_losses=3)
    not_yours = await client.get(f"/v1/jobs/{job_id}/results.zip", headers=B)
    assert not_yours.status_code == 404 and not_yours.headers["content-type"] == "application/problem+json"
    empty = await client.get("/v1/jobs/results.zip", params={"label": "batch"}, headers=B)
    assert empty.status_code == 404 and "no succeeded jobs labelled 'batch'" in empty.json()["detail"]
    assert (await client.get("/v1/jobs/results.zip", params={"label": "batch"})).status_code == 401
    assert (await client.get(f"/v1/jobs/{job_id}/results.zip", headers={"X-API-Key": "nope"})).status_code == 401
    pending = await client.get(f"/v1/jobs/{queued}/results.zip", headers=A)
    assert pending.status_code == 409 and "it is queued" in pending.json()["detail"]
    missing_label = await client.get("/v1/jobs/results.zip", headers=A)
    assert missing_label.status_code == 422 and "label" in missing_label.json()["detail"]


def test_zip_stream_yields_chunks_that_make_a_valid_zip_with_zip64_only_when_needed(tmp_path):
    big = tmp_path / "big.bin"
    big.write_bytes(bytes(range(256)) * 20_000)  # 5.1 MB: several 1 MiB chunks
    small = tmp_path / "small.txt"
    small.write_text("hello")
    chunks = list(_zip_stream([("a/big.bin", big), ("small.txt", small)]))
    assert len(chunks) >= 6 and max(len(c) for c in chunks) <= (1 << 20) + 4096
    with zipfile.ZipFile(io.BytesIO(b"".join(chunks))) as archive:
        assert archive.testzip() is None
        assert hashlib.sha256(archive.read("a/big.bin")).digest() == hashlib.sha256(big.read_bytes()).digest()
        assert archive.read("small.txt") == b"hello"
        assert all(info.extra == b"" for info in archive.infolist())  # no zip64 extra for small files
