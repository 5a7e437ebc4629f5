"""The runner and the Celery task: outcomes, idempotent claims, orphan recovery, retries."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from billiard.exceptions import TimeLimitExceeded

import worker.job_kinds as job_kinds_module
from tests.service.toy_kind import register_toy_kind, write_volume
from worker.celery_app import create_celery_app
from worker.job_kinds import get_job_kind
from worker.job_runner import RetryLater, claim_job, reap_orphans, run_job
from worker.job_store import JobRecord, JobStatus, JobStore, utc_now
from worker.tasks import is_transient, run_job_task

RUN = dict(heartbeat_interval=0.05, heartbeat_timeout=30.0, max_worker_losses=3)


@pytest.fixture(autouse=True)
def toy_kinds(monkeypatch):
    monkeypatch.setattr(job_kinds_module, "_FAMILY_MODULES", register_toy_kind(job_kinds_module))


@pytest.fixture
def store(tmp_path):
    return JobStore(tmp_path / "data")


def _job(store, **params) -> str:
    with store.staging() as (job_id, folder):
        write_volume(folder / "inputs" / "volume.nii.gz", np.arange(24.0).reshape(4, 3, 2))
        record = JobRecord(id=job_id, kind="scale", tenant="t", created_at=utc_now(),
                           params=params, inputs={"volume": "volume.nii.gz"})
        store.commit(folder, record)
    return job_id


def _dead_runner() -> str:
    """``host:pid`` of a process of this host that has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    import socket

    return f"{socket.gethostname()}:{proc.pid}"


def _set(store, job_id, **fields):
    store.update(job_id, lambda r: r.model_copy(update=fields))


def test_success_publishes_outputs_atomically(store):
    job_id = _job(store, factor=0.5, chunks=3)
    final = run_job(store, job_id, get_job_kind, **RUN)
    assert final.status is JobStatus.succeeded and final.attempts == 1 and final.progress == 1.0
    folder = store.job_dir(job_id)
    assert sorted(p.name for p in store.outputs_dir(job_id).iterdir()) == ["scaled.json", "scaled.nii.gz"]
    assert not any(p.name.startswith("outputs.partial") for p in folder.iterdir())
    import nibabel as nib

    out = np.asarray(nib.load(store.outputs_dir(job_id) / "scaled.nii.gz").dataobj)
    np.testing.assert_array_equal(out, 0.5 * np.arange(24.0).reshape(4, 3, 2))
    assert [r.name for r in final.results] == ["scaled.nii.gz", "scaled.json"]
    assert final.results[1].bytes == (store.outputs_dir(job_id) / "scaled.json").stat().st_size
    assert store.heartbeat_age(job_id) < 30


def test_inputs_are_removed_after_success_unless_kept(store):
    removed, kept, failed = _job(store), _job(store), _job(store, fail="transient")
    assert run_job(store, removed, get_job_kind, **RUN).status is JobStatus.succeeded
    assert not store.inputs_dir(removed).exists() and store.outputs_dir(removed).is_dir()
    assert run_job(store, kept, get_job_kind, keep_inputs=True, **RUN).status is JobStatus.succeeded
    assert [p.name for p in store.inputs_dir(kept).iterdir()] == ["volume.nii.gz"]
    # a failed job keeps what it was sent, for the operator to look at or to send again
    assert run_job(store, failed, get_job_kind, **RUN).status is JobStatus.failed
    assert [p.name for p in store.inputs_dir(failed).iterdir()] == ["volume.nii.gz"]


def test_finished_job_is_not_run_again(store):
    job_id = _job(store)
    run_job(store, job_id, get_job_kind, **RUN)
    pid_before = json.loads((store.outputs_dir(job_id) / "scaled.json").read_text())["pid"]
    assert run_job(store, job_id, get_job_kind, **RUN) is None
    assert store.read(job_id).attempts == 1
    assert json.loads((store.outputs_dir(job_id) / "scaled.json").read_text())["pid"] == pid_before


