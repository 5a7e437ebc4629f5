"""Faults with real processes: Redis killed or restarted while jobs are queued and
running, a worker SIGKILLed while it writes results, the data volume full during an upload
and while results are written. Each test states what the user saw and what was lost:
nothing.

The API runs as ``fibertensor serve --no-worker`` and the workers as ``fibertensor worker``,
both with the test job kind ``scale`` registered (it multiplies a volume, slowly if asked).
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import nibabel as nib
import numpy as np
import pytest

from tests.integration.processes import REPO, free_port, service_env, start_worker, stop, wait_for
from tests.service.toy_kind import write_volume
from worker.job_store import JobStore

pytestmark = pytest.mark.requires_redis

# Liveness in seconds, so deaths are noticed quickly; the limits nest as Settings demands. No
# pool process loads the peaks kernels as it starts: only the test kind runs here.
FAST = dict(heartbeat_interval=0.2, heartbeat_timeout=2.0, janitor_interval=0.5, job_soft_time_limit=40,
            job_time_limit=50, visibility_timeout=60, worker_warmup_lmax="")
TERMINAL = {"succeeded", "failed", "cancelled"}

_TOY_API = (
    "import sys, worker.job_kinds as kinds; from tests.service.toy_kind import register_toy_kind; "
    "kinds._FAMILY_MODULES = register_toy_kind(kinds); from service.cli import main; "
    "sys.exit(main(['serve', '--no-worker', '--port', sys.argv[1], '--log-level', 'info']))"
)


def start_redis_on(port: int, folder: Path, persist: bool) -> subprocess.Popen:
    """redis-server on ``port``; ``persist``: an append-only file, fsynced every second, as
    compose.yaml runs it."""
    binary = shutil.which("redis-server")  # the requires_redis mark skips or fails without it
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(folder),
         "--appendonly", "yes" if persist else "no", "--appendfsync", "everysec"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    client = __import__("redis").Redis(port=port, socket_connect_timeout=0.5)

    def answers() -> bool:
        try:
            return client.ping() and client.info("persistence").get("loading", 0) == 0
        except Exception:
            return False

    wait_for(answers, 15, "redis-server to answer")
    return proc


def start_api(env: dict[str, str], log: Path) -> tuple[subprocess.Popen, httpx.Client]:
    """The API alone, waiting until it answers /healthz; returns it and a client for it."""
    port = free_port()
    handle = open(log, "ab")
    proc = subprocess.Popen([sys.executable, "-c", _TOY_API, str(port)], cwd=REPO, env=env,
                            stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
    handle.close()
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)

    def healthy() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"the API exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            return client.get("/healthz").status_code == 200
        except httpx.TransportError:
            return False

    wait_for(healthy, 60, "the API to answer", interval=0.3)
    return proc, client


def submit(client: httpx.Client, volume: Path, **params) -> httpx.Response:
    with open(volume, "rb") as handle:
        return client.post("/v1/jobs/scale", files={"volume": (volume.name, handle)},
                           data={k: str(v) for k, v in params.items()})


def wait_all(client: httpx.Client, ids: list[str], timeout: float) -> dict[str, dict]:
    def done():
        jobs = {i: client.get(f"/v1/jobs/{i}").json() for i in ids}
        return jobs if all(j["status"] in TERMINAL for j in jobs.values()) else None

    return wait_for(done, timeout, f"jobs {ids} to finish", interval=0.5)


def assert_scaled(client: httpx.Client, job: dict, volume: Path, factor: float) -> None:
    """The job succeeded and its result is the input times ``factor``, byte for byte as listed."""
    assert job["status"] == "succeeded", job["error"]
    result = next(r for r in job["results"] if r["name"] == "scaled.nii.gz")
    body = client.get(result["url"]).content
    assert len(body) == result["bytes"]
    image = nib.Nifti1Image.from_bytes(__import__("gzip").decompress(body))
    np.testing.assert_allclose(np.asarray(image.dataobj), factor * np.asarray(nib.load(volume).dataobj), rtol=1e-6)


@pytest.fixture
def volume(tmp_path) -> Path:
    return write_volume(tmp_path / "v.nii.gz", np.random.default_rng(7).normal(size=(8, 3, 2)).astype(np.float32))


def _processes(request) -> list[subprocess.Popen]:
    started: list[subprocess.Popen] = []
    request.addfinalizer(lambda: [stop(p, timeout=10) for p in reversed(started)])
    return started


@pytest.mark.parametrize("fault", ["restart", "kill"])
def test_redis_down_while_jobs_queue_and_run(fault, tmp_path, volume, request):
    """``restart``: Redis stops cleanly and comes back with its append-only file; ``kill``:
    SIGKILL and back *without* persistence, so every queued message is gone and the API's
    janitor must republish them. Meanwhile the API keeps answering: job status 200, a new
    submit 503 that keeps nothing. Lost: nothing; all five jobs succeed."""
    processes = _processes(request)
    port, data_dir = free_port(), tmp_path / "data"
    redis_dir = tmp_path / "redis"
    processes.append(start_redis_on(port, redis_dir, persist=True))
    env = service_env(data_dir, f"redis://127.0.0.1:{port}/0", **FAST)
    api, client = start_api(env, tmp_path / "api.log")
    processes.append(api)
    processes.append(start_worker(env, tmp_path / "w.log", "w1@faults"))
    # the first runs through the outage; the others only need to be queued during it
    ids = [submit(client, volume, factor=k, chunks=8 if k == 1 else 2, delay=0.25).json()["id"] for k in range(1, 6)]
    wait_for(lambda: client.get(f"/v1/jobs/{ids[0]}").json()["status"] == "running", 60, "the first job to run")

    redis_proc = processes.pop(0)
    if fault == "restart":
        stop(redis_proc)  # SIGTERM: Redis writes its append-only file and exits
    else:
        stop(redis_proc, sig=signal.SIGKILL)
        shutil.rmtree(redis_dir)
    during = client.get(f"/v1/jobs/{ids[1]}")
    assert during.status_code == 200 and during.json()["status"] == "queued"
    refused = submit(client, volume, factor=9)
    assert refused.status_code == 503
    assert refused.headers["content-type"] == "application/problem+json"
    assert "nothing was kept" in refused.json()["detail"]
    assert len(client.get("/v1/jobs").json()["jobs"]) == 5
    time.sleep(3)  # an outage longer than the heartbeat timeout
    processes.insert(0, start_redis_on(port, redis_dir, persist=fault == "restart"))

    jobs = wait_all(client, ids, 180)
    for factor, job_id in enumerate(ids, start=1):
        assert_scaled(client, jobs[job_id], volume, factor)
    assert len(client.get("/v1/jobs").json()["jobs"]) == 5


@pytest.mark.parametrize("max_losses", [3, 1])
def test_worker_killed_while_writing_results(max_losses, tmp_path, request):
    """SIGKILL of the pool process while the result file is half written: no result is ever
    listed or downloadable before the job finishes; with losses to spare the job is run
    again and succeeds, at its limit it fails as *Worker lost* and leaves no partial files."""
    processes = _processes(request)
    port, data_dir = free_port(), tmp_path / "data"
    processes.append(start_redis_on(port, tmp_path / "redis", persist=True))
    env = service_env(data_dir, f"redis://127.0.0.1:{port}/0", max_worker_losses=max_losses, **FAST)
    api, client = start_api(env, tmp_path / "api.log")
    processes.append(api)
    processes.append(start_worker(env, tmp_path / "w1.log", "w1@faults"))
    # float64 noise: long enough to compress that there is a window to kill in
    big = write_volume(tmp_path / "big.nii", np.random.default_rng(3).normal(size=(256, 256, 48)))
    job_id = submit(client, big, factor=2, chunks=1).json()["id"]
    store = JobStore(data_dir)

    def half_written():
        return next(iter(store.job_dir(job_id).glob("outputs.partial-*/.scaled.tmp.nii.gz")), None)

    wait_for(half_written, 120, "the result file to be half written", interval=0.01)
    job = client.get(f"/v1/jobs/{job_id}").json()
    os.kill(int(store.read(job_id).runner.rpartition(":")[2]), signal.SIGKILL)
    assert job["status"] == "running" and job["results"] == []
    assert client.get(f"/v1/jobs/{job_id}/results/scaled.nii.gz").status_code == 404
    assert not store.outputs_dir(job_id).exists()

    job = wait_all(client, [job_id], 180)[job_id]
    if max_losses == 1:
        assert job["status"] == "failed" and job["error"]["title"] == "Worker lost"
        assert job["results"] == [] and not store.outputs_dir(job_id).exists()
    else:
        assert_scaled(client, job, big, 2.0)
    assert not list(store.job_dir(job_id).glob("outputs.partial-*"))


@pytest.fixture
def small_disk(small_filesystem):
    """A 24 MiB tmpfs as the data dir (tests/conftest.py: root only)."""
    return small_filesystem(24)


def _fill(folder: Path, leave: int) -> Path:
    """A ballast file that leaves about ``leave`` bytes free on ``folder``'s file system."""
    ballast = folder / "ballast"
    free = shutil.disk_usage(folder).free
    with open(ballast, "wb") as handle:
        try:
            handle.write(bytes(max(0, free - leave)))
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return ballast


