"""Many small jobs from concurrent clients through the Redis deployment.

Starts, on 127.0.0.1 only, a private ``redis-server``, ``fibertensor serve --no-worker`` and
two ``fibertensor worker`` processes (CPU backend), then ``--clients`` asyncio clients each
submit their share of ``--jobs`` peaks jobs (a tiny FOD phantom) and poll their batch by label
until every job is finished, as ``fibertensor jobs --wait`` does. Reports jobs lost (accepted
but never finished, or missing from the listing), the latency of the status polls (median,
p95, max) and the resident memory (RSS) of the API and of the workers (main + pool
processes) over the run, sampled every second. Every loop is bounded by ``--timeout``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import nibabel as nib
import numpy as np

from bench.harness import Column, Report
from bench.processes import TreeMonitor, free_port, service_environment, spawn, stop, wait_ready
from gpu.peaks.phantom import fod_phantom

__all__ = ["add_arguments", "run"]

_TERMINAL = {"succeeded", "failed", "cancelled"}
_POLL = 0.5


async def _client(http: httpx.AsyncClient, fod: bytes, label: str, jobs: int, deadline: float,
                  polls: list[float]) -> dict[str, str]:
    """Submit ``jobs`` jobs, then poll the batch until each is finished; id → final status."""
    accepted = []
    for _ in range(jobs):
        response = await http.post("/v1/jobs/peaks", files={"fod": ("fod.nii.gz", fod)},
                                   data={"backend": "cpu", "label": label, "npeaks": "2"})
        if response.status_code != 202:
            raise SystemExit(f"submit refused: {response.status_code} {response.text}")
        accepted.append(response.json()["id"])
    final: dict[str, str] = {}
    while len(final) < len(accepted) and time.monotonic() < deadline:
        await asyncio.sleep(_POLL)
        start = time.perf_counter()
        listing = (await http.get("/v1/jobs", params={"label": label, "limit": 1000})).json()["jobs"]
        polls.append(time.perf_counter() - start)
        final.update({j["id"]: j["status"] for j in listing if j["status"] in _TERMINAL})
    return {job_id: final.get(job_id, "lost") for job_id in accepted}


async def _load(base: str, fod: bytes, jobs: int, clients: int, timeout: float) -> tuple[dict, list[float], float]:
    polls: list[float] = []
    deadline = time.monotonic() + timeout
    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as http:
        start = time.perf_counter()
        shares = [jobs // clients + (k < jobs % clients) for k in range(clients)]
        outcomes = await asyncio.gather(*(_client(http, fod, f"load-{k}", n, deadline, polls)
                                          for k, n in enumerate(shares)))
        wall = time.perf_counter() - start
    statuses = {job_id: status for outcome in outcomes for job_id, status in outcome.items()}
    return statuses, polls, wall


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before unfinished jobs count as lost")


def run(args: argparse.Namespace, report: Report) -> None:
    work = Path(tempfile.mkdtemp(prefix="fibertensor-load-"))
    fod = work / "fod.nii.gz"
    nib.save(nib.Nifti1Image(fod_phantom((3, 3, 3), 4, seed=7)["sh"], np.eye(4)), str(fod))
    redis_port, port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    env = service_environment(work / "data", f"redis://127.0.0.1:{redis_port}/0")
    procs = [spawn([shutil.which("redis-server") or "redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no"], os.environ.copy(), work / "redis.log")]
    try:
        procs.append(spawn([sys.executable, "-m", "service", "serve", "--no-worker", "--port", str(port),
                            "--log-level", "warning"], env, work / "api.log"))
        for i in range(2):
            procs.append(spawn([sys.executable, "-m", "service", "worker", "--hostname", f"cpu{i}@load",
                                "--log-level", "warning"], env, work / f"worker{i}.log"))
        wait_ready(base, 2, procs)
        api, workers = procs[1].pid, [p.pid for p in procs[2:]]
        with TreeMonitor([api, *workers], interval=1.0) as monitor:
            statuses, polls, wall = asyncio.run(_load(base, fod.read_bytes(), args.jobs, args.clients, args.timeout))
    finally:
        stop(*procs[1:], procs[0], timeout=60)

    counts = {s: sum(1 for v in statuses.values() if v == s) for s in ("succeeded", "failed", "cancelled", "lost")}
    polls.sort()
    p95 = polls[int(0.95 * (len(polls) - 1))] if polls else float("nan")
    report.table(
        f"{args.jobs} peaks jobs (3³ voxels, lmax 4, CPU) from {args.clients} clients; Redis, API and 2 workers on "
        "127.0.0.1", [{
            "submitted": len(statuses), **counts, "wall_s": wall, "jobs_per_s": counts["succeeded"] / wall,
            "polls": len(polls), "poll_p50_ms": 1e3 * statistics.median(polls) if polls else None,
            "poll_p95_ms": 1e3 * p95, "poll_max_ms": 1e3 * polls[-1] if polls else None,
            "none_lost": counts["lost"] == 0}],
        [Column("submitted", "submitted", "d"), Column("succeeded", "succeeded", "d"), Column("failed", "failed", "d"),
         Column("lost", "lost", "d"), Column("none_lost", "none lost"), Column("wall_s", "wall s", ".1f"),
         Column("jobs_per_s", "jobs/s", ".2f"), Column("polls", "polls", "d"),
         Column("poll_p50_ms", "poll p50 ms", ".1f"), Column("poll_p95_ms", "poll p95 ms", ".1f"),
         Column("poll_max_ms", "poll max ms", ".1f")])
    mib = 1 << 20
    rows = []
    for name, roots in (("API", [api]), ("workers", workers)):
        series = monitor.rss(roots) / mib
        rows.append({"process": name, "first_mib": series[0], "peak_mib": series.max(), "last_mib": series[-1]})
    report.table(f"RSS MiB, sampled every 1 s ({len(monitor.samples)} samples)", rows,
                 [Column("process", "process"), Column("first_mib", "first", ".0f"),
                  Column("peak_mib", "peak", ".0f"), Column("last_mib", "last", ".0f")])
    shutil.rmtree(work, ignore_errors=True)