def test_job_running_in_a_live_process_is_left_alone(store):
    job_id = _job(store)
    _set(store, job_id, status=JobStatus.running, runner=f"{os.uname().nodename}:{os.getpid()}")
    store.touch_heartbeat(job_id)
    assert claim_job(store, job_id, heartbeat_timeout=30, max_worker_losses=3) is None
    # on another host only the heartbeat counts
    _set(store, job_id, runner="other-host:1")
    assert claim_job(store, job_id, heartbeat_timeout=30, max_worker_losses=3) is None
    assert claim_job(store, job_id, heartbeat_timeout=0.0, max_worker_losses=3) is not None


def test_job_of_a_dead_process_is_taken_over_then_failed_at_the_limit(store):
    job_id = _job(store)
    _set(store, job_id, status=JobStatus.running, runner=_dead_runner(), attempts=1)
    store.touch_heartbeat(job_id)  # fresh heartbeat, but the process is gone
    final = run_job(store, job_id, get_job_kind, **RUN)
    assert final.status is JobStatus.succeeded and final.worker_losses == 1 and final.attempts == 2

    job_id = _job(store)
    _set(store, job_id, status=JobStatus.running, runner=_dead_runner(), worker_losses=2)
    assert run_job(store, job_id, get_job_kind, **RUN) is None
    failed = store.read(job_id)
    assert failed.status is JobStatus.failed and failed.error.title == "Worker lost"
    assert "died 3 times (limit 3)" in failed.error.detail


def test_transient_error_requeues_for_a_retry(store):
    job_id = _job(store, fail="transient")
    with pytest.raises(RetryLater):
        run_job(store, job_id, get_job_kind, is_transient=is_transient, retry_allowed=True, **RUN)
    assert store.read(job_id).status is JobStatus.queued
    final = run_job(store, job_id, get_job_kind, is_transient=is_transient, retry_allowed=True, **RUN)
    assert final.status is JobStatus.succeeded and final.attempts == 2


def test_transient_error_fails_when_retries_are_spent(store):
    job_id = _job(store, fail="transient")
    final = run_job(store, job_id, get_job_kind, is_transient=is_transient, retry_allowed=False, **RUN)
    assert final.status is JobStatus.failed
    assert "ConnectionError: GPU node unreachable for now" in final.error.detail


def test_transient_classification():
    assert is_transient(ConnectionError("reset")) and is_transient(TimeoutError())
    assert is_transient(OSError(errno.ESTALE, "stale NFS handle"))
    assert is_transient(RuntimeError("[2] Call to cuMemAlloc results in CUDA_ERROR_OUT_OF_MEMORY"))
    assert not is_transient(OSError(errno.ENOENT, "missing"))
    assert not is_transient(ValueError("bad"))


def test_reaper_requeues_or_fails_orphans_and_republishes(store):
    alive = _job(store)
    _set(store, alive, status=JobStatus.running, runner="other-host:1")
    store.touch_heartbeat(alive)
    orphan = _job(store)
    _set(store, orphan, status=JobStatus.running, runner=_dead_runner())
    doomed = _job(store)
    _set(store, doomed, status=JobStatus.running, runner=_dead_runner(), worker_losses=2)
    cancelled = _job(store)
    _set(store, cancelled, status=JobStatus.running, runner=_dead_runner(), cancel_requested=True)
    published = []
    reaped = reap_orphans(store, published.append, heartbeat_timeout=30, max_worker_losses=3)
    assert sorted(reaped) == sorted([orphan, doomed, cancelled]) and published == [orphan]
    assert store.read(alive).status is JobStatus.running
    assert store.read(orphan).status is JobStatus.queued and store.read(orphan).worker_losses == 1
    assert store.read(doomed).status is JobStatus.failed
    assert store.read(cancelled).status is JobStatus.cancelled


