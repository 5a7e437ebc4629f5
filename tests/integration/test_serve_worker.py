"""``fibertensor serve`` keeps its worker alive: a worker killed once is started again and
``/healthz`` names the new one; killed more often than ``worker_max_restarts`` allows, serve
stops with exit status 1 (for its own supervisor to act on) and removes its state file."""

from __future__ import annotations

import os
import signal

import httpx

from tests.integration.processes import free_port, service_env, start_serve, stop, wait_for


def _worker(base: str) -> dict | None:
    response = httpx.get(f"{base}/healthz", timeout=10)
    return response.json()["worker"] if response.status_code == 200 else None


def test_serve_restarts_its_worker_then_gives_up(tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    serve = start_serve(service_env(tmp_path / "data", worker_warmup_lmax="", worker_max_restarts=1), log, port)
    try:
        first = _worker(base)
        assert first["state"] == "running" and first["restarts"] == 0
        os.kill(first["pid"], signal.SIGKILL)
        second = wait_for(lambda: (w := _worker(base)) and w["pid"] != first["pid"] and w, 30, "the worker's restart")
        assert second["state"] == "running" and second["restarts"] == 1
        wait_for(lambda: httpx.get(f"{base}/readyz", timeout=10).status_code == 200, 60, "the new worker to answer",
                 interval=0.5)

        os.kill(second["pid"], signal.SIGKILL)  # within a minute of its start: a second failure in a row
        assert serve.wait(timeout=60) == 1
    finally:
        stop(serve, timeout=10)
    text = log.read_text()
    assert f"the worker (pid {first['pid']}) exited with status -9; starting it again in 1 s" in text
    assert f"the worker (pid {second['pid']}) exited with status -9, failure 2 in a row; giving up" in text
    assert not list((tmp_path / "data" / "run").iterdir())
