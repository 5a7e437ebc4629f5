"""The Celery application: broker, queue and delivery guarantees.

Two brokers: Redis (``broker_url="redis://..."``) for any number of workers on any number of
hosts, and the embedded one (empty ``broker_url``): kombu's filesystem transport in
``<data_dir>/broker`` (:mod:`worker.embedded_broker`), which needs no server and serves the
API and workers of one machine.
There is no Celery result backend: the job folder (:mod:`worker.job_store`) holds every
job's state and results, so the queue only carries job ids.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from celery import Celery

from worker.embedded_broker import TRANSPORT

__all__ = ["RUN_JOB_TASK", "create_celery_app", "publish_job", "waiting_job_ids"]

#: Name of the task that runs a job, given its id (see :mod:`worker.tasks`).
RUN_JOB_TASK = "fibertensor.run_job"


def _broker(broker_url: str, data_dir: Path, visibility_timeout: int) -> tuple[str, dict[str, Any]]:
    if broker_url:
        # Redis hands an unacknowledged message to another worker after this long; it must
        # exceed the hard time limit or long jobs would run twice.
        return broker_url, {
            "visibility_timeout": visibility_timeout,
            "socket_connect_timeout": 5,
            "socket_timeout": 30,
        }
    folder = Path(data_dir) / "broker"
    for sub in ("queue", "control", "claimed", "quarantine"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    # a hostname, which the transport ignores, keeps kombu from warning on every connection
    return "filesystem://localhost/", {
        "data_folder_in": str(folder / "queue"),
        "data_folder_out": str(folder / "queue"),
        "control_folder": str(folder / "control"),
        "claimed_folder": str(folder / "claimed"),
        "quarantine_folder": str(folder / "quarantine"),
        # Seconds between scans of the queue folder when it is empty.
        "polling_interval": 0.1,
    }


def create_celery_app(
    *,
    data_dir: Path | str,
    broker_url: str = "",
    queue: str = "fibertensor",
    concurrency: int = 1,
    warmup_lmax: tuple[int, ...] = (),
    soft_time_limit: int = 3300,
    time_limit: int = 3600,
    visibility_timeout: int = 7200,
    heartbeat_interval: float = 5.0,
    heartbeat_timeout: float = 120.0,
    max_worker_losses: int = 3,
    transient_retries: int = 3,
    keep_inputs: bool = False,
) -> Celery:
    """A configured Celery app; the ``fibertensor_*`` keys are read by :mod:`worker.tasks`.

    ``concurrency`` pool processes each run one job at a time; on one GPU several overlap
    one job's reading and writing of files with another's kernels. Each loads the peaks
    kernels of the SH orders ``warmup_lmax`` when it starts (:mod:`worker.tasks`)."""
    url, transport_options = _broker(broker_url, Path(data_dir), visibility_timeout)
    app = Celery("fibertensor")
    app.conf.update(
        broker_url=url,
        broker_transport=None if broker_url else TRANSPORT,
        broker_transport_options=transport_options,
        broker_connection_retry_on_startup=True,
        # Ids only, as JSON: never pickle, so a message cannot execute code.
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        result_backend=None,
        task_default_queue=queue,
        # A job's message is acknowledged when it ends, and handed back to the queue if its
        # process dies; each worker process takes one job at a time.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        # Seconds the main process waits on a dead pool process before requeueing its job
        # (Celery's default 10 s keeps the only pool slot blocked that long).
        worker_lost_wait=2.0,
        worker_concurrency=concurrency,
        # A pool process signals it is up once its warm-up (a CUDA context, kernels loaded
        # or, with a cold cache, compiled) is done; Celery's 4 s would kill it meanwhile.
        worker_proc_alive_timeout=600.0,
        task_soft_time_limit=soft_time_limit,
        task_time_limit=time_limit,
        worker_hijack_root_logger=False,
        include=["worker.tasks"],
        fibertensor_data_dir=str(data_dir),
        fibertensor_warmup_lmax=list(warmup_lmax),
        fibertensor_heartbeat_interval=heartbeat_interval,
        fibertensor_heartbeat_timeout=heartbeat_timeout,
        fibertensor_max_worker_losses=max_worker_losses,
        fibertensor_transient_retries=transient_retries,
        fibertensor_keep_inputs=keep_inputs,
    )
    return app


def _job_id_of(message: dict[str, Any]) -> str:
    """The job id a task message carries (its body is base64 JSON ``[args, kwargs, embed]``)."""
    return str(json.loads(base64.b64decode(message["body"]))[0][0])


def _filesystem_waiting(folder: str, queue: str) -> set[str]:
    ids = set()
    for path in Path(folder).glob(f"*.{queue}.msg"):
        try:
            ids.add(_job_id_of(json.loads(path.read_bytes())))
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            continue  # taken by a worker meanwhile, or not one of our messages
    return ids


def _redis_waiting(url: str, queue: str) -> set[str]:
    """Messages in the queue's lists (one per priority step) and those workers hold
    unacknowledged (kombu's ``unacked`` hash: running jobs and retries waiting their countdown)."""
    import redis

    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    try:
        raw = [m for key in client.scan_iter(match=f"{queue}*", _type="list") for m in client.lrange(key, 0, -1)]
        raw += [json.loads(entry)[0] for entry in client.hvals("unacked")]
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise ConnectionError(f"Redis is unreachable ({exc})") from exc
    finally:
        client.close()
    ids = set()
    for message in raw:
        try:
            ids.add(_job_id_of(json.loads(message) if isinstance(message, bytes) else message))
        except (ValueError, KeyError, IndexError, TypeError):
            continue  # not one of our messages
    return ids


def waiting_job_ids(app: Celery) -> set[str]:
    """Ids of the jobs a broker message stands for: waiting in the queue, or held by a worker.

    A job that is ``queued`` with no message lost it: a worker of the embedded broker (which
    deletes a message file when a worker takes it) was killed, or Redis restarted without
    its append-only file. Raises the broker's errors when it is unreachable.
    """
    queue = app.conf.task_default_queue
    if app.conf.broker_url.startswith("filesystem:"):
        return _filesystem_waiting(app.conf.broker_transport_options["data_folder_in"], queue)
    return _redis_waiting(app.conf.broker_url, queue)


def publish_job(app: Celery, job_id: str) -> None:
    """Queue a job by id (raises kombu/redis errors when the broker is unreachable)."""
    app.send_task(RUN_JOB_TASK, args=[job_id], queue=app.conf.task_default_queue, retry=False)
