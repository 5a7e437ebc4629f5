"""Real processes for integration tests: a redis-server on a free port, Celery workers and
``fibertensor serve``, each in its own session so a test can SIGKILL a whole worker. A free
port and stopping a process are the benchmarks' (:mod:`bench.processes`), which start the
service's processes the same way."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.processes import free_port, stop

__all__ = ["free_port", "start_redis", "start_worker", "start_serve", "serve_in_thread", "stop", "wait_for", "REPO"]

REPO = Path(__file__).resolve().parents[2]


def wait_for(predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def start_redis(folder: Path, attempts: int = 3) -> tuple[subprocess.Popen, str]:
    """A private redis-server on a free port (tests/conftest.py checks it is installed).

    Another process can take the port between :func:`free_port` and redis binding it
    (xdist workers start servers at the same time): then this one exits and it tries a new
    port; the server that answers must report this process's id, not another test's.
    """
    folder.mkdir(parents=True, exist_ok=True)
    for _ in range(attempts):
        port = free_port()
        proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(folder)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )

        def answers() -> str:
            if proc.poll() is not None:
                return "exited"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                    sock.sendall(b"INFO server\r\n")
                    return "ready" if f"process_id:{proc.pid}\r\n".encode() in sock.recv(65536) else ""
            except OSError:
                return ""

        if wait_for(answers, 15, "redis-server to answer") == "ready":
            return proc, f"redis://127.0.0.1:{port}/0"
    raise AssertionError(f"redis-server exited at start {attempts} times (ports taken?)")


def service_env(data_dir: Path, broker_url: str = "", **settings: object) -> dict[str, str]:
    env = dict(os.environ, FIBERTENSOR_DATA_DIR=str(data_dir), FIBERTENSOR_BROKER_URL=broker_url,
               PYTHONPATH=str(REPO))
    env.update({f"FIBERTENSOR_{k.upper()}": str(v) for k, v in settings.items()})
    return env


def start_worker(env: dict[str, str], log: Path, node: str) -> subprocess.Popen:
    """``fibertensor worker`` with the test job kind, waiting until it answers a ping."""
    handle = open(log, "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.service.toy_worker", "--hostname", node, "--log-level", "info"],
        cwd=REPO, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True,
    )
    handle.close()

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"worker exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        return b"ready." in log.read_bytes()

    wait_for(ready, 60, f"worker {node} to start")
    return proc


def start_serve(env: dict[str, str], log: Path, port: int, *options: str, until: str = "/readyz") -> subprocess.Popen:
    """``fibertensor serve [options]`` (API + embedded worker unless ``--no-worker``), waiting
    until ``until`` (/readyz: ready; /healthz for an API without workers) answers 200."""
    import httpx

    handle = open(log, "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "service", "serve", "--port", str(port), *options],
        cwd=REPO, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True,
    )
    handle.close()

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            return httpx.get(f"http://127.0.0.1:{port}{until}", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    wait_for(ready, 90, "fibertensor serve to be ready", interval=0.5)
    return proc


@contextmanager
def serve_in_thread(app) -> Iterator[str]:
    """The ASGI ``app`` under uvicorn in a daemon thread of this process; yields its base URL
    once the socket is bound (asking before that is refused, which a loaded CI box shows)."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()

    def started() -> bool:
        if not thread.is_alive() and not server.started:
            raise AssertionError("the in-process API stopped before it started (see the log above)")
        return server.started

    try:
        wait_for(started, 60, "the in-process API to listen")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


