"""Concurrent peaks jobs through the whole service against the bare CLI.

Two deployments, each started as real processes on this machine:

* embedded — ``fibertensor serve`` (API + one worker, filesystem broker, no Redis);
* redis    — a private ``redis-server``, ``fibertensor serve --no-worker`` and two
  ``fibertensor worker`` processes (CPU backend).

For each: the latency of one job on an idle service (upload → result downloaded), then
``--jobs`` jobs submitted at once: all must succeed and none may be lost; median and p95
upload → result and the wall time of the batch. The bare CLI (``fibertensor peaks`` on the
same file, process start included) is the reference for the service's overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import nibabel as nib
import numpy as np

from bench.harness import REPO, Column, Report, ratio
from bench.processes import free_port, service_environment, spawn, stop, wait_ready
from gpu.peaks.phantom import fod_phantom

__all__ = ["add_arguments", "run"]

_TERMINAL = {"succeeded", "failed", "cancelled"}
_POLL = 0.25


async def _upload(http: httpx.AsyncClient, fod: Path, label: str) -> tuple[str | None, float]:
    start = time.perf_counter()
    response = await http.post("/v1/jobs/peaks", files={"fod": (fod.name, fod.read_bytes())},
                               data={"backend": "cpu", "label": label})
    return (response.json()["id"] if response.status_code == 202 else None), start


async def _download(http: httpx.AsyncClient, job: dict, out: Path) -> None:
    for result in job["results"]:
        response = await http.get(result["url"])
        (out / f"{job['id']}-{result['name']}").write_bytes(response.content)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _run_seconds(job: dict) -> float:
    from datetime import datetime

    return (datetime.fromisoformat(job["finished_at"]) - datetime.fromisoformat(job["started_at"])).total_seconds()


async def _idle_job(http: httpx.AsyncClient, fod: Path, out: Path) -> tuple[float, float]:
    """One job on an idle service, polled every 20 ms: (upload → results downloaded, run time)."""
    job_id, start = await _upload(http, fod, "idle")
    while (job := (await http.get(f"/v1/jobs/{job_id}")).json())["status"] not in _TERMINAL:
        await asyncio.sleep(0.02)
    await _download(http, job, out)
    return time.perf_counter() - start, _run_seconds(job)


async def _batch(http: httpx.AsyncClient, fod: Path, out: Path, jobs: int, label: str) -> dict:
    """``jobs`` uploads at once, then one poller over the batch's label (as the CLI polls a
    batch); each job's latency ends when its results are downloaded."""
    start = time.perf_counter()
    uploads = await asyncio.gather(*(_upload(http, fod, label) for _ in range(jobs)))
    began = {job_id: t for job_id, t in uploads if job_id}
    done: dict[str, float] = {}
    final: dict[str, dict] = {}
    downloads = []
    deadline = time.monotonic() + 1800
    while len(final) < len(began) and time.monotonic() < deadline:
        await asyncio.sleep(_POLL)
        listing = (await http.get("/v1/jobs", params={"label": label, "limit": 1000})).json()["jobs"]
        for job in listing:
            if job["id"] in began and job["id"] not in final and job["status"] in _TERMINAL:
                final[job["id"]] = job

                async def fetch(job=job):
                    if job["status"] == "succeeded":
                        await _download(http, job, out)
                    done[job["id"]] = time.perf_counter()

                downloads.append(asyncio.create_task(fetch()))
    await asyncio.gather(*downloads)
    wall = time.perf_counter() - start
    latencies = sorted(done[j] - began[j] for j, job in final.items() if job["status"] == "succeeded")
    return {
        "rejected": jobs - len(began),
        "succeeded": len(latencies),
        "failed": sum(1 for job in final.values() if job["status"] != "succeeded"),
        "lost": len(began) - len(final),
        "median": _median(latencies),
        "p95": latencies[max(0, int(np.ceil(0.95 * len(latencies))) - 1)] if latencies else float("nan"),
        "wall": wall,
        "run_median": _median([_run_seconds(j) for j in final.values() if j["status"] == "succeeded"]),
    }


async def _measure(base: str, fod: Path, out: Path, jobs: int, warmup: int) -> dict:
    limits = httpx.Limits(max_connections=jobs + 10, max_keepalive_connections=jobs + 10)
    async with httpx.AsyncClient(base_url=base, timeout=600, limits=limits) as http:
        # each pool process loads the compiled kernels from numba's cache on its first job
        warm = await _batch(http, fod, out, warmup, "warmup")
        if warm["succeeded"] != warmup:
            raise SystemExit(f"warm-up jobs failed ({warm}); see the job logs under {out.parent}")
        idle = [await _idle_job(http, fod, out) for _ in range(5)]
        result = await _batch(http, fod, out, jobs, "batch")
    result["idle"] = statistics.median(latency for latency, _ in idle)
    result["idle_run"] = statistics.median(run for _, run in idle)
    return result


