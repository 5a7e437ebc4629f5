"""Several peaks jobs at once through two API processes, Redis and one worker with three job
processes: every job succeeds, none is lost or run twice, and each result file is byte for
byte that of ``fibertensor peaks`` run on its input alone (CPU backend)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import httpx
import pytest

from service.cli import main
from tests.integration.processes import free_port, service_env, start_serve, start_worker, stop, wait_for
from worker.job_kinds import get_job_kind
from worker.job_store import JobStore
from worker.provenance import file_sha256
from worker.sample import write_sample

_JOBS = 8
_PROCESSES = 3


@pytest.fixture(scope="module")
def cohort(tmp_path_factory) -> list[dict[str, object]]:
    """Distinct small FOD volumes, each with the sha256 of every result ``fibertensor peaks``
    writes for it alone (the sidecar aside: it holds timings)."""
    folder = tmp_path_factory.mktemp("cohort")
    images = [name for name in get_job_kind("peaks").result_names if not name.endswith(".json")]
    subjects = []
    for index in range(_JOBS):
        fod = write_sample(folder / f"sub-{index}", shape=(5, 4, 3), seed=100 + index)["fod"]
        prefix = folder / f"ref-{index}" / "ref"
        prefix.parent.mkdir()
        assert main(["peaks", str(fod), str(prefix), "--backend", "cpu", "--quiet"]) == 0
        subjects.append({"fod": fod, "sha256": {name: file_sha256(prefix.with_name(f"ref_{name}")) for name in images}})
    return subjects


@pytest.mark.requires_redis
def test_concurrent_jobs_equal_one_at_a_time_and_none_is_lost(cohort, redis_url, tmp_path):
    data_dir = tmp_path / "data"
    env = service_env(data_dir, redis_url, queue="concurrent", worker_concurrency=_PROCESSES)
    log = tmp_path / "worker.log"
    worker = start_worker(env, log, "pool@test")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    api = None
    try:
        api = start_serve(env, tmp_path / "serve.log", port, "--no-worker", "--api-workers", "2")

        def submit(subject: dict[str, object]) -> str:
            with open(subject["fod"], "rb") as fod:
                response = httpx.post(f"{base}/v1/jobs/peaks", files={"fod": ("fod.nii.gz", fod)},
                                      data={"backend": "cpu", "label": "cohort"}, timeout=60)
            assert response.status_code == 202, response.text
            return response.json()["id"]

        with ThreadPoolExecutor(_JOBS) as pool:
            ids = list(pool.map(submit, cohort))

        def finished() -> list[dict] | None:
            jobs = httpx.get(f"{base}/v1/jobs", params={"label": "cohort"}, timeout=10).json()["jobs"]
            done = [j for j in jobs if j["status"] in ("succeeded", "failed", "cancelled")]
            return jobs if len(done) == _JOBS else None

        jobs = {j["id"]: j for j in wait_for(finished, 300, "every job to finish", interval=0.5)}
    finally:
        if api is not None:
            stop(api)
        stop(worker)

    assert sorted(jobs) == sorted(ids)
    assert [jobs[i]["status"] for i in ids] == ["succeeded"] * _JOBS, [jobs[i]["error"] for i in ids]
    for job_id, subject in zip(ids, cohort):
        records = {r["name"]: r["sha256"] for r in jobs[job_id]["results"]}
        assert {name: records[name] for name in subject["sha256"]} == subject["sha256"]
    records = [JobStore(data_dir).read(i) for i in ids]
    # each job ran once (no second delivery), and the pool ran them in several processes at once
    assert [r.attempts for r in records] == [1] * _JOBS
    assert len({r.runner for r in records}) > 1, [r.runner for r in records]
    spans = sorted((datetime.fromisoformat(jobs[i]["started_at"]), datetime.fromisoformat(jobs[i]["finished_at"]))
                   for i in ids)
    assert any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:])), "no two jobs overlapped"
    assert "warmed up" in log.read_text()
