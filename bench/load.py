"""Load benchmark: many small jobs from concurrent clients through the Redis deployment.

Starts, on 127.0.0.1 only, a private ``redis-server``, ``fibertensor serve --no-worker`` and
two ``fibertensor worker`` processes (CPU backend), then ``--clients`` asyncio clients each
submit their share of ``--jobs`` peaks jobs (a tiny FOD phantom) and poll their batch by label
until every job is finished, as ``fibertensor jobs --wait`` does. Reports jobs lost (accepted
but never finished, or missing from the listing), the latency of the status polls (median,
p95, max) and the resident memory (RSS) of the API and of the workers (main + pool
processes) over the run, sampled every second. Every loop is bounded by ``--timeout``.

    python3 bench/load.py [--jobs 1000] [--clients 20] [--timeout 1800]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import nibabel as nib
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.service import _env, _free_port, _spawn, _stop, _wait_ready  # noqa: E402
from gpu.peaks.phantom import fod_phantom  # noqa: E402

_TERMINAL = {"succeeded", "failed", "cancelled"}
_POLL = 0.5


def _rss_bytes(pid: int) -> int:
    """RSS of a process and its children (a Celery worker's pool), from /proc."""
    total = 0
    pids = [pid]
    while pids:
        current = pids.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            total += int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS"))) * 1024
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except (OSError, StopIteration):
            continue
        pids.extend(int(c) for c in children)
    return total


class _Sampler(threading.Thread):
    """RSS of the API and of the workers every second, until stopped."""

    def __init__(self, api: int, workers: list[int]):
        super().__init__(daemon=True)
        self.api, self.workers = api, workers
        self.samples: list[tuple[float, int, int]] = []
        self.done = threading.Event()

    def run(self) -> None:
        start = time.monotonic()
        while not self.done.wait(1.0):
            self.samples.append((time.monotonic() - start, _rss_bytes(self.api),
                                 sum(_rss_bytes(pid) for pid in self.workers)))


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before unfinished jobs count as lost")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="fibertensor-load-"))
    fod = work / "fod.nii.gz"
    nib.save(nib.Nifti1Image(fod_phantom((3, 3, 3), 4, seed=7)["sh"], np.eye(4)), str(fod))
    redis_port, port = _free_port(), _free_port()
    base = f"http://127.0.0.1:{port}"
    env = _env(work / "data", f"redis://127.0.0.1:{redis_port}/0")
    procs = [_spawn([shutil.which("redis-server") or "redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                     "--save", "", "--appendonly", "no"], os.environ.copy(), work / "redis.log")]
    try:
        procs.append(_spawn([sys.executable, "-m", "service", "serve", "--no-worker", "--port", str(port),
                             "--log-level", "warning"], env, work / "api.log"))
        for i in range(2):
            procs.append(_spawn([sys.executable, "-m", "service", "worker", "--hostname", f"cpu{i}@load",
                                 "--log-level", "warning"], env, work / f"worker{i}.log"))
        _wait_ready(base, 2, procs)
        sampler = _Sampler(procs[1].pid, [p.pid for p in procs[2:]])
        sampler.start()
        statuses, polls, wall = asyncio.run(_load(base, fod.read_bytes(), args.jobs, args.clients, args.timeout))
        sampler.done.set()
        sampler.join()
    finally:
        _stop(procs[1:] + procs[:1])

    counts = {s: sum(1 for v in statuses.values() if v == s) for s in ("succeeded", "failed", "cancelled", "lost")}
    polls.sort()
    p95 = polls[int(0.95 * (len(polls) - 1))] if polls else float("nan")
    samples = sampler.samples or [(0.0, 0, 0)]
    mib = 1 << 20
    print(f"\n{args.jobs} peaks jobs (3³ voxels, lmax 4, CPU) from {args.clients} clients; Redis, API and "
          f"2 workers on 127.0.0.1; {os.cpu_count()} CPU cores")
    print(f"{'submitted':>10}{'succeeded':>10}{'failed':>8}{'lost':>6}{'wall s':>8}{'jobs/s':>8}"
          f"{'polls':>7}{'poll p50 ms':>12}{'poll p95 ms':>12}{'poll max ms':>12}")
    print(f"{len(statuses):>10}{counts['succeeded']:>10}{counts['failed']:>8}{counts['lost']:>6}{wall:>8.1f}"
          f"{counts['succeeded'] / wall:>8.2f}{len(polls):>7}{1e3 * statistics.median(polls):>12.1f}"
          f"{1e3 * p95:>12.1f}{1e3 * polls[-1]:>12.1f}")
    print(f"{'RSS MiB':<10}{'first':>8}{'peak':>8}{'last':>8}   (sampled every 1 s, {len(samples)} samples)")
    for name, column in (("API", 1), ("workers", 2)):
        series = [sample[column] / mib for sample in samples]
        print(f"{name:<10}{series[0]:>8.0f}{max(series):>8.0f}{series[-1]:>8.0f}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