def test_disk_full_during_upload_and_while_writing_results(small_disk, tmp_path, request):
    """An upload that does not fit: 507 problem+json, its partial file removed. A job whose
    results do not fit: failed as *Disk full*, no partial result kept. The service keeps
    serving: with space again the same jobs succeed. Lost: only what never fitted."""
    processes = _processes(request)
    port = free_port()
    processes.append(start_redis_on(port, tmp_path / "redis", persist=True))
    env = service_env(small_disk, f"redis://127.0.0.1:{port}/0", max_upload_bytes=64 << 20, **FAST)
    api, client = start_api(env, tmp_path / "api.log")
    processes.append(api)
    processes.append(start_worker(env, tmp_path / "w.log", "w1@faults"))
    store = JobStore(small_disk)

    noise = np.random.default_rng(5).normal(size=(64, 64, 32)).astype(np.float32)
    upload = write_volume(tmp_path / "upload.nii", noise)  # 512 KiB, uncompressed
    ballast = _fill(small_disk, leave=256 << 10)
    refused = submit(client, upload)
    assert refused.status_code == 507, refused.text
    assert refused.headers["content-type"] == "application/problem+json"
    assert "disk is full" in refused.json()["detail"] and "nothing was kept" in refused.json()["detail"]
    assert list(store.staging_dir.iterdir()) == [] and list(store.jobs_dir.iterdir()) == []

    # the input fits (stored as the .nii the check inflates it to), then, while the job
    # runs (4 slabs of 0.5 s), the disk fills: the float64 result (twice its size) does not fit
    small = write_volume(tmp_path / "small.nii.gz", noise[:, :, :8])
    ballast.unlink()
    job_id = submit(client, small, factor=2, delay=0.5).json()["id"]
    ballast = _fill(small_disk, leave=64 << 10)
    job = wait_all(client, [job_id], 120)[job_id]
    assert job["status"] == "failed" and job["error"]["title"] == "Disk full", job
    assert job["results"] == [] and not store.outputs_dir(job_id).exists()
    assert not list(store.job_dir(job_id).glob("outputs.partial-*"))

    ballast.unlink()
    again = [submit(client, upload).json()["id"], submit(client, small, factor=2).json()["id"]]
    jobs = wait_all(client, again, 120)
    assert_scaled(client, jobs[again[0]], upload, 2.0)
    assert_scaled(client, jobs[again[1]], small, 2.0)


