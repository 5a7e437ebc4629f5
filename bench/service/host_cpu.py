"""Host CPU the service spends per subject besides the job's own read, compute and write.

CPU seconds, not wall (a shared machine's wall times say little), read from ``/proc`` of the
service's processes before and after each phase, for one whole-brain subject (the lmax-8
phantom of :mod:`bench.batch`, ``--shape`` voxels, as .nii.gz):

* upload   — ``POST /v1/jobs/peaks`` of the file to ``fibertensor serve --no-worker`` (one
             API process, Redis broker): multipart receive, header checks, the inflate pass
             proving the gzip stream whole (which stores the .nii it inflates to and hashes
             the upload), the job record, the queue message; then, in this process, the
             job's first step on what the API stored: :func:`read_peaks_inputs` of it;
* poll     — ``GET /v1/jobs?label=…&limit=1000`` with ``--jobs`` succeeded jobs of that label
             in the store (:mod:`bench.batch`'s client polls every 0.25 s);
* download — ``GET /v1/jobs/{id}/results.zip`` and ``results/peaks.json`` of a job whose
             outputs are a real peaks job's;
* job      — the job process's bookkeeping outside the job's own work: :func:`run_job` in
             this process with a job kind that hard-links the real outputs (claim, log,
             heartbeat, output hashes, the final record), and a ``fibertensor worker``'s
             CPU per Celery task (Redis: receive, claim, acknowledge; a task for a finished
             job, so nothing else runs), each over ``--tasks`` jobs.

The client runs in this process; its CPU is not counted. Idle CPU of each server process
(janitor, broker heartbeats) is measured first and taken off. The peer is the job's own
read, compute and write (the reference job's line).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.batch import write_cohort
from bench.harness import Column, Report
from bench.processes import cpu_seconds, free_port, process_tree, service_environment, spawn, stop
from service.uploads import check_inputs
from worker.celery_app import create_celery_app, publish_job
from worker.input_limits import InputLimits
from worker.job_kinds import JobContext, JobKind, get_job_kind
from worker.job_runner import run_job
from worker.job_store import JobRecord, JobStatus, JobStore, utc_now
from worker.jobs.peaks import plan_peaks, read_peaks_inputs
from worker.params import PeaksParams

__all__ = ["add_arguments", "run"]


def _tree_cpu(roots: list[int]) -> float:
    return cpu_seconds(process_tree(roots))


def _per_call(roots: list[int], calls: int, action, idle_rate: float) -> float:
    """CPU seconds of the ``roots`` process trees per call of ``action``, idle CPU taken off."""
    before, started = _tree_cpu(roots), time.perf_counter()
    for _ in range(calls):
        action()
    wall = time.perf_counter() - started
    return (_tree_cpu(roots) - before - idle_rate * wall) / calls


def _idle_rate(roots: list[int], seconds: float = 5.0) -> float:
    before = _tree_cpu(roots)
    time.sleep(seconds)
    return (_tree_cpu(roots) - before) / seconds


def _real_outputs(store: JobStore, fod: Path) -> tuple[JobRecord, float, float]:
    """Run one real peaks job (this machine's backend) in this process; its record, the CPU
    seconds of the whole :func:`run_job` and of the job's own ``run``."""
    params = PeaksParams()
    job_id = _commit(store, {"fod": fod}, params.model_dump(mode="json"), "reference", as_the_api=True)
    kind = get_job_kind("peaks")
    inside = [0.0]

    def timed_run(ctx: JobContext) -> list[Path]:
        started = time.process_time()
        try:
            return kind.run(ctx)
        finally:
            inside[0] += time.process_time() - started

    timed = JobKind(kind.name, kind.summary, kind.params_model, kind.inputs, kind.validate, timed_run)
    started = time.process_time()
    record = run_job(store, job_id, lambda name: timed, heartbeat_interval=5.0, heartbeat_timeout=120.0,
                     max_worker_losses=3)
    if record is None or record.status is not JobStatus.succeeded:
        raise SystemExit(f"the reference peaks job did not succeed: {record}")
    return record, time.process_time() - started, inside[0]


def _commit(store: JobStore, files: dict[str, Path], params: dict, label: str, *, as_the_api: bool = False,
            **fields) -> str:
    """A queued peaks job of hard-linked ``files``; ``as_the_api``: stored as the API stores an
    upload (a .nii.gz kept inflated by the check, the record naming what was uploaded)."""
    with store.staging() as (job_id, folder):
        stored = {slot: folder / "inputs" / f"{slot}{''.join(path.suffixes)}" for slot, path in files.items()}
        for slot, path in files.items():
            os.link(path, stored[slot])
        uploaded = {}
        if as_the_api:
            stored, uploaded = check_inputs(get_job_kind("peaks"), stored, PeaksParams.model_validate(params),
                                            InputLimits(8 << 30, 64 << 20, 64 << 30))
        record = JobRecord(id=job_id, kind="peaks", tenant="default", label=label, params=params,
                           inputs={slot: path.name for slot, path in stored.items()}, uploaded=uploaded,
                           created_at=utc_now(), **fields)
        store.commit(folder, record)
    return job_id


def _stored_input_read(store: JobStore, label: str, reads: int) -> float:
    """CPU seconds (all threads) per :func:`read_peaks_inputs`, a job's first step, of the FOD
    an upload of ``label`` left in the store, as the API stored it."""
    record = next(store.records(label=label))
    path = store.inputs_dir(record.id) / record.inputs["fod"]
    read_peaks_inputs(plan_peaks(path))  # imports
    started = time.process_time()
    for _ in range(reads):
        read_peaks_inputs(plan_peaks(path))
    return (time.process_time() - started) / reads


def _bookkeeping(store: JobStore, fod: Path, reference: JobRecord, runs: int) -> float:
    """CPU seconds per :func:`run_job` of a job whose ``run`` only hard-links the reference
    job's outputs: everything the runner and job store do around a job."""
    outputs = store.outputs_dir(reference.id)
    kind = get_job_kind("peaks")

    def link_outputs(ctx: JobContext) -> list[Path]:
        paths = []
        for result in reference.results:
            os.link(outputs / result.name, ctx.out_dir / result.name)
            paths.append(ctx.out_dir / result.name)
        return paths

    linking = JobKind(kind.name, kind.summary, kind.params_model, kind.inputs, kind.validate, link_outputs)
    ids = [_commit(store, {"fod": fod}, reference.params, "bookkeeping") for _ in range(runs)]
    started = time.process_time()
    for job_id in ids:
        run_job(store, job_id, lambda name: linking, heartbeat_interval=5.0, heartbeat_timeout=120.0,
                max_worker_losses=3)
    return (time.process_time() - started) / runs


def _fake_batch(store: JobStore, reference: JobRecord, jobs: int, label: str) -> None:
    """``jobs`` succeeded jobs of ``label`` with the reference job's record and result list."""
    for _ in range(jobs):
        with store.staging() as (job_id, folder):
            store.commit(folder, reference.model_copy(update={"id": job_id, "label": label}))


def _wait_queue_empty(url: str, queue: str = "fibertensor", timeout: float = 600) -> None:
    import redis

    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if client.llen(queue) == 0 and client.hlen("unacked") == 0:
            return
        time.sleep(0.05)
    raise SystemExit("the worker did not take the queued tasks")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--uploads", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=300, help="succeeded jobs of the polled label")
    parser.add_argument("--polls", type=int, default=40)
    parser.add_argument("--downloads", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=40, help="jobs for the runner and Celery bookkeeping")
    parser.add_argument("--shape", type=int, nargs=3, default=[96, 96, 60])
    parser.add_argument("--work", type=Path, help="work folder (default: a new temporary one, removed after)")
    parser.add_argument("--redis-server", default=shutil.which("redis-server"))
    parser.add_argument("--parts", default="upload,poll,download,job", help="what to measure")


def run(args: argparse.Namespace, report: Report) -> None:
    parts = set(args.parts.split(","))
    if not args.redis_server:
        raise SystemExit("no redis-server on PATH; give --redis-server PATH")
    work = args.work or Path(tempfile.mkdtemp(prefix="fibertensor-service-cpu-"))
    work.mkdir(parents=True, exist_ok=True)
    fod = work / "inputs" / "sub-0000.nii.gz"
    if not fod.exists():
        write_cohort(fod.parent, 1, tuple(args.shape), 8)
    body = fod.read_bytes()
    report.progress(f"input {fod} ({len(body) / 1e6:.1f} MB); work folder {work}")

    data_dir = work / "data"
    shutil.rmtree(data_dir, ignore_errors=True)
    store = JobStore(data_dir)
    rows: dict[str, float] = {}
    if parts - {"upload"}:
        reference, job_cpu, run_cpu = _real_outputs(store, fod)
        report.progress(f"reference job: {len(reference.results)} results, "
                        f"{sum(r.bytes for r in reference.results) / 1e6:.1f} MB")
        rows["reference job: run_job, all of it"] = job_cpu
        rows["reference job: the job's own run (read, compute, write)"] = run_cpu
    if "job" in parts:
        rows["job: runner + job store (run_job around the job)"] = _bookkeeping(store, fod, reference, args.tasks)

    processes = []
    try:
        redis_port, port = free_port(), free_port()
        processes.append(spawn([args.redis_server, "--port", str(redis_port), "--save", "",
                                               "--appendonly", "no"], dict(os.environ), work / "redis.log"))
        broker = f"redis://127.0.0.1:{redis_port}/0"
        env = service_environment(data_dir, broker)
        api = spawn([sys.executable, "-m", "service", "serve", "--no-worker", "--port", str(port),
                                    "--api-workers", "1", "--log-level", "warning"], env, work / "serve.log")
        processes.append(api)
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=600) as http:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    if http.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.2)
            roots = [api.pid]
            idle = _idle_rate(roots)

            def upload() -> None:
                response = http.post("/v1/jobs/peaks", files={"fod": (fod.name, body)}, data={"label": "uploads"})
                if response.status_code != 202:
                    raise SystemExit(f"upload refused: {response.status_code} {response.text}")

            if "upload" in parts:
                upload()  # the first request imports and warms what the others reuse
                rows["API: upload of the .nii.gz (POST /v1/jobs/peaks)"] = _per_call(roots, args.uploads, upload, idle)
                rows["job: read of the input as the API stored it (read_peaks_inputs)"] = _stored_input_read(
                    store, "uploads", args.uploads)

            def poll() -> None:
                response = http.get("/v1/jobs", params={"label": "cohort", "limit": 1000})
                if response.status_code != 200 or len(response.json()["jobs"]) != args.jobs:
                    raise SystemExit(f"listing failed: {response.status_code} {response.text[:300]}")

            if "poll" in parts:
                _fake_batch(store, reference, args.jobs, "cohort")
                rows[f"API: first poll, {args.jobs} jobs (records parsed)"] = _per_call(roots, 1, poll, idle)
                rows[f"API: poll of {args.jobs} jobs (GET /v1/jobs?label=…)"] = _per_call(roots, args.polls, poll, idle)

            def download() -> None:
                with http.stream("GET", f"/v1/jobs/{reference.id}/results.zip") as response:
                    size = sum(len(chunk) for chunk in response.iter_bytes(1 << 20))
                if response.status_code != 200 or size < sum(r.bytes for r in reference.results):
                    raise SystemExit(f"download failed: {response.status_code}")
                http.get(f"/v1/jobs/{reference.id}/results/peaks.json").raise_for_status()

            if "download" in parts:
                download()
                rows["API: results.zip + peaks.json"] = _per_call(roots, args.downloads, download, idle)
        if "job" in parts:
            worker = spawn([sys.executable, "-m", "service", "worker", "--concurrency", "1",
                                           "--log-level", "warning"], env, work / "worker.log")
            processes.append(worker)
            celery = create_celery_app(data_dir=data_dir, broker_url=broker)
            # a delivery of a finished job: the worker receives, claims (finds it done) and acks
            publish_job(celery, reference.id)
            _wait_queue_empty(broker)
            time.sleep(3)
            idle = _idle_rate([worker.pid])

            def publish_all() -> None:
                for _ in range(args.tasks):
                    publish_job(celery, reference.id)
                _wait_queue_empty(broker)

            rows["job: Celery task delivery, Redis (worker + pool process)"] = _per_call([worker.pid], 1, publish_all,
                                                                                     idle) / args.tasks
    finally:
        stop(*processes, timeout=60)
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)

    own = rows.get("reference job: the job's own run (read, compute, write)")
    report.table(f"CPU seconds per call ({os.cpu_count()} cores here; idle CPU taken off)",
                 [{"step": name, "cpu_s": seconds, "share_of_job": seconds / own if own else None}
                  for name, seconds in rows.items()],
                 [Column("step", "step"), Column("cpu_s", "CPU s", ".4f"),
                  Column("share_of_job", "of the job's own run", ".1%")])