def _bare_cli(fod: Path, work: Path, repeats: int = 3) -> tuple[float, float]:
    """``fibertensor peaks`` on the same file: median wall time of the process and the
    median time the job itself reports (sidecar ``seconds.total``), after one run that fills
    numba's cache."""
    import json

    env = service_environment(work)
    walls, inside = [], []
    for i in range(repeats + 1):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "service", "peaks", str(fod), str(work / f"cli{i}"),
                        "--backend", "cpu", "--quiet"], cwd=REPO, env=env, check=True, capture_output=True)
        if i:
            walls.append(time.perf_counter() - start)
            inside.append(json.loads((work / f"cli{i}.json").read_text())["seconds"]["total"])
    return statistics.median(walls), statistics.median(inside)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--grid", type=int, default=16, help="phantom grid is GRID³ voxels")
    parser.add_argument("--lmax", type=int, default=8)


def run(args: argparse.Namespace, report: Report) -> None:
    work = Path(tempfile.mkdtemp(prefix="fibertensor-bench-"))
    phantom = fod_phantom((args.grid,) * 3, args.lmax, seed=7)
    fod = work / "fod.nii.gz"
    nib.save(nib.Nifti1Image(phantom["sh"], np.eye(4)), str(fod))
    report.progress(f"phantom {args.grid}³ voxels, lmax {args.lmax} ({phantom['sh'].shape[-1]} volumes), "
                    f"{fod.stat().st_size} bytes; work folder {work}")

    cli, cli_inside = _bare_cli(fod, work)
    report.progress(f"bare CLI `fibertensor peaks`: {cli:.2f} s per process, of which the job {cli_inside:.2f} s")

    rows = []
    for mode in ("embedded", "redis"):
        data_dir = work / f"data-{mode}"
        out = work / f"out-{mode}"
        out.mkdir()
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        procs: list[subprocess.Popen] = []
        try:
            if mode == "embedded":
                procs.append(spawn([sys.executable, "-m", "service", "serve", "--port", str(port), "--log-level",
                                    "warning"], service_environment(data_dir), work / f"{mode}-serve.log"))
                workers, label = 1, "embedded (1 worker)"
            else:
                redis_port = free_port()
                procs.append(spawn([shutil.which("redis-server") or "redis-server", "--port", str(redis_port),
                                    "--save", "", "--appendonly", "no"], os.environ.copy(), work / "redis.log"))
                env = service_environment(data_dir, f"redis://127.0.0.1:{redis_port}/0")
                procs.append(spawn([sys.executable, "-m", "service", "serve", "--no-worker", "--port", str(port),
                                    "--log-level", "warning"], env, work / f"{mode}-serve.log"))
                workers, label = 2, "redis (2 CPU workers)"
                for i in range(workers):
                    procs.append(spawn([sys.executable, "-m", "service", "worker", "--hostname", f"cpu{i}@bench",
                                        "--log-level", "warning"], env, work / f"{mode}-worker{i}.log"))
            wait_ready(base, workers, procs)
            r = asyncio.run(_measure(base, fod, out, args.jobs, warmup=2 * workers))
        finally:
            stop(*procs, timeout=60)
        report.progress(f"{mode}: {r['succeeded']}/{args.jobs} succeeded, {r['failed']} failed, {r['rejected']} "
                        f"rejected, {r['lost']} lost")
        rows.append({"deployment": label, **r, "jobs_per_s": r["succeeded"] / r["wall"],
                     "overhead": r["idle"] - r["idle_run"], "idle_x_cli": ratio(r["idle"], cli),
                     "all_ok": r["succeeded"] == args.jobs and r["lost"] == 0})
    rows.append({"deployment": "bare CLI (process)", "idle": cli, "idle_run": cli_inside, "overhead": cli - cli_inside,
                 "idle_x_cli": 1.0})
    report.table(
        f"{args.jobs} concurrent peaks jobs, {args.grid}³ voxels each (CPU backend)", rows,
        [Column("deployment", "deployment"), Column("succeeded", "ok", "d"), Column("lost", "lost", "d"),
         Column("all_ok", "all done"), Column("median", "median s", ".2f"), Column("p95", "p95 s", ".2f"),
         Column("wall", "wall s", ".2f"), Column("jobs_per_s", "jobs/s", ".2f"), Column("idle", "idle job s", ".3f"),
         Column("idle_run", "job run s", ".3f"), Column("overhead", "overhead s", ".3f"),
         Column("idle_x_cli", "idle / CLI", ".2f")],
        note="median/p95: upload start to results downloaded, per job of the concurrent batch; wall: whole batch; "
             "idle job: one job on an idle service (median of 5); job run: started→finished in the worker "
             "(CLI: the job's own seconds.total); overhead: idle job − job run (upload, checks, queue, poll, "
             "download; CLI: process start and imports)")
    shutil.rmtree(work, ignore_errors=True)
