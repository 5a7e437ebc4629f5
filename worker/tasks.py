"""The Celery task that runs a job, what counts as a transient error, and the warm-up of
each pool process.

CUDA is never touched here at import time: each pool process initialises it when it starts
(:func:`warm_up_pool_process`) or on its first job, never the parent that forks the pool.
"""

from __future__ import annotations

import errno
import logging

from billiard.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded
from celery import Task, current_app, shared_task
from celery.signals import worker_process_init

from worker.celery_app import RUN_JOB_TASK
from worker.job_kinds import get_job_kind
from worker.job_runner import RetryLater, fail_job, run_job
from worker.job_store import JobNotFound, JobStore

__all__ = ["run_job_task", "is_transient", "warm_up_pool_process"]

logger = logging.getLogger(__name__)

# I/O errors a shared data volume (NFS) raises while it recovers.
_TRANSIENT_ERRNOS = frozenset({errno.EIO, errno.ESTALE, errno.EAGAIN, errno.ETIMEDOUT})


def is_transient(exc: BaseException) -> bool:
    """Errors that a later attempt may not hit: connections, timeouts, flaky shared storage,
    a GPU whose memory another process holds for now. Everything else fails the job at once."""
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    if isinstance(exc, OSError) and exc.errno in _TRANSIENT_ERRNOS:
        return True
    return "CUDA_ERROR_OUT_OF_MEMORY" in str(exc)


class _JobTask(Task):
    def on_failure(self, exc, task_id, args, kwargs, einfo):
        # Called in the worker's main process when the hard time limit killed the pool
        # process, which then could not record anything itself.
        if isinstance(exc, TimeLimitExceeded) and args:
            store = JobStore(self.app.conf.fibertensor_data_dir)
            try:
                fail_job(
                    store,
                    args[0],
                    "Time limit exceeded",
                    f"the job was killed after {self.app.conf.task_time_limit} s "
                    "(FIBERTENSOR_JOB_TIME_LIMIT); split the input or use a mask, or ask "
                    "the operator to raise the limit.",
                )
            except JobNotFound:
                pass


@shared_task(bind=True, base=_JobTask, name=RUN_JOB_TASK, max_retries=None)
def run_job_task(self: Task, job_id: str) -> None:
    """Run job ``job_id`` from its folder; the message carries nothing else."""
    conf = self.app.conf
    store = JobStore(conf.fibertensor_data_dir)
    try:
        run_job(
            store,
            job_id,
            get_job_kind,
            heartbeat_interval=conf.fibertensor_heartbeat_interval,
            heartbeat_timeout=conf.fibertensor_heartbeat_timeout,
            max_worker_losses=conf.fibertensor_max_worker_losses,
            is_transient=is_transient,
            retry_allowed=self.request.retries < conf.fibertensor_transient_retries,
            timeout_errors=(SoftTimeLimitExceeded,),
            keep_inputs=conf.fibertensor_keep_inputs,
        )
    except JobNotFound:
        logger.info("job %s was deleted before it ran", job_id)
    except RetryLater as exc:
        logger.warning("job %s hit a transient error, retrying: %s", job_id, exc)
        raise self.retry(countdown=min(60, 5 * 2**self.request.retries)) from exc


@worker_process_init.connect
def warm_up_pool_process(**_: object) -> None:
    """Load the peaks kernels of the configured SH orders (``fibertensor_warmup_lmax``) on
    the backend jobs get by default, in each pool process as it starts: its first job then
    waits for neither the CUDA context nor the kernels. A failure is logged and left to
    the jobs, which report it as their own error."""
    lmaxes = tuple(current_app.conf.get("fibertensor_warmup_lmax") or ())
    if not lmaxes:
        return
    from gpu.cuda.backend import resolve_backend
    from gpu.peaks.warmup import warm_up_peaks
    from worker.jobs.peaks import warm_up_writers

    try:
        backend = resolve_backend("auto")
        # The writers' compiled passes bring numba's CPU runtime, which a CUDA job loads for them alone
        # (docs/decisions/kernel-warmup.md).
        seconds = sum(warm_up_peaks(backend, lmaxes).values()) + warm_up_writers()
    except Exception:
        logger.warning("warm-up of the peaks kernels (lmax %s) failed; jobs load them themselves",
                       ",".join(map(str, lmaxes)), exc_info=True)
        return
    logger.info("pool process warmed up: peaks kernels (%s, lmax %s) and the writers' compiled passes in %.1f s",
                backend, ",".join(map(str, lmaxes)), seconds)
