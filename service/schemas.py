"""Shapes of the API's JSON answers."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable

from fastapi import Request
from pydantic import BaseModel, Field

from worker.job_store import JobRecord, JobStatus

__all__ = ["api_url", "JobErrorOut", "ResultOut", "JobOut", "JobListOut", "HealthOut", "ReadyOut"]


class JobErrorOut(BaseModel):
    title: str
    detail: str


class ResultOut(BaseModel):
    name: str
    url: str = Field(description="Where to download the file (GET).")
    bytes: int
    sha256: str


_JOB_MARK, _NAME_MARK = "\x00job\x00", "\x00name\x00"


def api_url(request: Request, route: str, **path_params: str) -> str:
    """The URL of ``route`` a client is given: under ``FIBERTENSOR_PUBLIC_URL``, else its
    path (under a proxy's root path), which the client resolves against the address it
    used. Never built from the request's ``Host`` header, which the client (or an attacker)
    chooses."""
    base = request.app.state.settings.public_url or request.scope.get("root_path", "")
    return base + request.app.url_path_for(route, **path_params)


def _result_url_maker(request: Request) -> Callable[[str, str], str]:
    """``(job id, result name) → download URL`` for this request: the route's URL is looked
    up once per request (a listing of hundreds of jobs, ten results each, spent most of its
    time in ``url_for``) and the id and name put into it, as ``url_path_for`` puts them."""
    maker = getattr(request.state, "result_url_maker", None)
    if maker is None:
        template = api_url(request, "download_result", job_id=_JOB_MARK, name=_NAME_MARK)
        head, _, rest = template.rpartition(_JOB_MARK)
        middle, _, tail = rest.rpartition(_NAME_MARK)
        maker = request.state.result_url_maker = lambda job_id, name: f"{head}{job_id}{middle}{name}{tail}"
    return maker


class JobOut(BaseModel):
    id: str
    kind: str
    label: str | None
    status: JobStatus
    progress: float = Field(ge=0.0, le=1.0)
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    params: dict[str, Any]
    input_names: dict[str, str] = Field(
        default_factory=dict,
        description="Each input's file name as it was uploaded, by input field (e.g. {\"fod\": \"sub-01_fod.nii.gz\"}).",
    )
    error: JobErrorOut | None
    warnings: list[str] = Field(
        default_factory=list, description="What to know about the results (e.g. voxels skipped for NaN input)."
    )
    results: list[ResultOut]

    @classmethod
    def from_record(cls, record: JobRecord, request: Request) -> "JobOut":
        result_url = _result_url_maker(request)
        return cls(
            id=record.id,
            kind=record.kind,
            label=record.label,
            status=record.status,
            progress=record.progress,
            created_at=record.created_at,
            started_at=record.started_at,
            finished_at=record.finished_at,
            params=record.params,
            input_names=record.input_names,
            error=JobErrorOut(**record.error.model_dump()) if record.error else None,
            warnings=record.warnings,
            results=[
                ResultOut(
                    name=r.name,
                    url=result_url(record.id, r.name),
                    bytes=r.bytes,
                    sha256=r.sha256,
                )
                for r in record.results
            ],
        )


class JobListOut(BaseModel):
    jobs: list[JobOut]
    next_cursor: str | None = Field(
        description="Pass as ?cursor= to get the next page; null on the last page."
    )


class WorkerStateOut(BaseModel):
    state: str = Field(description="running, restarting (it died; started again shortly) or failed")
    pid: int | None = None
    restarts: int = Field(description="Times it was started again since `fibertensor serve` started")
    detail: str = ""


class HealthOut(BaseModel):
    status: str
    worker: WorkerStateOut | None = Field(
        None, description="The worker `fibertensor serve` runs beside this API (absent with --no-worker)")


class ReadyOut(BaseModel):
    status: str
    broker: str
    workers: list[str]
    checked_at: datetime = Field(description="When the broker and workers were last asked (at most 30 s ago).")
