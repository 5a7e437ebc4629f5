"""A worker SIGKILLed in the middle of a job: the job is run again and finishes, never lost
and never stuck ``running``. Real Celery workers (CPU) on the embedded broker and on Redis."""

from __future__ import annotations

import json
import os
import signal

import nibabel as nib
import numpy as np
import pytest

from service.app import celery_app_for
from service.settings import Settings
from tests.integration.processes import service_env, start_worker, stop, wait_for
from tests.service.toy_kind import write_volume
from worker.celery_app import publish_job
from worker.job_runner import reap_orphans
from worker.job_store import TERMINAL_STATUSES, JobRecord, JobStatus, JobStore, utc_now

# Short liveness settings so a death is noticed in seconds; limits nest as Settings demands.
LIVENESS = dict(heartbeat_interval=0.2, heartbeat_timeout=2.0, job_soft_time_limit=40,
                job_time_limit=50, visibility_timeout=60)
# No pool process loads the peaks kernels as it starts: only the test kind runs here.
NO_WARMUP = dict(worker_warmup_lmax="")


def _job(store: JobStore, data: np.ndarray) -> str:
    with store.staging() as (job_id, folder):
        write_volume(folder / "inputs" / "volume.nii.gz", data)
        store.commit(folder, JobRecord(
            id=job_id, kind="scale", tenant="default", created_at=utc_now(),
            params={"factor": 3.0, "chunks": 16, "delay": 0.25}, inputs={"volume": "volume.nii.gz"},
        ))
    return job_id


@pytest.mark.parametrize("victim", ["worker", "pool-process"])
@pytest.mark.parametrize("broker", ["embedded", pytest.param("redis", marks=pytest.mark.requires_redis)])
def test_job_survives_a_killed_worker(broker, victim, tmp_path, request):
    url = request.getfixturevalue("redis_url") if broker == "redis" else ""
    data_dir = tmp_path / "data"
    settings = Settings(data_dir=data_dir, broker_url=url, queue=f"q-{tmp_path.name}", **LIVENESS)
    env = service_env(data_dir, url, queue=settings.queue, **LIVENESS, **NO_WARMUP)
    celery = celery_app_for(settings)
    store = JobStore(data_dir)
    volume = np.random.default_rng(1).normal(size=(16, 3, 2)).astype(np.float32)
    job_id = _job(store, volume)

    workers = [start_worker(env, tmp_path / "w1.log", "w1@test")]
    try:
        publish_job(celery, job_id)
        running = wait_for(
            lambda: (r := store.read(job_id)).status is JobStatus.running and r.progress >= 0.25 and r,
            60, "the job to be a quarter done",
        )
        killed_pid = int(running.runner.rpartition(":")[2])
        if victim == "worker":  # the main process and its pool: nothing acknowledges or requeues
            os.killpg(workers[0].pid, signal.SIGKILL)
            workers[0].wait()
            workers.append(start_worker(env, tmp_path / "w2.log", "w2@test"))
        else:  # the pool process only: Celery's main process sees it die and requeues
            os.kill(killed_pid, signal.SIGKILL)

        def finished() -> bool:
            # what the API's janitor does every janitor_interval
            reap_orphans(store, lambda j: publish_job(celery, j),
                         heartbeat_timeout=settings.heartbeat_timeout,
                         max_worker_losses=settings.max_worker_losses)
            return store.read(job_id).status in TERMINAL_STATUSES

        wait_for(finished, 90, "the job to finish after the kill", interval=0.3)
    finally:
        for proc in workers:
            stop(proc)

    final = store.read(job_id)
    assert final.status is JobStatus.succeeded, final.error
    assert final.worker_losses == 1 and final.attempts == 2
    outputs = store.outputs_dir(job_id)
    assert json.loads((outputs / "scaled.json").read_text())["pid"] != killed_pid
    np.testing.assert_allclose(np.asarray(nib.load(outputs / "scaled.nii.gz").dataobj), 3.0 * volume, rtol=1e-6)
    assert not any(p.name.startswith("outputs.partial") for p in store.job_dir(job_id).iterdir())


def test_soft_time_limit_fails_the_job_with_a_reason(tmp_path):
    data_dir = tmp_path / "data"
    limits = dict(job_soft_time_limit=1, job_time_limit=5, visibility_timeout=10)
    settings = Settings(data_dir=data_dir, **limits)
    store = JobStore(data_dir)
    job_id = _job(store, np.ones((16, 2, 2), np.float32))  # 16 chunks × 0.25 s: past the soft limit
    worker = start_worker(service_env(data_dir, **limits, **NO_WARMUP), tmp_path / "w.log", "limits@test")
    try:
        publish_job(celery_app_for(settings), job_id)
        final = wait_for(lambda: (r := store.read(job_id)).status in TERMINAL_STATUSES and r, 60, "the job to stop")
    finally:
        stop(worker)
    assert final.status is JobStatus.failed and final.error.title == "Time limit exceeded"
    assert "FIBERTENSOR_JOB_SOFT_TIME_LIMIT" in final.error.detail
    assert 0 < final.progress < 1 and final.results == []
    assert not store.outputs_dir(job_id).exists()
