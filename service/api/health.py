"""Liveness and readiness probes (outside /v1 and without authentication, for orchestrators).

``/healthz`` also answers for the worker ``fibertensor serve`` runs beside the API
(:mod:`service.embedded_worker`): 503 while it is down.

Asking the workers whether they are there takes a broadcast and a wait for replies (about a
second), so ``/readyz`` answers from the last check while it is younger than
``_FRESH_SECONDS``, serves an older one (up to ``_STALE_SECONDS``) while a new check runs in
the background, and only checks in line when there is none that recent.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import datetime

from celery import Celery
from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from service.deps import CeleryDep, SettingsDep
from service.embedded_worker import read_worker_state
from service.problems import PROBLEM_RESPONSES, Problem
from service.schemas import HealthOut, ReadyOut, WorkerStateOut
from worker.job_store import utc_now

__all__ = ["router"]

router = APIRouter(tags=["health"])

_FRESH_SECONDS = 5.0
_STALE_SECONDS = 30.0


@router.get(
    "/healthz",
    response_model=HealthOut,
    response_model_exclude_none=True,
    responses={503: PROBLEM_RESPONSES[503]},
    summary="The API process is alive, and so is the worker `fibertensor serve` runs beside it",
)
async def healthz(settings: SettingsDep) -> HealthOut:
    state = read_worker_state(settings.data_dir)
    if state is None:
        return HealthOut(status="ok")
    worker = WorkerStateOut(state=state.state, pid=state.pid, restarts=state.restarts, detail=state.detail)
    if not state.alive:
        raise Problem(
            503, f"the worker `fibertensor serve` runs is down ({state.detail}; {state.state}); jobs are "
            "not run and submits are refused until it is back",
            headers={"Retry-After": str(state.retry_after())}, worker=worker.model_dump(),
        )
    return HealthOut(status="ok", worker=worker)


@dataclass(frozen=True)
class _Check:
    """One look at the broker: the workers that answered, or why the broker could not be used."""

    at: float  # time.monotonic()
    checked_at: datetime
    workers: tuple[str, ...]
    error: str | None


def _probe(celery: Celery) -> _Check:
    at, checked_at = time.monotonic(), utc_now()
    try:
        with celery.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, timeout=3)
        replies = celery.control.ping(timeout=1.0) or []
    except Exception as exc:
        return _Check(at, checked_at, (), f"{type(exc).__name__}: {exc}")
    return _Check(at, checked_at, tuple(sorted(name for reply in replies for name in reply)), None)


class _Readiness:
    """The last check and the one under way, shared by the requests of one app."""

    def __init__(self) -> None:
        self.last: _Check | None = None
        self.running: asyncio.Task | None = None

    def _start(self, celery: Celery) -> asyncio.Task:
        """The check under way, or a new one."""
        if self.running is None or self.running.done():
            self.running = asyncio.ensure_future(run_in_threadpool(_probe, celery))
            self.running.add_done_callback(self._keep)
        return self.running

    def _keep(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is None:
            self.last = task.result()

    async def current(self, celery: Celery) -> _Check:
        age = time.monotonic() - self.last.at if self.last else float("inf")
        if age > _STALE_SECONDS:
            # shielded: a client that hangs up does not cancel the check others wait for
            return await asyncio.shield(self._start(celery))
        if age > _FRESH_SECONDS:
            self._start(celery)
        return self.last


@router.get(
    "/readyz",
    response_model=ReadyOut,
    responses={503: PROBLEM_RESPONSES[503]},
    summary="The broker is reachable and at least one worker answers",
)
async def readyz(request: Request, settings: SettingsDep, celery: CeleryDep) -> ReadyOut:
    state = request.app.state
    if not hasattr(state, "readiness"):
        state.readiness = _Readiness()
    check = await state.readiness.current(celery)
    broker = "embedded" if settings.embedded_broker else "redis"
    checked_at = check.checked_at.isoformat()
    if check.error is not None:
        remedy = ("that the data volume (FIBERTENSOR_DATA_DIR) is writable and not full" if settings.embedded_broker
                  else "FIBERTENSOR_BROKER_URL and that Redis is running")
        raise Problem(503, f"the {broker} broker is unreachable ({check.error}); check {remedy}",
                      checked_at=checked_at)
    if not check.workers:
        raise Problem(
            503,
            f"the {broker} broker is up but no worker answered; start one with "
            "`fibertensor worker` (same FIBERTENSOR_BROKER_URL and data dir)",
            checked_at=checked_at,
        )
    return ReadyOut(status="ready", broker=broker, workers=list(check.workers), checked_at=check.checked_at)
