"""The FastAPI application: ``create_app(settings)``.

Besides the routes, the app runs a janitor while it lives: every ``janitor_interval``
seconds it requeues (or fails) ``running`` jobs whose worker died, removes jobs past
``results_ttl_hours`` and clears staging folders no upload holds (a crashed API's, or those
whose removal failed); it clears those at start-up too. Of the API processes sharing a data
volume one sweeps at a time (a file lock), not each of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import time
from collections.abc import AsyncIterator, Mapping

from celery import Celery
from kombu.exceptions import OperationalError
from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool

from service import page
from service.api import archives, health, jobs, submit
from service.head import HeadFromGet
from service.problems import install_problem_handlers
from service.security_headers import NoSniff
from service.settings import Settings, get_settings
from service.uploads import UploadSlots
from worker.celery_app import create_celery_app, publish_job, waiting_job_ids
from worker.job_kinds import JobKind, job_kinds
from worker.job_runner import reap_orphans
from worker.job_store import JobStore

__all__ = ["create_app", "celery_app_for", "sweep_once", "holds_janitor_lock"]

logger = logging.getLogger(__name__)

# A results TTL counts in hours: its scan (every job record read, as the orphan sweep reads
# them) runs once a minute at most, not at every janitor pass (docs/decisions/job-listing-cache.md).
_EXPIRY_SCAN_SECONDS = 60.0


def celery_app_for(settings: Settings) -> Celery:
    """The Celery app the API and the workers build from the same settings."""
    return create_celery_app(
        data_dir=settings.data_dir,
        broker_url=settings.broker_url,
        queue=settings.queue,
        concurrency=settings.worker_concurrency,
        warmup_lmax=tuple(settings.worker_warmup_lmax),
        soft_time_limit=settings.job_soft_time_limit,
        time_limit=settings.job_time_limit,
        visibility_timeout=settings.visibility_timeout,
        heartbeat_interval=settings.heartbeat_interval,
        heartbeat_timeout=settings.heartbeat_timeout,
        max_worker_losses=settings.max_worker_losses,
        transient_retries=settings.transient_retries,
        keep_inputs=settings.keep_inputs,
    )


def sweep_once(app: FastAPI) -> list[str]:
    """One janitor pass; returns the ids of jobs it requeued, republished or failed. It also
    removes jobs finished longer than ``results_ttl_hours`` ago, and stale staging folders."""
    settings: Settings = app.state.settings
    store: JobStore = app.state.store
    celery: Celery = app.state.celery
    reaped = reap_orphans(
        store,
        lambda job_id: publish_job(celery, job_id),
        heartbeat_timeout=settings.heartbeat_timeout,
        max_worker_losses=settings.max_worker_losses,
        waiting_ids=lambda: waiting_job_ids(celery),
    )
    if settings.results_ttl_hours > 0 and time.monotonic() >= getattr(app.state, "expiry_scan_due", 0.0):
        app.state.expiry_scan_due = time.monotonic() + _EXPIRY_SCAN_SECONDS
        expired = store.expire_finished(older_than=settings.results_ttl_hours * 3600)
        if expired:
            logger.info("removed %d jobs finished over %g hours ago (FIBERTENSOR_RESULTS_TTL_HOURS)",
                        len(expired), settings.results_ttl_hours)
    store.sweep_staging()
    return reaped


def holds_janitor_lock(app: FastAPI) -> bool:
    """Whether this process is the one that sweeps: the first to take ``janitor.lock`` on the
    data volume keeps it while it lives; the others try again each pass, so one of them takes
    over when it exits. (Each sweep reads every job record: with tens of thousands of jobs,
    one sweeper instead of one per API process.)"""
    if getattr(app.state, "janitor_lock", None) is not None:
        return True
    handle = open(app.state.store.data_dir / "janitor.lock", "a+b")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return False
    app.state.janitor_lock = handle
    return True


def _release_janitor_lock(app: FastAPI) -> None:
    handle = getattr(app.state, "janitor_lock", None)
    app.state.janitor_lock = None
    if handle is not None:
        handle.close()  # releases the lock


async def _janitor(app: FastAPI, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        if not holds_janitor_lock(app):
            continue
        try:
            reaped = await run_in_threadpool(sweep_once, app)
            if reaped:
                logger.warning("requeued or failed jobs whose worker died: %s", ", ".join(reaped))
        except (ConnectionError, OperationalError) as exc:
            # a broker outage: one line a pass, no traceback; the next pass retries
            logger.warning("janitor pass skipped, the broker is unreachable: %s", exc)
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE):
                logger.exception("janitor pass failed")
            else:  # as a broker outage: the next pass retries
                logger.warning("janitor pass skipped, out of file handles: %s", exc)
        except Exception:  # must not end the janitor either; the next pass retries
            logger.exception("janitor pass failed")


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    if holds_janitor_lock(app):
        try:
            removed = await run_in_threadpool(app.state.store.sweep_staging)
        except OSError:
            logger.exception("could not clear the staging folders left behind; the janitor tries again")
        else:
            if removed:
                logger.info("removed %d staging folders left behind by uploads that ended", removed)
    task = asyncio.create_task(_janitor(app, app.state.settings.janitor_interval))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        _release_janitor_lock(app)


def create_app(
    settings: Settings | None = None,
    *,
    kinds: Mapping[str, JobKind] | None = None,
    celery: Celery | None = None,
) -> FastAPI:
    """The API for ``settings`` (default: from the environment), with a submit route for
    each job kind (default: every registered kind)."""
    settings = settings or get_settings()
    kinds = dict(job_kinds() if kinds is None else kinds)
    app = FastAPI(
        title="fibertensor",
        version="0.1.0",
        description="Diffusion-MRI jobs on GPU workers (responses, FODs, fiber peaks, fixels, conv, compression): "
        "upload NIfTI or MRtrix inputs, poll jobs in batches, download the results. Errors are "
        "application/problem+json.",
        lifespan=_lifespan,
    )
    app.state.settings = settings
    app.state.store = JobStore(settings.data_dir)
    app.state.celery = celery or celery_app_for(settings)
    app.state.kinds = kinds
    app.state.uploads = UploadSlots(settings.max_concurrent_uploads, settings.max_concurrent_uploads_per_tenant)
    install_problem_handlers(app)
    app.add_middleware(HeadFromGet)
    app.add_middleware(NoSniff)
    app.include_router(health.router)
    app.include_router(submit.build_submit_router(kinds))
    # before jobs: /v1/jobs/results.zip must not be taken for a job id
    app.include_router(archives.router)
    app.include_router(jobs.router)
    app.include_router(page.router)
    return app
