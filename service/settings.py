"""Every setting of the service, read from ``FIBERTENSOR_*`` environment variables.

docs/service.md's settings table lists these fields; keep the two in step.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from service.input_limit_settings import ENV_PREFIX, InputLimitSettings

__all__ = ["Settings", "get_settings"]


class Settings(BaseSettings, InputLimitSettings):
    """Service settings; environment variables are the field names upper-cased with prefix
    ``FIBERTENSOR_`` (``data_dir`` ← ``FIBERTENSOR_DATA_DIR``); the input limits' fields come
    from :class:`service.input_limit_settings.InputLimitSettings`."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    data_dir: Path = Field(
        Path("fibertensor-data"),
        description="Job folders (inputs, job.json, outputs, log); shared by API and workers.",
    )
    broker_url: str = Field(
        "",
        description="Celery broker, e.g. redis://host:6379/0. Empty: the embedded broker, "
        "a folder under data_dir (one machine, no server).",
    )
    queue: str = Field("fibertensor", description="Celery queue name the jobs go to.")
    api_keys: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        description="API keys and their tenants, as key=tenant pairs separated by commas, or "
        "a JSON object. Empty: no authentication, one tenant.",
    )
    max_upload_bytes: int = Field(
        2 * 1024**3, gt=0, description="Largest request body accepted (413 above)."
    )
    worker_concurrency: int = Field(
        1,
        ge=1,
        description="Job processes per worker, each running one job with its own CUDA "
        "context; several per GPU overlap one job's file reading and writing with another's "
        "GPU work (a GPU worker on a 16-core host: 6). Keep 1 for a CPU-only worker, whose "
        "one job already uses every core.",
    )
    worker_warmup_lmax: Annotated[list[int], NoDecode] = Field(
        default_factory=lambda: [8],
        description="SH orders whose peaks kernels each job process loads when it starts, "
        "so that no job waits for them; comma-separated (e.g. 4,6,8), empty for none.",
    )
    # docs/decisions/api-processes.md
    api_workers: int = Field(
        1,
        ge=1,
        description="API processes of `fibertensor serve`; each writes and checks (inflates) "
        "the uploads it receives, so a host taking several whole-brain subjects a second "
        "needs several.",
    )
    job_soft_time_limit: int = Field(
        3300, gt=0, description="Seconds after which a job is asked to stop and fails."
    )
    job_time_limit: int = Field(
        3600, gt=0, description="Seconds after which a job's process is killed and it fails."
    )
    visibility_timeout: int = Field(
        7200,
        gt=0,
        description="Seconds before Redis hands an unacknowledged job to another worker; "
        "must exceed job_time_limit.",
    )
    heartbeat_interval: float = Field(
        5.0, gt=0, description="Seconds between a running job's heartbeats."
    )
    heartbeat_timeout: float = Field(
        120.0,
        gt=0,
        description="A running job whose heartbeat is older than this is treated as "
        "orphaned (its worker died): requeued, or failed after max_worker_losses.",
    )
    max_worker_losses: int = Field(
        3,
        ge=1,
        description="A job whose worker died this many times while running it fails "
        "instead of being requeued again.",
    )
    transient_retries: int = Field(
        3, ge=0, description="Retries of a job that hit a transient error (I/O, connection)."
    )
    results_ttl_hours: float = Field(
        0.0,
        ge=0,
        description="Hours a finished job (succeeded, failed or cancelled: its record, log and "
        "results) is kept after it ended; the API's janitor then removes it, as DELETE "
        "/v1/jobs/{id} would. 0: kept until deleted. A cohort's results (27 MB a whole-brain "
        "peaks job) otherwise stay on the data volume for good.",
    )
    # docs/decisions/inputs-removed-after-success.md
    keep_inputs: bool = Field(
        False,
        description="Keep a job's uploaded inputs once it has succeeded. Off: they are removed "
        "then (its results record the input's name and sha256), so a cohort's inputs do not "
        "fill the data volume, and an input that lives only while its job runs is seldom "
        "written to disk at all. A job that failed or was cancelled keeps them.",
    )
    janitor_interval: float = Field(
        10.0, gt=0, description="Seconds between the API's sweeps for orphaned jobs."
    )
    upload_idle_timeout: float = Field(
        60.0,
        gt=0,
        description="Seconds an upload may send nothing before the API answers 408 and closes "
        "the connection (a client that stalled half-way holds a connection and file handles).",
    )
    max_concurrent_uploads: int = Field(
        256,
        ge=1,
        description="Uploads one API process receives at a time; one more is answered 503 with "
        "Retry-After. Each holds three file handles (its connection, its staging folder, the "
        "file being written): keep it well under the process's open-file limit (ulimit -n).",
    )
    max_concurrent_uploads_per_tenant: int = Field(
        64,
        ge=1,
        description="Uploads one API process receives at a time for one tenant; one more is "
        "answered 429 with Retry-After, so one client cannot take every upload slot.",
    )
    worker_max_restarts: int = Field(
        5,
        ge=0,
        description="Times in a row `fibertensor serve` starts its worker again after it died "
        "(waiting 1 s, doubling up to 30 s; a worker that ran a minute resets the count); then "
        "serve exits with status 1.",
    )

    # The address clients reach the API at, for the URLs its answers carry.
    public_url: str = Field(
        "",
        description="Base URL clients reach the API at (e.g. https://mri.example.org), which "
        "the job's Location and result URLs start with. Empty: those URLs are paths (/v1/...), "
        "to be resolved against the address the client used; never taken from the request's "
        "Host header.",
    )

    @field_validator("public_url")
    @classmethod
    def _check_public_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not value:
            return ""
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
            raise ValueError(
                f"FIBERTENSOR_PUBLIC_URL must be an http(s) base URL such as https://mri.example.org, not {value!r}"
            )
        return value

    @field_validator("api_keys", mode="before")
    @classmethod
    def _parse_api_keys(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        text = value.strip()
        if not text:
            return {}
        if text.startswith("{"):
            return json.loads(text)
        keys: dict[str, str] = {}
        for pair in text.split(","):
            key, sep, tenant = pair.strip().partition("=")
            if not sep or not key or not tenant:
                raise ValueError(
                    "FIBERTENSOR_API_KEYS must be key=tenant pairs separated by commas "
                    '(e.g. "k1=lab-a,k2=lab-b") or a JSON object'
                )
            keys[key] = tenant
        return keys

    @field_validator("worker_warmup_lmax", mode="before")
    @classmethod
    def _parse_lmax_list(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        try:
            return [int(part) for part in value.replace(",", " ").split()]
        except ValueError:
            raise ValueError(
                f"FIBERTENSOR_WORKER_WARMUP_LMAX must be SH orders separated by commas (e.g. 4,6,8), not {value!r}"
            ) from None

    @model_validator(mode="after")
    def _limits_nest(self) -> "Settings":
        if not self.job_soft_time_limit < self.job_time_limit < self.visibility_timeout:
            raise ValueError(
                "need job_soft_time_limit < job_time_limit < visibility_timeout, so a job is "
                "stopped before it is killed and killed before Redis hands it to another worker"
            )
        return self

    @property
    def embedded_broker(self) -> bool:
        return not self.broker_url


@functools.cache
def get_settings() -> Settings:
    return Settings()
