"""The worker ``fibertensor serve`` runs beside its API (service/embedded_worker.py): started
again when it dies, given up on after ``worker_max_restarts`` failures in a row; while it is
down ``/healthz`` and submits answer 503 with Retry-After."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from service.embedded_worker import WorkerSupervisor, read_worker_state
from tests.integration.processes import wait_for
from tests.service.conftest import leftovers


def _state(data_dir: Path) -> dict | None:
    state = read_worker_state(data_dir)
    return None if state is None else {"state": state.state, "pid": state.pid, "restarts": state.restarts}


def test_a_killed_worker_is_started_again(tmp_path):
    supervisor = WorkerSupervisor([sys.executable, "-c", "import time; time.sleep(60)"], data_dir=tmp_path,
                                  max_restarts=3, on_give_up=lambda: None)
    supervisor.start()
    try:
        first = wait_for(lambda: _state(tmp_path), 10, "the worker to start")
        assert first["state"] == "running" and first["restarts"] == 0
        os.kill(first["pid"], signal.SIGKILL)
        down = wait_for(lambda: (s := read_worker_state(tmp_path)) and not s.alive and s, 10, "the death to show")
        assert down.state == "restarting" and down.detail.endswith("exited with status -9")
        assert down.retry_after() == 1  # the first backoff is 1 s (never less than 1)
        again = wait_for(lambda: (s := _state(tmp_path))["state"] == "running" and s, 10, "the restart")
        assert again["restarts"] == 1 and again["pid"] != first["pid"]
        os.kill(again["pid"], 0)  # alive
    finally:
        supervisor.stop()
    assert read_worker_state(tmp_path) is None  # serve's exit removes its state file
    with pytest.raises(ProcessLookupError):
        os.kill(again["pid"], 0)


def test_a_worker_that_keeps_dying_is_given_up_on(tmp_path):
    gave_up = threading.Event()
    supervisor = WorkerSupervisor([sys.executable, "-c", "raise SystemExit(3)"], data_dir=tmp_path,
                                  max_restarts=2, on_give_up=gave_up.set)
    supervisor.start()
    try:
        assert gave_up.wait(30)  # three runs, with 1 s and 2 s between them
        state = json.loads(supervisor.state_file.read_text())
        assert supervisor.gave_up
        assert state == {"state": "failed", "pid": None, "restarts": 2, "retry_at": None,
                         "detail": state["detail"]}
        assert state["detail"].endswith("exited with status 3")
    finally:
        supervisor.stop()


def _write_state(data_dir: Path, **state) -> None:
    """The state file ``serve`` writes, as if this test process were ``serve``."""
    path = data_dir / "run" / f"embedded-worker-{socket.gethostname()}-{os.getpid()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"pid": None, "restarts": 0, "detail": "", "retry_at": None, **state}))


@pytest.mark.anyio
async def test_healthz_and_submits_answer_503_while_the_worker_is_down(client, settings, store, volume):
    _write_state(settings.data_dir, state="running", pid=1234)
    health = await client.get("/healthz")
    assert health.status_code == 200
    assert health.json() == {"status": "ok", "worker": {"state": "running", "pid": 1234, "restarts": 0, "detail": ""}}

    _write_state(settings.data_dir, state="restarting", restarts=2, detail="the worker (pid 1234) exited with status 1",
                 retry_at=time.time() + 30)
    health = await client.get("/healthz")
    assert health.status_code == 503 and health.headers["content-type"] == "application/problem+json"
    assert 1 <= int(health.headers["retry-after"]) <= 30
    assert health.json()["worker"] == {"state": "restarting", "pid": None, "restarts": 2,
                                       "detail": "the worker (pid 1234) exited with status 1"}
    with open(volume, "rb") as handle:
        refused = await client.post("/v1/jobs/scale", files={"volume": ("v.nii.gz", handle)})
    assert refused.status_code == 503 and 1 <= int(refused.headers["retry-after"]) <= 30
    assert refused.headers["content-type"] == "application/problem+json"
    assert "worker is down" in refused.json()["detail"] and "nothing was kept" in refused.json()["detail"]
    assert leftovers(store) == []

    _write_state(settings.data_dir, state="running", pid=1235, restarts=3)
    with open(volume, "rb") as handle:
        accepted = await client.post("/v1/jobs/scale", files={"volume": ("v.nii.gz", handle)})
    assert accepted.status_code == 202
