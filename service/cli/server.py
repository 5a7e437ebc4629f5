"""``fibertensor serve`` (the API, plus a worker on this machine) and ``fibertensor worker``.

``serve`` with no broker configured is the embedded default: the API and one worker process
share a filesystem broker under the data dir, so one command runs the whole service. ``serve``
starts its worker again when it dies, and exits non-zero when it keeps dying
(:mod:`service.embedded_worker`).
With ``FIBERTENSOR_BROKER_URL=redis://...``, ``serve --no-worker`` runs the API alone and
``worker`` runs anywhere that reaches Redis and the data volume.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import signal
import socket
import sys
from pathlib import Path

from service.embedded_worker import WorkerSupervisor
from service.settings import Settings

__all__ = ["register"]

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _settings(args: argparse.Namespace) -> Settings:
    settings = Settings(**({"data_dir": Path(args.data_dir)} if args.data_dir else {}))
    # Absolute, so the embedded worker and the filesystem broker agree whatever their cwd.
    settings = settings.model_copy(update={"data_dir": settings.data_dir.resolve()})
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return settings


def _node_name(args: argparse.Namespace) -> str:
    """Celery node name; a GPU worker is named after its device so ``readyz`` lists GPUs."""
    if args.hostname:
        return args.hostname
    gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    prefix = f"gpu{gpus.replace(',', '-')}" if gpus else "worker"
    return f"{prefix}@{socket.gethostname()}"


def _worker(args: argparse.Namespace) -> int:
    from service.app import celery_app_for

    settings = _settings(args)
    app = celery_app_for(settings)
    node = _node_name(args)
    if args.check:
        replies = app.control.ping(destination=[f"celery@{node}" if "@" not in node else node], timeout=5.0)
        return 0 if replies else 1
    concurrency = args.concurrency or settings.worker_concurrency
    # prefork: the main process only consumes the queue; jobs (and CUDA) run in the pool
    # processes, each with its own CUDA context, which the main process replaces when one
    # dies or hits the hard time limit. Forking is safe as the main process never touches CUDA.
    app.worker_main(
        [
            "worker",
            f"--loglevel={args.log_level.upper()}",
            "--pool=prefork",
            f"--concurrency={concurrency}",
            f"--queues={settings.queue}",
            f"--hostname={node}",
            "--without-gossip",
            "--without-mingle",
        ]
    )
    return 0


def _stop_with_parent() -> None:
    """In the embedded worker (before exec): get SIGTERM when ``serve`` dies, even by
    SIGKILL, so no worker outlives its API (Linux ``PR_SET_PDEATHSIG``)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from service.app import create_app

    settings = _settings(args)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.host not in _LOOPBACK and not settings.api_keys:
        logging.getLogger("fibertensor").warning(
            "serving on %s without FIBERTENSOR_API_KEYS: anyone who reaches this port can "
            "submit and read jobs", args.host,
        )
    # uvicorn re-raises the SIGTERM it caught once it has shut down; as SystemExit (instead
    # of the default handler's instant death) it unwinds through the finally below, which
    # stops the worker.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    worker = None
    if not args.no_worker:
        worker = WorkerSupervisor(
            [sys.executable, "-m", "service", "worker", "--log-level", args.log_level],
            data_dir=settings.data_dir,
            max_restarts=settings.worker_max_restarts,
            # SIGTERM to ourselves: uvicorn shuts down as on any SIGTERM, then this exits non-zero
            on_give_up=lambda: os.kill(os.getpid(), signal.SIGTERM),
            env=dict(os.environ, FIBERTENSOR_DATA_DIR=str(settings.data_dir)),
            preexec_fn=_stop_with_parent,
        )
        worker.start()
    api_workers = args.api_workers or settings.api_workers
    try:
        if api_workers == 1:
            uvicorn.run(create_app(settings), host=args.host, port=args.port, log_level=args.log_level)
        else:
            # uvicorn spawns the API processes; each builds its app from the environment.
            os.environ["FIBERTENSOR_DATA_DIR"] = str(settings.data_dir)
            uvicorn.run("service.app:create_app", factory=True, workers=api_workers, host=args.host,
                        port=args.port, log_level=args.log_level)
    except SystemExit:
        if worker is None or not worker.gave_up:
            raise
    finally:
        if worker is not None:
            worker.stop()
    if worker is not None and worker.gave_up:
        logging.getLogger("fibertensor").error("stopped: the embedded worker kept dying (see above)")
        return 1
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    serve = subparsers.add_parser(
        "serve",
        help="run the REST API and a worker on this machine",
        description="Run the REST API (OpenAPI at /docs) and one worker. Without "
        "FIBERTENSOR_BROKER_URL the broker is a folder in the data dir: no Redis needed.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    serve.add_argument("--data-dir", help="job folders (default FIBERTENSOR_DATA_DIR or ./fibertensor-data)")
    serve.add_argument("--no-worker", action="store_true", help="run the API only (workers run elsewhere)")
    serve.add_argument("--api-workers", type=int, help="API processes (default FIBERTENSOR_API_WORKERS)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.set_defaults(func=_serve)

    worker = subparsers.add_parser(
        "worker",
        help="run a job worker (one per GPU)",
        description="Run a Celery worker that takes jobs from the queue. Run one per GPU, "
        "each with its own CUDA_VISIBLE_DEVICES; set FIBERTENSOR_BROKER_URL and share the "
        "data dir with the API.",
    )
    worker.add_argument("--data-dir", help="job folders (default FIBERTENSOR_DATA_DIR or ./fibertensor-data)")
    worker.add_argument("--concurrency", type=int,
                        help="job processes, several per GPU (default FIBERTENSOR_WORKER_CONCURRENCY)")
    worker.add_argument("--hostname", help="Celery node name (default gpuN@host or worker@host)")
    worker.add_argument("--check", action="store_true", help="exit 0 if this worker answers a ping (healthcheck)")
    worker.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    worker.set_defaults(func=_worker)
