"""Stalled uploads against a real API process, over real sockets on loopback.

Clients that send the headers and half a body, then nothing: each API process takes at most
``max_concurrent_uploads`` (the next is answered 503) and ``max_concurrent_uploads_per_tenant``
of one tenant (429), both with Retry-After; a stalled one is answered 408 and closed after
``upload_idle_timeout``; and an API out of file handles answers 503, not 500. No staging
folder stays behind, even when removing one failed for want of file handles (the janitor
removes it).
"""

from __future__ import annotations

import json
import resource
import socket
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.integration.processes import free_port, service_env, start_serve, stop, wait_for
from worker.job_store import JobStore
from worker.sample import write_sample

_BOUNDARY = "stalledupload"
_KEYS = {"lab-a": "key-a", "lab-b": "key-b", "lab-c": "key-c"}


def start_api(env: dict[str, str], log: Path) -> tuple[subprocess.Popen, int]:
    """``fibertensor serve --no-worker`` (the API alone), once it answers /healthz."""
    port = free_port()
    return start_serve(env, log, port, "--no-worker", until="/healthz"), port


def half_upload(port: int, key: str) -> socket.socket:
    """A peaks upload that announces 1 MiB and sends its headers and the first 4 KiB of it."""
    head = (f"POST /v1/jobs/peaks HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-API-Key: {key}\r\n"
            f"Content-Type: multipart/form-data; boundary={_BOUNDARY}\r\nContent-Length: {1 << 20}\r\n\r\n"
            f"--{_BOUNDARY}\r\nContent-Disposition: form-data; name=\"fod\"; filename=\"fod.nii\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(head + bytes(4096))
    return sock


def answer(sock: socket.socket, timeout: float) -> tuple[int, dict[str, str], dict] | None:
    """The response on ``sock`` once the server has closed the connection (None if it sends
    nothing within ``timeout``): status, headers (lower-case names), body as JSON."""
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        if not data:
            return None
        raise AssertionError(f"the server answered but kept the connection open: {data[:300]!r}") from None
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, json.loads(body)


def assert_refused(response, status: int, words: str) -> None:
    """A problem+json refusal with Retry-After, whose detail says ``words``."""
    assert response is not None, "no answer"
    code, headers, body = response
    assert code == status, body
    assert headers["content-type"] == "application/problem+json" and int(headers["retry-after"]) > 0
    assert words in body["detail"], body


def submit_whole(port: int, key: str, sample: dict[str, Path]) -> httpx.Response:
    with open(sample["fod"], "rb") as fod:
        return httpx.post(f"http://127.0.0.1:{port}/v1/jobs/peaks", files={"fod": ("fod.nii.gz", fod)},
                          headers={"X-API-Key": key}, timeout=30)


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> dict[str, Path]:
    return write_sample(tmp_path_factory.mktemp("sample"), shape=(4, 4, 3), seed=1)


def _staged(store: JobStore) -> int:
    return len(list(store.staging_dir.iterdir()))


def test_stalled_uploads_are_capped_then_timed_out(tmp_path, sample, request):
    data_dir = tmp_path / "data"
    env = service_env(data_dir, api_keys=",".join(f"{k}={t}" for t, k in _KEYS.items()), upload_idle_timeout=1.5,
                      max_concurrent_uploads=3, max_concurrent_uploads_per_tenant=2, janitor_interval=0.5)
    api, port = start_api(env, tmp_path / "api.log")
    request.addfinalizer(lambda: stop(api, timeout=10))
    store = JobStore(data_dir)

    held = [half_upload(port, _KEYS["lab-a"]), half_upload(port, _KEYS["lab-a"])]
    wait_for(lambda: _staged(store) == 2, 10, "two uploads of lab-a under way")
    third = answer(half_upload(port, _KEYS["lab-a"]), 10)
    assert_refused(third, 429, "2 uploads of yours")
    assert third[2]["title"] == "Too many uploads"

    held.append(half_upload(port, _KEYS["lab-b"]))
    wait_for(lambda: _staged(store) == 3, 10, "lab-b's upload under way")
    assert_refused(answer(half_upload(port, _KEYS["lab-c"]), 10), 503, "3 uploads at once (FIBERTENSOR_MAX_CONCURRENT_UPLOADS); nothing was kept")

    for sock in held:  # nothing more is sent: each is answered 408 and closed
        code, headers, body = answer(sock, 30)
        assert code == 408 and headers["content-type"] == "application/problem+json"
        assert "sent nothing for 1.5 s" in body["detail"]
        sock.close()
    assert _staged(store) == 0 and list(store.jobs_dir.iterdir()) == []

    accepted = submit_whole(port, _KEYS["lab-c"], sample)  # the slots are free again
    assert accepted.status_code == 202, accepted.text
    assert [p.name for p in store.jobs_dir.iterdir()] == [accepted.json()["id"]] and _staged(store) == 0


def test_out_of_file_handles_is_503_and_the_janitor_removes_what_is_left(tmp_path, sample, request):
    """The API's open-file limit lowered (prlimit) to two handles above what it holds: the
    upload's connection takes one, its staging folder's lock the other, and the file it would
    write cannot be opened: 503 with Retry-After, never 500. Removing that staging folder needs
    a handle too and fails; the janitor removes it once handles are free again."""
    data_dir = tmp_path / "data"
    env = service_env(data_dir, upload_idle_timeout=3.0, janitor_interval=2.0)
    api, port = start_api(env, tmp_path / "api.log")
    request.addfinalizer(lambda: stop(api, timeout=10))
    store = JobStore(data_dir)

    limits = resource.prlimit(api.pid, resource.RLIMIT_NOFILE)
    held, answers = [], []
    for _ in range(5):  # again if a janitor pass or the last held upload took a handle meanwhile
        open_fds = [int(p.name) for p in (Path("/proc") / str(api.pid) / "fd").iterdir()]
        resource.prlimit(api.pid, resource.RLIMIT_NOFILE, (max(max(open_fds) + 1, len(open_fds) + 2), limits[1]))
        try:
            sock = half_upload(port, "")
            response = answer(sock, 1.0)
        finally:
            resource.prlimit(api.pid, resource.RLIMIT_NOFILE, limits)
        if response is None:
            held.append(sock)
            continue
        answers.append(response)
        if response[0] == 503:
            break
    assert answers, "no upload was refused: the file handle limit was not reached"
    assert [code for code, _, _ in answers] == [503] * len(answers)
    assert_refused(answers[-1], 503, "too many files and connections open to take this request now; nothing was kept")

    for sock in held:
        assert answer(sock, 30)[0] == 408
        sock.close()
    wait_for(lambda: _staged(store) == 0, 20, "the janitor to remove the staging folders left behind")
    accepted = submit_whole(port, "", sample)
    assert accepted.status_code == 202, accepted.text
