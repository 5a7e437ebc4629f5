"""``GET /v1/jobs/{id}/log``: the lines a job's owner should read, for the owner only; a
fault's traceback stays in the server's log, found by the error id the job reports."""

from __future__ import annotations

import logging
import re

import pytest

from service.settings import Settings
from tests.service.conftest import run_queued
from worker.job_kinds import get_job_kind
from worker.job_runner import RetryLater, run_job
from worker.tasks import is_transient

pytestmark = pytest.mark.anyio

KEY_A, KEY_B = "key-of-lab-a-0123456789", "key-of-lab-b-9876543210"
A, B = {"X-API-Key": KEY_A}, {"X-API-Key": KEY_B}
LINE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z (.*)")


@pytest.fixture
def settings(tmp_path):
    return Settings(data_dir=tmp_path / "data", api_keys=f"{KEY_A}=lab-a,{KEY_B}=lab-b")


async def _submit(client, volume, **fields):
    with open(volume, "rb") as handle:
        response = await client.post("/v1/jobs/scale", files={"volume": (volume.name, handle)},
                                     data={k: str(v) for k, v in fields.items()}, headers=A)
    assert response.status_code == 202, response.text
    return response.json()["id"]


async def _log(client, job_id, headers=A) -> list[str]:
    """The served log as its messages, each line checked to start with its UTC time."""
    response = await client.get(f"/v1/jobs/{job_id}/log", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.headers["cache-control"] == "no-store"
    lines = response.text.splitlines()
    assert all(LINE.fullmatch(line) for line in lines), lines
    return [LINE.fullmatch(line).group(1) for line in lines]


async def test_log_of_a_job_from_queued_to_succeeded(client, volume, store):
    job_id = await _submit(client, volume, factor=3)
    assert await _log(client, job_id) == []
    run_queued(store)
    messages = await _log(client, job_id)
    assert messages[0].startswith("attempt 1 started on ") and messages[0].endswith(store.read(job_id).runner)
    # the job's own message: 5x4x3 values (the volume fixture), its factor
    assert messages[1:] == ["scaled 60 values by 3.0", "succeeded with 2 result files"]
    served = (await client.get(f"/v1/jobs/{job_id}/log", headers=A)).content
    assert served == store.log_path(job_id).read_bytes()


async def test_log_is_the_owners_only(client, volume, store):
    job_id = await _submit(client, volume)
    run_queued(store)
    not_yours = await client.get(f"/v1/jobs/{job_id}/log", headers=B)
    assert not_yours.status_code == 404 and not_yours.headers["content-type"] == "application/problem+json"
    assert not_yours.json()["detail"] == f"no job {job_id!r} here; list your jobs with GET /v1/jobs"
    assert "scaled" not in not_yours.text
    assert (await client.get(f"/v1/jobs/{job_id}/log")).status_code == 401
    assert (await client.get("/v1/jobs/0123456789abcdef0123456789ab/log", headers=A)).status_code == 404
    assert len(await _log(client, job_id)) == 3


async def test_a_line_being_written_is_not_served_half(client, volume, store):
    job_id = await _submit(client, volume)
    store.append_log(job_id, "queue message lost; republished")
    with open(store.log_path(job_id), "a", encoding="utf-8") as handle:
        handle.write("2026-01-05T09:30:01.123456Z attempt 1 sta")
    assert await _log(client, job_id) == ["queue message lost; republished"]


async def test_a_fault_is_one_line_with_an_error_id_and_its_traceback_goes_to_the_server_log(
        client, volume, store, caplog):
    bad = await _submit(client, volume, fail="input")
    crash = await _submit(client, volume, fail="crash")
    with caplog.at_level(logging.ERROR, logger="worker.job_runner"):
        run_queued(store)
    assert (await _log(client, bad))[1:] == ["input error: volume: contains values this job cannot use"]

    messages = await _log(client, crash)
    assert len(messages) == 2
    error_id = re.fullmatch(r"fault of the service \(error id ([0-9a-f]{8})\): RuntimeError: engine exploded",
                            messages[1]).group(1)
    raw = (await client.get(f"/v1/jobs/{crash}/log", headers=A)).text
    assert "Traceback" not in raw and "toy_kind.py" not in raw
    detail = (await client.get(f"/v1/jobs/{crash}", headers=A)).json()["error"]["detail"]
    assert detail == ("RuntimeError: engine exploded. This is a fault of the service, not of your input; "
                      f"report it with job id {crash} and error id {error_id}.")
    [record] = [r for r in caplog.records if error_id in r.getMessage()]
    assert record.getMessage() == f"job {crash} failed (error id {error_id})"
    assert record.exc_info[0] is RuntimeError and "toy_kind.py" in caplog.text


async def test_a_transient_error_is_logged_in_one_line_then_retried(client, volume, store, caplog):
    job_id = await _submit(client, volume, fail="transient")
    run = dict(heartbeat_interval=1.0, heartbeat_timeout=30.0, max_worker_losses=3,
               is_transient=is_transient, retry_allowed=True)
    with caplog.at_level(logging.WARNING, logger="worker.job_runner"), pytest.raises(RetryLater):
        run_job(store, job_id, get_job_kind, **run)
    run_job(store, job_id, get_job_kind, **run)
    messages = await _log(client, job_id)
    assert messages[0].startswith("attempt 1 started") and messages[2].startswith("attempt 2 started")
    error_id = re.fullmatch(r"transient error \(error id ([0-9a-f]{8})\): ConnectionError: GPU node unreachable "
                            r"for now; queued again for a retry", messages[1]).group(1)
    assert messages[3:] == ["scaled 60 values by 2.0", "succeeded with 2 result files"]
    [record] = [r for r in caplog.records if r.name == "worker.job_runner"]
    assert record.getMessage() == f"job {job_id}: transient error (error id {error_id}); queued again"
    assert record.exc_info[0] is ConnectionError


async def test_openapi_documents_the_log_route(client):
    operation = (await client.get("/openapi.json")).json()["paths"]["/v1/jobs/{job_id}/log"]["get"]
    assert list(operation["responses"]["200"]["content"]) == ["text/plain"]
    assert {"404", "401"} <= set(operation["responses"])
    assert "error id" in operation["description"]
