"""The worker ``fibertensor serve`` runs beside its API: kept alive, and its state shown to the API.

A supervisor thread in ``serve`` starts the worker, and when it dies starts it again after a
backoff (1 s, doubling, at most 30 s); a worker that ran for ``_HEALTHY_RUN_SECONDS`` has
its count of failures reset. After ``max_restarts`` failures in a row it gives up, and
``serve`` exits non-zero so that whatever runs it (systemd, Docker, Kubernetes) starts it
again or tells someone.

The supervisor writes the worker's state to ``<data_dir>/run/embedded-worker-<host>-<pid>.json``
(``pid``: the ``serve`` process), which every API process of that ``serve`` (the process
itself, or the API processes it spawned) reads: ``/healthz`` answers 503 and submits 503
while the worker is down. A ``serve --no-worker``, or an API whose ``serve`` died, has no
such file and answers as before.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from service.problems import Problem
from worker.io.atomic import write_bytes_atomic

__all__ = ["WorkerState", "WorkerSupervisor", "read_worker_state", "refuse_while_worker_down"]

logger = logging.getLogger(__name__)

_FIRST_BACKOFF_SECONDS = 1.0
_MAX_BACKOFF_SECONDS = 30.0
# A worker that ran this long before dying was healthy: its next death counts as the first.
_HEALTHY_RUN_SECONDS = 60.0
_STOP_WAIT_SECONDS = 60.0


@dataclass(frozen=True)
class WorkerState:
    """The embedded worker as its supervisor last saw it.

    ``state``: ``running`` (its process is alive), ``restarting`` (it died; started again at
    ``retry_at``, a Unix time) or ``failed`` (it died ``max_restarts`` times in a row; ``serve``
    is exiting)."""

    state: str
    pid: int | None
    restarts: int
    detail: str = ""
    retry_at: float | None = None

    @property
    def alive(self) -> bool:
        return self.state == "running"

    def retry_after(self) -> int:
        """Seconds a client should wait before trying again (at least 1)."""
        wait = (self.retry_at - time.time()) if self.retry_at else _MAX_BACKOFF_SECONDS
        return max(1, int(wait + 0.999))


def _state_file(data_dir: Path, serve_pid: int) -> Path:
    return Path(data_dir) / "run" / f"embedded-worker-{socket.gethostname()}-{serve_pid}.json"


def read_worker_state(data_dir: Path) -> WorkerState | None:
    """The state of the worker this API process's ``serve`` supervises (``serve`` is this
    process, or its parent), or None when there is none."""
    for pid in (os.getpid(), os.getppid()):
        try:
            return WorkerState(**json.loads(_state_file(data_dir, pid).read_bytes()))
        except FileNotFoundError:
            continue
        except (OSError, ValueError, TypeError):
            return None  # being replaced (a rename: cannot be torn) or unreadable: no news
    return None


def refuse_while_worker_down(data_dir: Path) -> None:
    """:class:`Problem` 503 with ``Retry-After`` while this ``serve``'s worker is down: a job
    accepted now would wait for a worker that may not come back."""
    state = read_worker_state(data_dir)
    if state is not None and not state.alive:
        raise Problem(
            503, f"this service's worker is down ({state.detail}; {state.state}); nothing was kept, "
            f"send the job again in {state.retry_after()} s",
            headers={"Retry-After": str(state.retry_after()), "Connection": "close"},
        )


class WorkerSupervisor:
    """Run ``command`` as the embedded worker from a thread of this process; restart it when
    it dies; call ``on_give_up`` after ``max_restarts`` failures in a row."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        data_dir: Path,
        max_restarts: int,
        on_give_up: Callable[[], None],
        env: dict[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ):
        self.command = list(command)
        self.env = env
        self.preexec_fn = preexec_fn
        self.max_restarts = max_restarts
        self.on_give_up = on_give_up
        self.state_file = _state_file(data_dir, os.getpid())
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        self.gave_up = False
        self._process: subprocess.Popen | None = None
        self._stopping = threading.Event()
        self._spawning = threading.Lock()  # stop() never misses a worker being started
        self._thread = threading.Thread(target=self._supervise, name="embedded-worker", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _publish(self, state: WorkerState) -> None:
        try:
            write_bytes_atomic(self.state_file, json.dumps(asdict(state)).encode())
        except OSError as exc:  # a full data volume: the API then sees the last state written
            logger.warning("could not record the embedded worker's state in %s: %s", self.state_file, exc)

    def _supervise(self) -> None:
        # The worker is started from this thread, which lives as long as the worker runs:
        # PR_SET_PDEATHSIG (see preexec_fn in service.cli.server) fires when it ends.
        failures = restarts = 0
        while True:
            with self._spawning:
                if self._stopping.is_set():
                    break
                self._process = subprocess.Popen(self.command, env=self.env, preexec_fn=self.preexec_fn)
            started = time.monotonic()
            self._publish(WorkerState("running", self._process.pid, restarts))
            code = self._process.wait()
            if self._stopping.is_set():
                break
            failures = 1 if time.monotonic() - started >= _HEALTHY_RUN_SECONDS else failures + 1
            detail = f"the worker (pid {self._process.pid}) exited with status {code}"
            if failures > self.max_restarts:
                logger.error("%s, failure %d in a row; giving up (FIBERTENSOR_WORKER_MAX_RESTARTS=%d)",
                             detail, failures, self.max_restarts)
                self.gave_up = True
                self._publish(WorkerState("failed", None, restarts, detail))
                self.on_give_up()
                return
            delay = min(_MAX_BACKOFF_SECONDS, _FIRST_BACKOFF_SECONDS * 2 ** (failures - 1))
            logger.warning("%s; starting it again in %g s (failure %d of at most %d in a row)",
                           detail, delay, failures, self.max_restarts)
            self._publish(WorkerState("restarting", None, restarts, detail, time.time() + delay))
            restarts += 1
            self._stopping.wait(delay)

    def stop(self) -> None:
        """SIGTERM the worker (Celery's warm shutdown: a running job finishes or is handed back),
        SIGKILL it after ``_STOP_WAIT_SECONDS``; remove the state file."""
        with self._spawning:
            self._stopping.set()
            process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=_STOP_WAIT_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=_STOP_WAIT_SECONDS)
        self.state_file.unlink(missing_ok=True)
