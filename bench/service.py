"""Service benchmark: concurrent peaks jobs through the whole service vs the bare CLI.

Two deployments, each started as real processes on this machine:

* embedded — ``fibertensor serve`` (API + one worker, filesystem broker, no Redis);
* redis    — a private ``redis-server``, ``fibertensor serve --no-worker`` and two
  ``fibertensor worker`` processes (CPU backend).

For each: the latency of one job on an idle service (upload → result downloaded), then
``--jobs`` jobs submitted at once: all must succeed and none may be lost; median and p95
upload → result and the wall time of the batch. The bare CLI (``fibertensor peaks`` on the
same file, process start included) is the reference for the service's overhead.

    python3 bench/service.py [--jobs 50] [--grid 10] [--lmax 8]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import nibabel as nib
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpu.fod_phantom import fod_phantom  # noqa: E402

_TERMINAL = {"succeeded", "failed", "cancelled"}
_POLL = 0.25


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(data_dir: Path, broker_url: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env.update(FIBERTENSOR_DATA_DIR=str(data_dir), FIBERTENSOR_BROKER_URL=broker_url, PYTHONPATH=str(REPO))
    return env


def _spawn(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "ab") as handle:
        return subprocess.Popen(argv, cwd=REPO, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _wait_ready(base: str, workers: int, procs: list[subprocess.Popen], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            raise SystemExit("a service process exited early; see the logs in the work folder")
        try:
            response = httpx.get(f"{base}/readyz", timeout=5)
            if response.status_code == 200 and len(response.json()["workers"]) >= workers:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{base} not ready after {timeout} s")


async def _one_job(http: httpx.AsyncClient, fod: Path, out: Path) -> tuple[str, float, dict]:
    """Upload, poll, download every result; returns (status, seconds, job)."""
    start = time.perf_counter()
    with open(fod, "rb") as handle:
        response = await http.post("/v1/jobs/peaks", files={"fod": (fod.name, handle.read())},
                                   data={"backend": "cpu", "label": "bench"})
    if response.status_code != 202:
        return f"rejected {response.status_code}", time.perf_counter() - start, {}
    job_id = response.json()["id"]
    while True:
        await asyncio.sleep(_POLL)
        response = await http.get(f"/v1/jobs/{job_id}")
        if response.status_code != 200:
            return "lost", time.perf_counter() - start, {}
        job = response.json()
        if job["status"] in _TERMINAL:
            break
    if job["status"] == "succeeded":
        for result in job["results"]:
            download = await http.get(result["url"])
            (out / f"{job_id}-{result['name']}").write_bytes(download.content)
    return job["status"], time.perf_counter() - start, job


def _run_seconds(job: dict) -> float:
    from datetime import datetime

    started = datetime.fromisoformat(job["started_at"])
    finished = datetime.fromisoformat(job["finished_at"])
    return (finished - started).total_seconds()


async def _measure(base: str, fod: Path, out: Path, jobs: int, warmup: int) -> dict:
    limits = httpx.Limits(max_connections=jobs + 10, max_keepalive_connections=jobs + 10)
    async with httpx.AsyncClient(base_url=base, timeout=300, limits=limits) as http:
        await asyncio.gather(*(_one_job(http, fod, out) for _ in range(warmup)))  # numba compile/cache load per pool process
        single = [await _one_job(http, fod, out) for _ in range(5)]
        start = time.perf_counter()
        batch = await asyncio.gather(*(_one_job(http, fod, out) for _ in range(jobs)))
        wall = time.perf_counter() - start
    latencies = sorted(seconds for status, seconds, _ in batch if status == "succeeded")
    return {
        "single": statistics.median(s for _, s, _ in single),
        "single_run": statistics.median(_run_seconds(j) for _, _, j in single),
        "succeeded": len(latencies),
        "failed": sum(1 for status, _, _ in batch if status in ("failed", "cancelled")),
        "lost": sum(1 for status, _, _ in batch if status not in _TERMINAL),
        "median": statistics.median(latencies) if latencies else float("nan"),
        "p95": latencies[max(0, int(np.ceil(0.95 * len(latencies))) - 1)] if latencies else float("nan"),
        "wall": wall,
        "run_median": statistics.median(_run_seconds(j) for s, _, j in batch if s == "succeeded"),
    }


def _bare_cli(fod: Path, work: Path, repeats: int = 3) -> float:
    """Median wall time of ``fibertensor peaks`` (after one run that fills numba's cache)."""
    env = _env(work)
    times = []
    for i in range(repeats + 1):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "service", "peaks", str(fod), str(work / f"cli{i}"),
                        "--backend", "cpu"], cwd=REPO, env=env, check=True, capture_output=True)
        if i:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--grid", type=int, default=10, help="phantom grid is GRID³ voxels")
    parser.add_argument("--lmax", type=int, default=8)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="fibertensor-bench-"))
    phantom = fod_phantom((args.grid,) * 3, args.lmax, seed=7)
    fod = work / "fod.nii.gz"
    nib.save(nib.Nifti1Image(phantom["sh"], np.eye(4)), str(fod))
    print(f"phantom {args.grid}³ voxels, lmax {args.lmax} ({phantom['sh'].shape[-1]} volumes), "
          f"{fod.stat().st_size} bytes; {os.cpu_count()} CPU cores; work folder {work}", flush=True)

    cli = _bare_cli(fod, work)
    print(f"bare CLI `fibertensor peaks` (process start included): {cli:.2f} s", flush=True)

    results = {}
    for mode in ("embedded", "redis"):
        data_dir = work / f"data-{mode}"
        out = work / f"out-{mode}"
        out.mkdir()
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        procs: list[subprocess.Popen] = []
        try:
            if mode == "embedded":
                procs.append(_spawn([sys.executable, "-m", "service", "serve", "--port", str(port), "--log-level", "warning"],
                                    _env(data_dir), work / f"{mode}-serve.log"))
                workers = 1
            else:
                redis_port = _free_port()
                procs.append(_spawn([shutil.which("redis-server") or "redis-server", "--port", str(redis_port),
                                     "--save", "", "--appendonly", "no"], os.environ.copy(), work / "redis.log"))
                env = _env(data_dir, f"redis://127.0.0.1:{redis_port}/0")
                procs.append(_spawn([sys.executable, "-m", "service", "serve", "--no-worker", "--port", str(port),
                                     "--log-level", "warning"], env, work / f"{mode}-serve.log"))
                workers = 2
                for i in range(workers):
                    procs.append(_spawn([sys.executable, "-m", "service", "worker", "--hostname", f"cpu{i}@bench",
                                         "--log-level", "warning"], env, work / f"{mode}-worker{i}.log"))
            _wait_ready(base, workers, procs)
            results[mode] = asyncio.run(_measure(base, fod, out, args.jobs, warmup=2 * workers))
        finally:
            _stop(procs)
        r = results[mode]
        print(f"{mode}: {r['succeeded']}/{args.jobs} succeeded, {r['failed']} failed, {r['lost']} lost", flush=True)

    print()
    print(f"{'deployment':<22}{'ok/lost':>9}{'idle job s':>12}{'÷ CLI':>8}{'median s':>10}{'p95 s':>9}"
          f"{'batch wall s':>14}{'jobs/s':>8}{'job run s':>11}")
    for mode, label in (("embedded", "embedded (1 worker)"), ("redis", "redis (2 CPU workers)")):
        r = results[mode]
        print(f"{label:<22}{r['succeeded']:>5}/{r['lost']:<3}{r['single']:>12.2f}{r['single'] / cli:>8.2f}"
              f"{r['median']:>10.2f}{r['p95']:>9.2f}{r['wall']:>14.2f}{r['succeeded'] / r['wall']:>8.2f}"
              f"{r['run_median']:>11.2f}")
    print(f"{'bare CLI':<22}{'':>9}{cli:>12.2f}{1.0:>8.2f}")
    print("idle job: one job on an idle service, upload to last result downloaded (median of 5); "
          "÷ CLI: that over the bare CLI's wall time; median/p95: per job in the concurrent batch; "
          "job run: started→finished inside the worker (median, batch)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