def test_celery_task_runs_the_job_from_its_id(store):
    app = create_celery_app(data_dir=store.data_dir, heartbeat_interval=0.05)
    assert app.conf.task_serializer == "json" and app.conf.accept_content == ["json"]
    assert app.conf.task_acks_late and app.conf.task_reject_on_worker_lost
    assert app.conf.worker_prefetch_multiplier == 1
    job_id = _job(store, factor=4)
    app.tasks["fibertensor.run_job"].apply(args=[job_id])
    assert store.read(job_id).status is JobStatus.succeeded
    # a deleted job's message is dropped quietly
    store.delete(job_id)
    app.tasks["fibertensor.run_job"].apply(args=[job_id])


def test_hard_time_limit_fails_the_job(store):
    app = create_celery_app(data_dir=store.data_dir, time_limit=60, soft_time_limit=50)
    job_id = _job(store)
    _set(store, job_id, status=JobStatus.running, runner="gone:1")
    task = app.tasks["fibertensor.run_job"]
    task.on_failure(TimeLimitExceeded(60), "task-id", [job_id], {}, None)
    record = store.read(job_id)
    assert record.status is JobStatus.failed and record.error.title == "Time limit exceeded"
    assert "killed after 60 s" in record.error.detail
    assert run_job_task.name == "fibertensor.run_job"


def test_reaper_republishes_queued_jobs_whose_message_was_lost(store):
    from datetime import timedelta

    old = utc_now() - timedelta(seconds=60)
    lost, waiting, young = _job(store), _job(store), _job(store)
    for job_id in (lost, waiting):
        _set(store, job_id, created_at=old)
    published = []

    def sweep(waiting_ids):
        return reap_orphans(store, published.append, heartbeat_timeout=30, max_worker_losses=3,
                            waiting_ids=waiting_ids)

    assert sweep(lambda: None) == [] and published == []  # Redis: it keeps messages itself
    assert sweep(lambda: {waiting}) == [lost] and published == [lost]
    assert "queue message lost; republished" in store.log_path(lost).read_text()
    # republishing restarts the wait: no second copy on the next sweep
    assert sweep(lambda: {waiting}) == [] and published == [lost]
    assert store.read(lost).status is JobStatus.queued and store.read(young).queued_at is None


def test_warm_up_orders_travel_from_the_environment_to_the_pool(monkeypatch, tmp_path):
    from service.app import celery_app_for
    from service.settings import Settings

    monkeypatch.setenv("FIBERTENSOR_WORKER_WARMUP_LMAX", "4, 8")
    monkeypatch.setenv("FIBERTENSOR_WORKER_CONCURRENCY", "6")
    app = celery_app_for(Settings(data_dir=tmp_path))
    assert app.conf.fibertensor_warmup_lmax == [4, 8] and app.conf.worker_concurrency == 6
    assert app.conf.fibertensor_keep_inputs is False
    monkeypatch.setenv("FIBERTENSOR_KEEP_INPUTS", "true")
    assert celery_app_for(Settings(data_dir=tmp_path)).conf.fibertensor_keep_inputs is True
    # a pool process is not killed while it warms up (Celery's default is 4 s)
    assert app.conf.worker_proc_alive_timeout >= 60
    monkeypatch.setenv("FIBERTENSOR_WORKER_WARMUP_LMAX", "")
    assert Settings(data_dir=tmp_path).worker_warmup_lmax == []
    monkeypatch.setenv("FIBERTENSOR_WORKER_WARMUP_LMAX", "8th")
    with pytest.raises(ValueError, match="FIBERTENSOR_WORKER_WARMUP_LMAX must be SH orders"):
        Settings(data_dir=tmp_path)


def test_the_process_that_forks_the_pool_loads_no_numba(tmp_path):
    """The worker's main process (its Celery app and task modules) imports no numba, so it
    cannot have initialised CUDA before it forks the job processes; each of those warms up
    its own context."""
    code = ("import sys\nfrom service.app import celery_app_for\nfrom service.settings import Settings\n"
            f"app = celery_app_for(Settings(data_dir={str(tmp_path)!r}))\napp.loader.import_default_modules()\n"
            "import worker.tasks\nprint(sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'llvmlite')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert done.stdout.strip() == "[]"