def test_api_killed_during_a_large_upload(tmp_path, volume, request):
    """SIGKILL of the API while a 256 MiB upload streams in: that request fails, no job exists
    for it; the restarted API serves as before and the job accepted before the crash finishes.
    Lost: only the upload in flight, whose staging folder is never a job (the restarted API's
    janitor removes it as it starts: no process holds it any more)."""
    processes = _processes(request)
    port, data_dir = free_port(), tmp_path / "data"
    processes.append(start_redis_on(port, tmp_path / "redis", persist=True))
    env = service_env(data_dir, f"redis://127.0.0.1:{port}/0", **FAST)
    api, client = start_api(env, tmp_path / "api.log")
    processes.append(api)
    processes.append(start_worker(env, tmp_path / "w.log", "w1@faults"))
    before = submit(client, volume, factor=2, chunks=8, delay=0.5).json()["id"]

    boundary = "crashboundary"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"volume\"; filename=\"big.nii\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode()
    chunk = bytes(1 << 20)

    def body():
        yield head
        for sent in range(256):
            if sent == 64:  # a quarter in: the API dies
                os.killpg(api.pid, signal.SIGKILL)
            yield chunk

    with pytest.raises(httpx.TransportError):
        client.post("/v1/jobs/scale", content=body(),
                    headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    api.wait()
    store = JobStore(data_dir)
    assert [p.name for p in store.jobs_dir.iterdir()] == [before]
    leftovers = list(store.staging_dir.iterdir())
    assert len(leftovers) == 1 and (leftovers[0] / "inputs" / "volume.nii").stat().st_size >= 32 << 20

    api, client = start_api(env, tmp_path / "api2.log")
    processes.append(api)
    jobs = client.get("/v1/jobs").json()["jobs"]
    assert [j["id"] for j in jobs] == [before]
    after = submit(client, volume, factor=3).json()["id"]
    finished = wait_all(client, [before, after], 120)
    assert_scaled(client, finished[before], volume, 2.0)
    assert_scaled(client, finished[after], volume, 3.0)
    assert list(store.staging_dir.iterdir()) == []
