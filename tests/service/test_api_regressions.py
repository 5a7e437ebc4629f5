"""An unknown job kind is 404, HEAD on a result is 200 with its headers (and
on every GET route, the GET's status and headers),
/readyz answers from a recent check without kombu warnings, a client hanging up mid-upload is
one WARNING line, and the SH volume-count message is a sentence."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from tests.service.conftest import leftovers, run_queued
from tests.service.toy_kind import write_volume

pytestmark = pytest.mark.anyio


async def test_unknown_job_kind_is_404_naming_the_kinds(client, store):
    response = await client.post("/v1/jobs/fibres", files={"fod": ("f.nii.gz", b"x" * 100)})
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["title"] == "Unknown job kind"
    assert problem["detail"].startswith("there is no job kind 'fibres'; submit to one of: ")
    assert "POST /v1/jobs/peaks" in problem["detail"] and "POST /v1/jobs/scale" in problem["detail"]
    assert leftovers(store) == []
    assert client.app.openapi_schema is None  # answered from the registry and the route table
    # a path that is a route of its own is still 405 with its methods
    response = await client.post("/v1/jobs/results.zip")
    assert response.status_code == 405 and response.headers["allow"] == "GET, HEAD"


async def test_head_on_a_result_gives_its_headers(client, volume, store):
    job = (await client.post("/v1/jobs/scale", files={"volume": (volume.name, volume.read_bytes())})).json()
    run_queued(store)
    result = (await client.get(f"/v1/jobs/{job['id']}")).json()["results"][0]
    head = await client.head(result["url"])
    assert head.status_code == 200
    assert head.content == b""
    assert int(head.headers["content-length"]) == result["bytes"]
    assert head.headers["etag"] == f'"{result["sha256"]}"'
    missing = await client.head(f"/v1/jobs/{job['id']}/results/nothing.nii.gz")
    assert missing.status_code == 404


async def test_head_answers_every_get_route_as_its_get_without_the_body(client, volume, store):
    """HEAD was 405 on every GET route but a result file's, while 405's Allow named it."""
    job = (await client.post("/v1/jobs/scale", files={"volume": (volume.name, volume.read_bytes())},
                             data={"label": "b"})).json()
    run_queued(store)
    for path in ("/healthz", "/", "/v1/jobs?label=b", f"/v1/jobs/{job['id']}", f"/v1/jobs/{job['id']}/log",
                 f"/v1/jobs/{job['id']}/results.zip", "/v1/jobs/results.zip?label=b", "/v1/jobs/nothing"):
        get, head = await client.get(path), await client.head(path)
        assert (head.status_code, head.content) == (get.status_code, b""), path
        assert head.headers["content-type"] == get.headers["content-type"], path
        if "content-length" in get.headers:
            assert head.headers["content-length"] == get.headers["content-length"], path


async def test_readyz_answers_from_a_recent_check_without_kombu_warnings(client, caplog):
    caplog.set_level(logging.INFO)
    first = await client.get("/readyz")
    second = await client.get("/readyz")
    assert first.status_code == second.status_code == 503  # no worker here
    assert first.headers["content-type"] == "application/problem+json"
    # the second answer is the first check, not a new broadcast
    assert first.json()["checked_at"] == second.json()["checked_at"]
    assert not [r for r in caplog.records if "No hostname was supplied" in r.getMessage()]


async def test_client_hanging_up_mid_upload_is_one_warning(client, store, caplog, tmp_path):
    volume = write_volume(tmp_path / "v.nii", np.ones((16, 16, 16), np.float32))
    boundary = "b0undary"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"volume\"; filename=\"v.nii\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode()
    messages = [
        {"type": "http.request", "body": head + volume.read_bytes()[:5000], "more_body": True},
        {"type": "http.disconnect"},
    ]
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/v1/jobs/scale", "raw_path": b"/v1/jobs/scale", "query_string": b"",
        "root_path": "", "server": ("test", 80), "client": ("127.0.0.1", 5000),
        "headers": [(b"host", b"test"), (b"content-type", f"multipart/form-data; boundary={boundary}".encode()),
                    (b"content-length", b"99999")],
    }
    sent = []

    async def receive():
        return messages.pop(0)

    async def send(message):
        sent.append(message)

    caplog.set_level(logging.INFO)
    await client.app(scope, receive, send)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        "client disconnected during POST /v1/jobs/scale; its upload was discarded"
    ]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert sent[0]["status"] == 400
    assert leftovers(store) == []


async def test_sh_volume_count_message_is_a_sentence(client, tmp_path):
    wrong = write_volume(tmp_path / "fod7.nii.gz", np.ones((4, 4, 4, 7), np.float32))
    response = await client.post("/v1/jobs/peaks", files={"fod": (wrong.name, wrong.read_bytes())})
    assert response.status_code == 422
    assert response.json()["detail"] == (
        "the FOD file 'fod7.nii.gz' has 7 volumes: 7 SH coefficients are not an even-order SH series, "
        "which has one of 6 (lmax 2), 15 (lmax 4), 28 (lmax 6), 45 (lmax 8), 66 (lmax 10), 91 (lmax 12) "
        "coefficients. Pass an FOD image (e.g. from dwi2fod), not the DWI"
    )


async def test_what_the_schema_tests_found(client):
    """405 names every method of the path (GET and DELETE of a job are two routes); an unknown
    query parameter of the job list is refused rather than ignored."""
    response = await client.put("/v1/jobs/0123456789abcdef0123456789ab")
    assert response.status_code == 405
    assert response.headers["allow"] == "DELETE, GET, HEAD"
    assert response.json()["detail"].endswith("use DELETE, GET, HEAD")
    response = await client.get("/v1/jobs", params={"staus": "failed"})
    assert response.status_code == 422
    assert response.json()["detail"] == (
        "unknown query parameter(s) 'staus'; the parameters are cursor, label, limit, status"
    )
