"""Running one job from its folder, and recovering jobs whose runner died.

Deliveries may repeat (a broker redelivers after a worker died, the janitor republishes an
orphan), so running is idempotent: a job is *claimed* under its lock first, and a delivery
for a job that is finished, or running in a live process, does nothing. A runner is alive
while its heartbeat is fresh, and, on its own host, while its process exists.
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
import shutil
import socket
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from worker.errors import InputError, JobCancelled
from worker.job_kinds import JobContext, JobKind
from worker.provenance import file_sha256, generated_by
from worker.job_store import (
    TERMINAL_STATUSES,
    JobError,
    JobRecord,
    JobStatus,
    JobStore,
    ResultFile,
    utc_now,
)

__all__ = [
    "runner_id",
    "runner_alive",
    "claim_job",
    "run_job",
    "fail_job",
    "reap_orphans",
    "RetryLater",
]

logger = logging.getLogger(__name__)

# Progress is written to job.json at most this often (seconds), plus at 100 %.
_PROGRESS_PERIOD = 0.5


class RetryLater(Exception):
    """A transient error stopped the job; it was set back to ``queued`` for a retry."""

    def __init__(self, cause: BaseException):
        super().__init__(str(cause))
        self.cause = cause


def runner_id() -> str:
    """``host:pid`` of this process, recorded in the job it runs."""
    return f"{socket.gethostname()}:{os.getpid()}"


def runner_alive(store: JobStore, record: JobRecord, heartbeat_timeout: float) -> bool:
    """Whether the process running ``record`` still lives.

    On the same host a missing process is certain death (a SIGKILLed pool child); elsewhere
    only the heartbeat tells.
    """
    host, _, pid = (record.runner or "").rpartition(":")
    if host == socket.gethostname() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
    return store.heartbeat_age(record.id) < heartbeat_timeout


def _lost_error(record: JobRecord, max_worker_losses: int) -> JobError:
    return JobError(
        title="Worker lost",
        detail=(
            f"the worker running this job died {record.worker_losses} times "
            f"(limit {max_worker_losses}): it was killed, ran out of memory or exceeded the "
            "hard time limit. Try a smaller input (or a mask), or ask the operator to raise "
            "the worker's memory or FIBERTENSOR_JOB_TIME_LIMIT."
        ),
    )


def _finish(record: JobRecord, status: JobStatus, error: JobError | None = None) -> JobRecord:
    record.status = status
    record.error = error
    record.finished_at = utc_now()
    return record


def claim_job(
    store: JobStore, job_id: str, *, heartbeat_timeout: float, max_worker_losses: int
) -> JobRecord | None:
    """Mark a job ``running`` by this process; None when there is nothing to run.

    A job left ``running`` by a dead runner is taken over, counting one worker loss; at
    ``max_worker_losses`` it fails instead (a job that kills its worker is not retried
    forever).
    """
    me = runner_id()

    def change(record: JobRecord) -> JobRecord | None:
        if record.status in TERMINAL_STATUSES:
            return None
        if record.status is JobStatus.running:
            if runner_alive(store, record, heartbeat_timeout):
                return None
            record.worker_losses += 1
            if record.worker_losses >= max_worker_losses:
                return _finish(record, JobStatus.failed, _lost_error(record, max_worker_losses))
        if record.cancel_requested or store.cancel_requested(job_id):
            return _finish(record, JobStatus.cancelled)
        record.status = JobStatus.running
        record.attempts += 1
        record.runner = me
        record.progress = 0.0
        record.error = None
        record.warnings = []
        record.started_at = record.started_at or utc_now()
        store.touch_heartbeat(job_id)
        return record

    record = store.update(job_id, change)
    if record is not None and record.status in TERMINAL_STATUSES:  # failed or cancelled here
        _remove_partial_outputs(store, job_id)
    if record is None or record.status is not JobStatus.running or record.runner != me:
        return None
    return record


def _owned_update(
    store: JobStore, job_id: str, me: str, change: Callable[[JobRecord], JobRecord]
) -> JobRecord | None:
    """Apply ``change`` only while this process still owns the running job."""

    def guarded(record: JobRecord) -> JobRecord | None:
        if record.status is not JobStatus.running or record.runner != me:
            return None
        return change(record)

    return store.update(job_id, guarded)


def fail_job(store: JobStore, job_id: str, title: str, detail: str) -> JobRecord | None:
    """Fail a job that is not finished yet (used where the runner itself cannot)."""

    def change(record: JobRecord) -> JobRecord | None:
        if record.status in TERMINAL_STATUSES:
            return None
        return _finish(record, JobStatus.failed, JobError(title=title, detail=detail))

    return store.update(job_id, change)


def _one_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: message`` on one line of at most ``limit`` characters: what a job's log and
    error say of a fault."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split()).removesuffix(":")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _remove_partial_outputs(store: JobStore, job_id: str) -> None:
    for partial in store.job_dir(job_id).glob("outputs.partial-*"):
        shutil.rmtree(partial, ignore_errors=True)


def _disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def _publish_outputs(store: JobStore, job_id: str, partial: Path, paths: list[Path]) -> list[ResultFile]:
    results = []
    for path in paths:
        path = Path(path)
        if path.parent.resolve() != partial.resolve() or not path.is_file():
            raise RuntimeError(f"job returned {path}, which is not a file in its output folder")
        results.append(ResultFile(name=path.name, bytes=path.stat().st_size, sha256=file_sha256(path)))
    final = store.outputs_dir(job_id)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(partial, final)
    return results


def _history_entry(record: JobRecord) -> str:
    """``fibertensor job <id> <kind> name=value...``: the job, as an image's command_history
    names the command that made it."""
    from worker.io.mif import command_history_entry

    params = [f"{name}={','.join(map(str, value)) if isinstance(value, list) else value}"
              for name, value in record.params.items()]
    return command_history_entry("fibertensor", ["job", record.id, record.kind, *params], generated_by()["Version"])


def run_job(
    store: JobStore,
    job_id: str,
    kind_of: Callable[[str], JobKind],
    *,
    heartbeat_interval: float,
    heartbeat_timeout: float,
    max_worker_losses: int,
    is_transient: Callable[[BaseException], bool] = lambda exc: False,
    retry_allowed: bool = False,
    timeout_errors: tuple[type[BaseException], ...] = (),
    keep_inputs: bool = False,
) -> JobRecord | None:
    """Claim and run a job; returns its final record, or None when it was not ours to run.

    A job that succeeded loses its inputs folder unless ``keep_inputs``.

    Raises :class:`RetryLater` after setting the job back to ``queued`` when a transient
    error stopped it and ``retry_allowed``.
    """
    record = claim_job(
        store, job_id, heartbeat_timeout=heartbeat_timeout, max_worker_losses=max_worker_losses
    )
    if record is None:
        return None
    me = record.runner or runner_id()
    # Leftovers of attempts whose runner died; this process owns the job now.
    _remove_partial_outputs(store, job_id)
    partial = store.job_dir(job_id) / f"outputs.partial-{record.attempts}"
    partial.mkdir()
    store.append_log(job_id, f"attempt {record.attempts} started on {me}")

    stop_beating = threading.Event()

    def beat() -> None:
        while not stop_beating.wait(heartbeat_interval):
            store.touch_heartbeat(job_id)

    last_progress = [0.0]

    def progress(fraction: float) -> None:
        now = time.monotonic()
        if now - last_progress[0] >= _PROGRESS_PERIOD:
            last_progress[0] = now
            store.touch_heartbeat(job_id)
            store.set_progress(job_id, fraction)

    def warn(message: str) -> None:
        store.append_log(job_id, f"warning: {message}")

        def add(rec: JobRecord) -> JobRecord:
            rec.warnings.append(store.user_text(message, job_id))  # the inputs by their uploaded names
            return rec

        _owned_update(store, job_id, me, add)

    beating = threading.Thread(target=beat, name=f"heartbeat-{job_id}", daemon=True)
    beating.start()
    try:
        kind = kind_of(record.kind)
        ctx = JobContext(
            inputs={slot: store.inputs_dir(job_id) / name for slot, name in record.inputs.items()},
            out_dir=partial,
            params=kind.params_model.model_validate(record.params),
            progress=progress,
            should_stop=lambda: store.cancel_requested(job_id),
            log=lambda message: store.append_log(job_id, message),
            warn=warn,
            uploaded=dict(record.uploaded),
        )
        from worker.input_limits import check_run_here  # imports nibabel: not at worker start-up
        from worker.io.mif import recording_command

        # a backend this machine lacks is the user's choice, not a fault of the service
        for message in check_run_here(ctx.params, ctx.inputs):
            warn(message)
        with recording_command(_history_entry(record)):  # in the .mif images it writes
            paths = kind.run(ctx)
        results = _publish_outputs(store, job_id, partial, paths)

        def succeed(rec: JobRecord) -> JobRecord:
            rec.results = results
            rec.progress = 1.0
            return _finish(rec, JobStatus.succeeded)

        final = _owned_update(store, job_id, me, succeed)
        store.append_log(job_id, f"succeeded with {len(results)} result files")
        if not keep_inputs:
            shutil.rmtree(store.inputs_dir(job_id), ignore_errors=True)
        return final
    except JobCancelled:
        store.append_log(job_id, "cancelled")
        return _owned_update(store, job_id, me, lambda rec: _finish(rec, JobStatus.cancelled))
    except InputError as exc:
        store.append_log(job_id, f"input error: {exc.detail}")
        error = JobError(title=exc.title, detail=store.user_text(exc.detail, job_id))
        return _owned_update(store, job_id, me, lambda rec: _finish(rec, JobStatus.failed, error))
    except timeout_errors:
        store.append_log(job_id, "soft time limit exceeded")
        error = JobError(
            title="Time limit exceeded",
            detail="the job ran longer than the service's time limit "
            "(FIBERTENSOR_JOB_SOFT_TIME_LIMIT); split the input or use a mask to run fewer "
            "voxels, or ask the operator to raise the limit.",
        )
        return _owned_update(store, job_id, me, lambda rec: _finish(rec, JobStatus.failed, error))
    except Exception as exc:
        if _disk_full(exc):
            # The partial outputs go first: they free the room job.json and the log need. A
            # file the job left open in a frame of the traceback keeps its blocks until closed.
            traceback.clear_frames(exc.__traceback__)
            shutil.rmtree(partial, ignore_errors=True)
            store.append_log(job_id, f"data volume full: {exc}")
            error = JobError(
                title="Disk full",
                detail="the service's data volume ran out of space while this job wrote its "
                "results; nothing was kept but its inputs. Send the job again later, and tell "
                "the operator to free space on FIBERTENSOR_DATA_DIR.",
            )
            return _owned_update(store, job_id, me, lambda rec: _finish(rec, JobStatus.failed, error))
        # the job's log is served to its owner: the traceback goes to the server's log only,
        # findable by the error id the job's log and error carry
        error_id = secrets.token_hex(4)
        summary = store.user_text(_one_line(exc), job_id)  # the owner reads it: no server paths
        if retry_allowed and is_transient(exc):
            logger.warning("job %s: transient error (error id %s); queued again", job_id, error_id, exc_info=exc)
            store.append_log(job_id, f"transient error (error id {error_id}): {summary}; queued again for a retry")

            def requeue(rec: JobRecord) -> JobRecord:
                rec.status = JobStatus.queued
                rec.queued_at = utc_now()
                rec.runner = None
                return rec

            _owned_update(store, job_id, me, requeue)
            raise RetryLater(exc) from exc
        logger.exception("job %s failed (error id %s)", job_id, error_id)
        store.append_log(job_id, f"fault of the service (error id {error_id}): {summary}")
        error = JobError(
            title="Job failed",
            detail=f"{summary}. This is a fault of the service, not of your input; report it "
            f"with job id {job_id} and error id {error_id}.",
        )
        return _owned_update(store, job_id, me, lambda rec: _finish(rec, JobStatus.failed, error))
    finally:
        stop_beating.set()
        beating.join()
        shutil.rmtree(partial, ignore_errors=True)


def _republish_lost(
    store: JobStore, record: JobRecord, waiting: set[str], publish: Callable[[str], None], patience: float
) -> bool:
    """Republish a ``queued`` job that no broker message stands for (its message died with a
    worker of the embedded broker), once it has waited ``patience`` seconds."""
    since = record.queued_at or record.created_at
    if record.id in waiting or (utc_now() - since).total_seconds() < patience:
        return False

    def change(rec: JobRecord) -> JobRecord | None:
        if rec.status is not JobStatus.queued or rec.queued_at != record.queued_at:
            return None
        rec.queued_at = utc_now()
        return rec

    if store.update(record.id, change) is None:
        return False
    store.append_log(record.id, "queue message lost; republished")
    publish(record.id)
    return True


def reap_orphans(
    store: JobStore,
    publish: Callable[[str], None],
    *,
    heartbeat_timeout: float,
    max_worker_losses: int,
    waiting_ids: Callable[[], set[str] | None] = lambda: None,
) -> list[str]:
    """Requeue (and republish) or fail ``running`` jobs whose runner died; returns their ids.

    A broker may redeliver such a job by itself too (Redis after its visibility timeout);
    the claim makes the second delivery a no-op. The embedded broker cannot, so this sweep is
    what brings its jobs back. ``waiting_ids`` gives the ids a broker message stands for
    (:func:`worker.celery_app.waiting_job_ids`), or None to skip that check; with it, ``queued``
    jobs whose message was lost (a killed worker of the embedded broker, Redis restarted
    without its append-only file) are republished too. Duplicates are harmless. A job failed
    here loses the partial outputs its dead runner left.
    """
    reaped = []
    waiting: set[str] | None = None
    asked = False
    for job_id in store.job_ids():
        try:
            record = store.read(job_id)
        except Exception:  # deleted or being written: the next sweep sees it
            continue
        if record.status is JobStatus.queued:
            if not asked:  # one look at the broker per sweep, and only when a job waits
                waiting, asked = waiting_ids(), True
            if waiting is not None and _republish_lost(store, record, waiting, publish, heartbeat_timeout):
                reaped.append(job_id)
            continue
        if record.status is not JobStatus.running:
            continue

        def change(rec: JobRecord) -> JobRecord | None:
            if rec.status is not JobStatus.running or runner_alive(store, rec, heartbeat_timeout):
                return None
            rec.worker_losses += 1
            if rec.cancel_requested or store.cancel_requested(rec.id):
                return _finish(rec, JobStatus.cancelled)
            if rec.worker_losses >= max_worker_losses:
                return _finish(rec, JobStatus.failed, _lost_error(rec, max_worker_losses))
            rec.status = JobStatus.queued
            rec.queued_at = utc_now()
            rec.runner = None
            return rec

        changed = store.update(job_id, change)
        if changed is None:
            continue
        if changed.status in TERMINAL_STATUSES:
            _remove_partial_outputs(store, job_id)
        reaped.append(job_id)
        store.append_log(job_id, f"runner lost; job is now {changed.status.value}")
        if changed.status is JobStatus.queued:
            publish(job_id)
    return reaped
