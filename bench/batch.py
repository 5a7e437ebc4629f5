"""Cohort throughput: N whole-brain FOD volumes from files on disk to peaks on disk.

N distinct copies of one phantom (``gpu.peaks.fod_phantom``, ``--shape`` voxels, lmax 8),
each with its own noise seed, written as
``--format`` says (``nii.gz``, ``nii``, ``mif``: the same voxels, hence the same peaks;
the outputs take the input's format as a job's do: ``.nii.gz`` for NIfTI, ``.mif`` for
``.mif``), go through

* local   — ``worker.batch.run_batch`` (what ``fibertensor batch peaks`` runs) with each
            ``--processes-per-gpu`` value given (e.g. ``1,4,8``: one run each; default that of
            ``fibertensor batch peaks``): spawned worker processes per GPU of ``--gpus``
            (or on the backend's device), all taking inputs from one queue; 1 without
            ``--gpus`` runs in this process;
* service — ``fibertensor serve --no-worker --api-workers A`` and one ``fibertensor
            worker --concurrency C`` per GPU (``CUDA_VISIBLE_DEVICES``), on a private
            ``redis-server`` (``--broker redis``, the default when one is on PATH or given)
            or the embedded broker; every input uploaded over REST (``--transfers`` at a
            time, by ``--clients`` processes), and each job's ``results.zip`` downloaded as
            soon as it succeeds: files on disk to derivatives on disk, as a client runs a cohort.

For each: subjects per hour (whole run, and steady: from the 10th to the last subject), the
GPU's busy share twice: from our kernel timings (kernel seconds ÷ wall ÷ GPUs; an upper bound
when several job processes share a GPU, as one's kernel events may enclose another's
kernels) and as the GPU counts it (``nvidia-smi``'s ``utilization.gpu`` every 0.2 s, the mean
over the steady part of the GPUs the run used, each GPU's in the log and the raw samples in
the work folder, beside a local run's timeline of its subjects; "n/a" without ``nvidia-smi``:
:mod:`bench.gpu_utilization`), CPU cores used
(CPU seconds of every process of the run ÷ wall; for the service also CPU seconds per
subject of the API, the workers, Redis and this client), peak host RSS (all processes of the
run, sampled every 0.2 s) with its curve, and mean seconds per subject of each stage
(service: the upload, the wait in the queue, the job and its read/compute/write, the
download); a table last.

    python3 -m bench.batch [--subjects 100] [--format nii.gz|nii|mif] [--gpus 0,1] [--processes-per-gpu 1,4,8]
                           [--modes local,service]
                           [--broker redis|embedded] [--redis-server PATH] [--backend auto]
                           [--concurrency 6[,12...]] [--api-workers 8] [--transfers 16] [--clients 4[,1...]]
                           [--peaks-only] [--no-checksums] [--shape 96 96 60] [--work DIR] [--keep]

``--concurrency 4,6,8`` (and ``--clients 1,4``) runs the service once per value (pair), on the
same cohort.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import numpy as np

from bench import gpu_utilization
from bench.harness import Column, Report, bench_parser
from bench.processes import TreeMonitor, cpu_seconds, free_port, process_tree, service_environment, spawn, stop, \
    wait_ready
from gpu.peaks.phantom import fod_phantom
from worker.batch import batch_items, default_processes, run_batch
from worker.io.mif import write_mif
from worker.io.nifti import save_nifti_atomic
from worker.jobs.peaks import image_suffixes
from worker.params import PeaksParams

# The local run's spawned workers import this module again (as their __main__): what only
# the parent uses (the service's clients, the cohort's writer) is imported where it is used.
_TERMINAL = {"succeeded", "failed", "cancelled"}

FORMATS = ("nii.gz", "nii", "mif")


def write_cohort(folder: Path, subjects: int, shape: tuple[int, int, int], lmax: int,
                 distinct: int | None = None, fmt: str = "nii.gz") -> list[Path]:
    """``subjects`` copies of one noise-free phantom, each plus its own Gaussian noise (2 % of a
    single fiber's l = 0 coefficient, as ``fod_phantom`` adds it), written in parallel as
    ``fmt`` (one of :data:`FORMATS`; a ``.mif`` as ``dwi2fod`` writes FODs, each voxel's
    coefficients together, x fastest: strides 2,3,4,1); with ``distinct``, only that many
    files, the other subjects links to them under their own names (a long run that fits the
    disk)."""
    import nibabel

    base = fod_phantom(shape, lmax, noise=0.0, seed=0)["sh"]
    single = fod_phantom((1, 1, 1), lmax, fiber_fractions=(1.0, 0.0, 0.0), noise=0.0)["sh"][0, 0, 0, 0]
    affine = np.diag([2.0, 2.0, 2.0, 1.0])

    def write(index: int) -> Path:
        rng = np.random.default_rng(1000 + index)
        sh = base + rng.normal(scale=0.02 * single, size=base.shape).astype(np.float32)
        path = folder / f"sub-{index:04d}.{fmt}"
        if fmt == "mif":
            return write_mif(path, sh, affine, layout=(2, 3, 4, 1))
        return save_nifti_atomic(nibabel.Nifti1Image(sh, affine), path, threads=1)

    folder.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max(1, len(os.sched_getaffinity(0)))) as pool:
        written = list(pool.map(write, range(min(subjects, distinct or subjects))))
    links = []
    for index in range(len(written), subjects):
        links.append(folder / f"sub-{index:04d}.{fmt}")
        links[-1].unlink(missing_ok=True)
        links[-1].symlink_to(written[index % len(written)].name)
    return written + links


def _steady(done_times: list[float]) -> tuple[float, float]:
    """The steady part of a run: from the 10th percentile subject's end to the last's."""
    done_times = sorted(done_times)
    return done_times[int(0.1 * len(done_times))], done_times[-1]


def _rates(done_times: list[float], started: float) -> tuple[float, float]:
    """Subjects per hour over the whole run, and over its steady part (:func:`_steady`)."""
    first, last = _steady(done_times)
    whole = len(done_times) / (last - started) * 3600
    steady = (len(done_times) - 1 - int(0.1 * len(done_times))) / max(last - first, 1e-9) * 3600
    return whole, steady


_STAGES = ("upload", "queued", "read", "compute", "kernel", "write", "job", "download")


def _stage_means(seconds: list[dict]) -> dict[str, float]:
    """Mean seconds per subject of each stage a run reports (NaN for those of :data:`_STAGES`
    it has not)."""
    return {**dict.fromkeys(_STAGES, float("nan")),
            **{stage: float(np.mean([s[stage] for s in seconds])) for stage in seconds[0]}}


def _own_and_reaped_cpu() -> float:
    """CPU seconds of this process and of its children that have exited."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_local(items: list, params, gpus: list[str] | None, processes: int, smi_log: Path) -> dict:
    """``items`` (one job kind's, with its ``params``) through ``worker.batch.run_batch`` on
    ``gpus`` with ``processes`` worker processes each: the run's wall, rates, CPU, memory,
    stage means and GPU utilization (see the module docstring). Beside ``smi_log`` (the
    nvidia-smi samples), ``<its name>.timeline.json``: each subject's end, worker and stage
    seconds, with the run's start and end, for reading a run subject by subject."""
    # a warm-up subject compiles or loads the kernels (the measured run's workers load them from
    # the caches, as a real batch's do), in a worker process of its own where there are GPUs:
    # this process stays without a CUDA context, as the batch's caller does
    run_batch(items[:1], params, devices=gpus[:1] if gpus else None)
    done_times: list[float] = []
    timeline: list[dict] = []

    def record(item_report) -> None:
        done_times.append(time.time())
        timeline.append({"done": done_times[-1], "worker": item_report.worker, "input": item_report.input.name,
                         "seconds": item_report.seconds})

    before = _own_and_reaped_cpu()
    with gpu_utilization.GpuSampler(smi_log) as sampler, TreeMonitor([os.getpid()]) as monitor:
        started = time.time()
        reports = run_batch(items, params, devices=gpus, processes=processes, report=record)
    smi_log.with_name(f"{smi_log.stem}.timeline.json").write_text(
        json.dumps({"started": started, "ended": time.time(), "subjects": timeline}))
    # the worker processes have exited and been joined: their CPU is in RUSAGE_CHILDREN
    cpu = _own_and_reaped_cpu() - before
    failed = [r for r in reports if not r.ok]
    if failed:
        raise SystemExit(f"local batch: {len(failed)} inputs failed, e.g. {failed[0].input}: {failed[0].error}")
    return {"wall": monitor.wall, "rates": _rates(done_times, started), "cpu": cpu,
            "rss": int(monitor.rss().max()), "curve": monitor.curve(),
            "stages": _stage_means([r.seconds for r in reports]),
            "kernel_total": sum(r.seconds.get("kernel", 0.0) for r in reports),
            "gpu_utilization": gpu_utilization.mean_utilization(sampler.samples, *_steady(done_times))}


async def _submit_and_wait(base: str, inputs: list[Path], backend: str, label: str, downloads: Path | None,
                           uploads_at_once: int = 8) -> list[dict]:
    """Upload every input (``uploads_at_once`` at a time), poll the batch, and download each
    job's ``results.zip`` into ``downloads`` as soon as it succeeds; each job's record gets the
    client's ``upload`` and ``download`` seconds and the time its download ended (``done``)."""
    import httpx

    uploads, fetches = asyncio.Semaphore(uploads_at_once), asyncio.Semaphore(uploads_at_once)
    limits = httpx.Limits(max_connections=2 * uploads_at_once + 4, max_keepalive_connections=2 * uploads_at_once + 4)
    async with httpx.AsyncClient(base_url=base, timeout=600, limits=limits) as http:
        async def upload(path: Path) -> tuple[str, float]:
            async with uploads:
                data = await asyncio.to_thread(path.read_bytes)  # not in the event loop's thread
                started = time.perf_counter()
                response = await http.post("/v1/jobs/peaks", files={"fod": (path.name, data)},
                                           data={"backend": backend, "label": label})
            if response.status_code != 202:
                raise SystemExit(f"upload of {path.name} refused: {response.status_code} {response.text}")
            return response.json()["id"], time.perf_counter() - started

        async def download(job: dict) -> None:
            async with fetches:
                started = time.perf_counter()
                if downloads is not None:
                    async with http.stream("GET", f"/v1/jobs/{job['id']}/results.zip") as response:
                        with open(downloads / f"{job['id']}.zip", "wb") as sink:
                            async for chunk in response.aiter_bytes(1 << 20):
                                sink.write(chunk)
                job["sidecar"] = (await http.get(f"/v1/jobs/{job['id']}/results/peaks.json")).json()
                job["download"], job["done"] = time.perf_counter() - started, time.time()

        # Uploads, polls and downloads overlap, as a client streaming a cohort runs them.
        upload_seconds: dict[str, float] = {}

        async def upload_one(path: Path) -> None:
            job_id, seconds = await upload(path)
            upload_seconds[job_id] = seconds

        uploading = asyncio.ensure_future(asyncio.gather(*(upload_one(p) for p in inputs)))
        final: dict[str, dict] = {}
        fetching = []
        deadline = time.monotonic() + 3600
        while (not uploading.done() or len(final) < len(upload_seconds)) and time.monotonic() < deadline:
            await asyncio.sleep(0.25)
            listing = (await http.get("/v1/jobs", params={"label": label, "limit": 1000})).json()["jobs"]
            for job in listing:
                if job["id"] in upload_seconds and job["status"] in _TERMINAL and job["id"] not in final:
                    final[job["id"]] = job
                    job["upload"] = upload_seconds[job["id"]]
                    if job["status"] == "succeeded":
                        fetching.append(asyncio.create_task(download(job)))
        await uploading  # its exception, if an upload was refused
        await asyncio.gather(*fetching)
        failed = [j for j in final.values() if j["status"] != "succeeded"]
        if failed or len(final) < len(upload_seconds):
            raise SystemExit(f"service: {len(failed)} jobs failed, {len(upload_seconds) - len(final)} unfinished; "
                             "see the logs")
        return list(final.values())


def _client(base: str, inputs: list[Path], backend: str, label: str, downloads: Path, transfers: int) -> list[dict]:
    """One client process: its share of the cohort, under its own label."""
    return asyncio.run(_submit_and_wait(base, inputs, backend, label, downloads, transfers))


def _client_pool(clients: int) -> ProcessPoolExecutor | None:
    """``clients`` started client processes (none for one client: it runs in this process)."""
    if clients == 1:
        return None
    pool = ProcessPoolExecutor(clients, mp_context=multiprocessing.get_context("spawn"))
    for started in [pool.submit(os.getpid) for _ in range(clients)]:
        started.result()  # each process has imported this script before the clock starts
    return pool


def _run_clients(base: str, inputs: list[Path], backend: str, downloads: Path, transfers: int,
                 pool: ProcessPoolExecutor | None, clients: int) -> list[dict]:
    """The cohort sent by the pool's client processes, each with every k-th input and its share
    of ``transfers``: one Python process moving a cohort in and out at the service's pace is itself
    bound by its interpreter lock, as a lab's many clients would not be."""
    if pool is None:
        return _client(base, inputs, backend, "cohort", downloads, transfers)
    per_client = max(1, -(-transfers // clients))
    shares = [pool.submit(_client, base, inputs[k::clients], backend, f"cohort-{k}", downloads, per_client)
              for k in range(clients)]
    return [job for share in shares for job in share.result()]


def run_service(inputs: list[Path], work: Path, backend: str, gpus: list[str], broker: str, redis_server: str,
                concurrency: int, api_workers: int, transfers: int = 8, clients: int = 1) -> dict:
    """The whole service path: ``serve --no-worker`` with ``api_workers`` processes and one
    worker of ``concurrency`` job processes per GPU; every input uploaded, every result zip
    downloaded by ``clients`` client processes; job folders, downloads and the processes' logs
    in ``work``."""
    data_dir, port = work / "data", free_port()
    downloads = work / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    base = f"http://127.0.0.1:{port}"
    processes: list[subprocess.Popen] = []
    try:
        broker_url = ""
        if broker == "redis":
            redis_port = free_port()
            processes.append(spawn([redis_server, "--port", str(redis_port), "--save", "",
                                                   "--appendonly", "no"], dict(os.environ), work / "redis.log"))
            broker_url = f"redis://127.0.0.1:{redis_port}/0"
        env = service_environment(data_dir, broker_url)
        processes.append(spawn([sys.executable, "-m", "service", "serve", "--no-worker", "--port",
                                               str(port), "--api-workers", str(api_workers), "--log-level",
                                               "warning"], env, work / "serve.log"))
        for gpu in gpus:
            processes.append(spawn(
                [sys.executable, "-m", "service", "worker", "--concurrency", str(concurrency), "--log-level", "info"],
                {**env, "CUDA_VISIBLE_DEVICES": gpu}, work / f"worker-gpu{gpu}.log"))
        wait_ready(base, len(gpus), processes)
        # warm-up jobs, one per job process: each process loads its kernels (the pool does at
        # start, but a job may be taken before that ends)
        asyncio.run(_submit_and_wait(base, inputs[: len(gpus) * concurrency], backend, "warmup", None))
        roots = [p.pid for p in processes]
        before = {pid: cpu_seconds([pid]) for pid in process_tree(roots)}
        pool = _client_pool(clients)
        client_before = _own_and_reaped_cpu()
        with gpu_utilization.GpuSampler(work / "nvidia-smi.csv") as sampler, TreeMonitor(roots) as monitor:
            started = time.time()
            jobs = _run_clients(base, inputs, backend, downloads, transfers, pool, clients)
        if pool is not None:
            pool.shutdown()  # joined: the clients' CPU is in RUSAGE_CHILDREN
        client = _own_and_reaped_cpu() - client_before
    finally:
        stop(*processes, timeout=60)
    done_times = [j["done"] for j in jobs]
    stages = []
    for job in jobs:
        seconds = job["sidecar"]["seconds"]
        created, began, ended = (datetime.fromisoformat(job[k]).timestamp() for k in ("created_at", "started_at",
                                                                                      "finished_at"))
        stages.append({"upload": job["upload"], "queued": began - created, "read": seconds["read"],
                       "compute": seconds["peaks_total"], "kernel": seconds.get("peaks_kernel", 0.0),
                       "write": seconds["write"], "job": ended - began, "download": job["download"]})
    # who spends the host's CPU, per subject: the API, the workers (job processes and their
    # Celery parents), Redis, and this client (its uploads, polls and downloads, and the monitor)
    api, workers = roots[1 if broker == "redis" else 0], roots[2 if broker == "redis" else 1:]
    by_role = {"API": monitor.cpu_seconds(before, [api]), "workers": monitor.cpu_seconds(before, workers),
               "redis": monitor.cpu_seconds(before, roots[:1]) if broker == "redis" else 0.0, "client": client}
    return {"wall": monitor.wall, "rates": _rates(done_times, started), "cpu": monitor.cpu_seconds(before),
            "cpu_by_role": {role: seconds / len(jobs) for role, seconds in by_role.items()},
            "rss": int(monitor.rss().max()), "curve": monitor.curve(), "stages": _stage_means(stages),
            "kernel_total": sum(s["kernel"] for s in stages),
            "gpu_utilization": gpu_utilization.mean_utilization(sampler.samples, *_steady(done_times))}


def main() -> None:
    parser = bench_parser(__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--subjects", type=int, default=100)
    parser.add_argument("--distinct", type=int, help="write only this many distinct inputs; the other subjects "
                        "link to them (a 500-subject memory run on a small disk)")
    parser.add_argument("--shape", type=int, nargs=3, default=[96, 96, 60])
    parser.add_argument("--format", choices=FORMATS, default="nii.gz", help="the inputs' file format (the outputs "
                        "take it: .nii.gz for NIfTI, .mif for .mif); nii and mif have no inflate to read")
    parser.add_argument("--lmax", type=int, default=8)
    parser.add_argument("--gpus", help="CUDA_VISIBLE_DEVICES values, e.g. 0 or 0,1 (default: local in this "
                        "process, service with one worker)")
    parser.add_argument("--processes-per-gpu", help="local mode: worker processes per GPU, one run per value, "
                        "e.g. 1,4,8 (default: fibertensor batch peaks' default for this machine)")
    parser.add_argument("--modes", default="local,service")
    parser.add_argument("--broker", choices=["redis", "embedded"])
    parser.add_argument("--redis-server", default=shutil.which("redis-server"))
    parser.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--concurrency", default="6",
                        help="service: job processes per worker (GPU); several values, comma-separated, run one "
                        "after the other")
    parser.add_argument("--api-workers", type=int, default=8, help="service: API processes (compose.yaml's)")
    parser.add_argument("--transfers", type=int, default=16, help="service: uploads (and downloads) the clients run "
                        "at once")
    parser.add_argument("--clients", default="4", help="service: client processes sharing the cohort and the "
                        "transfers; several values, comma-separated, run one after the other")
    parser.add_argument("--peaks-only", action="store_true", help="local mode: write the peaks image alone (no "
                        "fODF metrics, no QC picture), what the host's reading and writing cost at the least")
    parser.add_argument("--no-checksums", action="store_true", help="local mode: the jobs' --no-checksums (no "
                        "input is hashed for the sidecar)")
    parser.add_argument("--work", type=Path, help="work folder (default: a new temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args()
    broker = args.broker or ("redis" if args.redis_server else "embedded")
    if broker == "redis" and not args.redis_server:
        raise SystemExit("--broker redis: no redis-server on PATH; give --redis-server PATH")
    gpus = args.gpus.split(",") if args.gpus else None
    work = args.work or Path(tempfile.mkdtemp(prefix="fibertensor-batch-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    params = PeaksParams(backend=args.backend, checksums=not args.no_checksums,
                         **({"metrics": ["none"], "qc": False} if args.peaks_only else {}))

    report = Report(args.json)
    started = time.perf_counter()
    inputs = write_cohort(work / "inputs", args.subjects, tuple(args.shape), args.lmax, args.distinct, args.format)
    size = sum(p.stat().st_size for p in inputs) / len(inputs)
    formats = f"{args.format} in, {image_suffixes(inputs[0], params.format)[0].lstrip('.')} out"
    report.progress(f"{args.subjects} subjects {'x'.join(map(str, args.shape))} lmax {args.lmax}, {size / 1e6:.1f} MB "
                    f".{args.format} each, written in {time.perf_counter() - started:.0f} s; {formats}; "
                    f"{len(os.sched_getaffinity(0))} cores; backend {args.backend}; "
                    f"nvidia-smi {'sampled' if shutil.which('nvidia-smi') else 'absent: GPU util n/a'}; work folder {work}")

    results = {}
    modes = args.modes.split(",")
    if "local" in modes:
        sweep = ([int(n) for n in args.processes_per_gpu.split(",")] if args.processes_per_gpu
                 else [default_processes(len(gpus or ["0"]))])
        for processes in sweep:
            if not gpus and processes == 1:
                label = f"local {args.format}, in-process"
            else:
                label = f"local {args.format}, {processes} process(es) x {len(gpus or ['0'])} GPU(s)"
            label += ", peaks only" * args.peaks_only + ", no checksums" * args.no_checksums
            out = work / f"out-local-{processes}"
            results[label] = run_local(batch_items(inputs, out), params, gpus, processes,
                                       work / f"nvidia-smi-local-{processes}.csv")
            report.progress(f"{label}: done in {results[label]['wall']:.1f} s")
            if not args.keep:
                shutil.rmtree(out, ignore_errors=True)  # a large sweep would fill the disk
    if "service" in modes:
        runs = [(c, k) for c in map(int, args.concurrency.split(",")) for k in map(int, args.clients.split(","))]
        for concurrency, clients in runs:
            label = (f"service {args.format}, {broker}, {len(gpus or ['0'])}x{concurrency} jobs, {args.api_workers} "
                     f"API, {args.transfers} transfers, {clients} client(s)")
            folder = work / f"service-{concurrency}-{clients}"
            results[label] = run_service(inputs, folder, args.backend, gpus or ["0"], broker, args.redis_server,
                                         concurrency, args.api_workers, args.transfers, clients)
            report.progress(f"{label}: done in {results[label]['wall']:.1f} s")
            if not args.keep:  # its job folders and downloads; the logs stay
                for bulk in ("data", "downloads"):
                    shutil.rmtree(folder / bulk, ignore_errors=True)

    n_gpus = len(gpus or ["0"])
    # without --gpus a run uses the first GPU CUDA sees: nvidia-smi's index where it is one
    used_gpus = gpus or [os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]]
    rows = []
    for label, r in results.items():
        utilization, per_gpu = gpu_utilization.describe_utilization(r["gpu_utilization"], used_gpus)
        rows.append({"run": label, "wall_s": r["wall"], "subjects_per_h": r["rates"][0],
                     "steady_per_h": r["rates"][1],
                     "kernel_busy": r["kernel_total"] / r["wall"] / n_gpus if r["kernel_total"] else None,
                     "gpu_util": utilization, "gpu_util_per_gpu": per_gpu, "cores": r["cpu"] / r["wall"],
                     "peak_rss_gb": r["rss"] / 1e9, "rss_gb_per_tenth": r["curve"],
                     **r["stages"], **{f"cpu_s_per_subject_{role}": seconds
                                       for role, seconds in r.get("cpu_by_role", {}).items()}})
    report.table(
        f"{args.subjects} subjects, {'x'.join(map(str, args.shape))} lmax {args.lmax}, {formats}", rows,
        [Column("run", "run"), Column("wall_s", "wall s", ".1f"), Column("subjects_per_h", "subj/h", ".0f"),
         Column("steady_per_h", "steady/h", ".0f"), Column("kernel_busy", "kernel busy", ".0%"),
         Column("gpu_util", "GPU util"), Column("cores", "cores", ".1f"), Column("peak_rss_gb", "peak RSS GB", ".2f")]
        + [Column(stage, stage, ".3f") for stage in _STAGES],
        note="kernel busy = kernel seconds / wall / GPUs (an upper bound with several processes a GPU), GPU util = "
             "nvidia-smi's utilization.gpu over the steady part; stage columns: mean seconds per subject (service: "
             "upload = POST incl. checks, queued = accepted to started, job = started to finished, download = "
             "results.zip; read, compute = engine call, kernel = GPU kernels, write)")
    report.table("per run: memory, GPUs and host CPU", rows,
                 [Column("run", "run"), Column("rss_gb_per_tenth", "RSS GB per tenth of the run"),
                  Column("gpu_util_per_gpu", "utilization.gpu per GPU")]
                 + [Column(f"cpu_s_per_subject_{role}", f"CPU s/subject {role}", ".2f")
                    for role in ("API", "workers", "redis", "client")])
    if not args.keep and not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
