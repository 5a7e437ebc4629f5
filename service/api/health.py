"""Liveness and readiness probes (outside /v1 and without authentication, for orchestrators)."""

from __future__ import annotations

from celery import Celery
from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from service.deps import CeleryDep, SettingsDep
from service.problems import PROBLEM_RESPONSES, Problem
from service.schemas import HealthOut, ReadyOut

__all__ = ["router"]

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=HealthOut, summary="The API process is alive")
async def healthz() -> HealthOut:
    return HealthOut(status="ok")


def _probe(celery: Celery) -> list[str]:
    with celery.connection_for_write() as connection:
        connection.ensure_connection(max_retries=1, timeout=3)
    replies = celery.control.ping(timeout=1.0) or []
    return sorted(name for reply in replies for name in reply)


@router.get(
    "/readyz",
    response_model=ReadyOut,
    responses={503: PROBLEM_RESPONSES[503]},
    summary="The broker is reachable and at least one worker answers",
)
async def readyz(settings: SettingsDep, celery: CeleryDep) -> ReadyOut:
    broker = "embedded" if settings.embedded_broker else "redis"
    try:
        workers = await run_in_threadpool(_probe, celery)
    except Exception as exc:
        raise Problem(
            503,
            f"the {broker} broker is unreachable ({type(exc).__name__}: {exc}); check "
            "FIBERTENSOR_BROKER_URL and that Redis is running",
        ) from None
    if not workers:
        raise Problem(
            503,
            f"the {broker} broker is up but no worker answered; start one with "
            "`fibertensor worker` (same FIBERTENSOR_BROKER_URL and data dir)",
        )
    return ReadyOut(status="ready", broker=broker, workers=workers)
