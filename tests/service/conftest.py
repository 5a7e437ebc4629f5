"""Fixtures for the API tests: an app on a temporary data dir with the embedded (filesystem)
broker, the test job kind registered, and an httpx client over the ASGI transport.

No worker runs here: :func:`run_queued` plays the worker in-process by calling the same
runner the Celery task calls, so results, cancellation and failures are real.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import numpy as np
import pytest

import worker.job_kinds as job_kinds_module
from service.app import create_app
from service.settings import Settings
from tests.service.toy_kind import register_toy_kind, write_volume
from worker.job_kinds import get_job_kind, job_kinds
from worker.job_runner import run_job
from worker.job_store import JobRecord, JobStatus, JobStore


@pytest.fixture
def inflate_passes(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Passes over each .nii.gz (by file name) that the NIfTI reader's own inflater starts
    while the test runs (a subclass counting them; the inflating is the real one's)."""
    from worker.io import nifti

    passes: Counter = Counter()

    class CountingInflater(nifti._GzipInflater):
        def __init__(self, handle, *args, **kwargs):
            super().__init__(handle, *args, **kwargs)
            passes[self.name] += 1

    monkeypatch.setattr(nifti, "_GzipInflater", CountingInflater)
    return passes


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def toy_kinds(monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setattr(job_kinds_module, "_FAMILY_MODULES", register_toy_kind(job_kinds_module))
    return job_kinds()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", max_upload_bytes=1 << 20, max_voxels=100_000,
                    max_input_bytes=16 << 20)


@pytest.fixture
def app_factory(toy_kinds: dict) -> Callable:
    return lambda settings: create_app(settings, kinds=toy_kinds)


@pytest.fixture
async def client(app_factory: Callable, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = app_factory(settings)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        http.app = app  # type: ignore[attr-defined]
        yield http


@pytest.fixture
def store(settings: Settings) -> JobStore:
    return JobStore(settings.data_dir)


@pytest.fixture
def volume(tmp_path: Path) -> Path:
    data = np.arange(5 * 4 * 3, dtype=np.float32).reshape(5, 4, 3)
    return write_volume(tmp_path / "volume.nii.gz", data)


def run_queued(store: JobStore) -> list[JobRecord]:
    """Run every queued job once, as a worker would; returns their final records."""
    finished = []
    for job_id in reversed(store.job_ids()):
        if store.read(job_id).status is JobStatus.queued:
            record = run_job(store, job_id, get_job_kind, heartbeat_interval=1.0,
                             heartbeat_timeout=30.0, max_worker_losses=3)
            finished.append(record)
    return finished


def leftovers(store: JobStore) -> list[Path]:
    """Everything under jobs/ and staging/: empty after a rejected upload."""
    return sorted([*store.jobs_dir.iterdir(), *store.staging_dir.iterdir()])
