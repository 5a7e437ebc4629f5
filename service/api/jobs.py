"""Reading, listing, downloading and cancelling or deleting jobs, and reading their logs."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.responses import FileResponse, JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import MalformedRangeHeader, RangeNotSatisfiable

from service.deps import KindsDep, StoreDep, TenantDep
from service.problems import PROBLEM_RESPONSES, Problem, echo
from service.schemas import JobListOut, JobOut
from worker.job_store import TERMINAL_STATUSES, InvalidCursor, JobNotFound, JobRecord, JobStatus, JobStore, utc_now

__all__ = ["router", "own_job"]

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], responses={401: PROBLEM_RESPONSES[401]})


_LIST_PARAMETERS = frozenset({"status", "label", "limit", "cursor"})


def _not_found(job_id: str) -> Problem:
    return Problem(404, f"no job {echo(job_id)} here; list your jobs with GET /v1/jobs")


def own_job(store: JobStore, job_id: str, tenant: str) -> JobRecord:
    """The job, if it exists and belongs to ``tenant``; others' jobs are 404, as if absent."""
    try:
        record = store.read(job_id)
    except JobNotFound:
        raise _not_found(job_id) from None
    if record.tenant != tenant:
        raise _not_found(job_id)
    return record


@router.get(
    "",
    response_model=JobListOut,
    summary="List and poll jobs (newest first)",
    responses={422: PROBLEM_RESPONSES[422]},
)
def list_jobs(
    request: Request,
    store: StoreDep,
    tenant: TenantDep,
    status_: Annotated[JobStatus | None, Query(alias="status")] = None,
    label: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    # the pattern documents what a cursor is; this route refuses others in its own words
    cursor: Annotated[str | None, Query(max_length=64, json_schema_extra={"pattern": "^[0-9a-f]{28}$"},
                                        description="next_cursor of the previous page")] = None,
) -> JobListOut:
    unknown = sorted(set(request.query_params) - _LIST_PARAMETERS)
    if unknown:
        # a misspelt filter (?staus=failed) would otherwise silently list every job
        raise Problem(
            422, f"unknown query parameter(s) {', '.join(map(echo, unknown))}; the parameters are "
            + ", ".join(sorted(_LIST_PARAMETERS)),
        )
    try:
        records, next_cursor = store.list(tenant=tenant, status=status_, label=label, limit=limit, cursor=cursor)
    except InvalidCursor:
        raise Problem(
            422, f"cursor {echo(cursor)} is not one this service handed out; pass the next_cursor of "
            "the previous page, or leave cursor out for the first page",
            errors=[{"field": "cursor", "message": "not a cursor from next_cursor"}],
        ) from None
    return JobListOut(jobs=[JobOut.from_record(r, request) for r in records], next_cursor=next_cursor)


@router.get(
    "/{job_id}",
    response_model=JobOut,
    summary="A job's status, progress and results",
    responses={404: PROBLEM_RESPONSES[404]},
)
def get_job(job_id: str, request: Request, store: StoreDep, tenant: TenantDep) -> JobOut:
    return JobOut.from_record(own_job(store, job_id, tenant), request)


@router.head("/{job_id}/results/{name}", include_in_schema=False)
@router.get(
    "/{job_id}/results/{name}",
    response_class=FileResponse,
    summary="Download a result file (HEAD gives its size and ETag only)",
    responses={200: {"content": {"application/octet-stream": {}}}, 404: PROBLEM_RESPONSES[404],
               416: PROBLEM_RESPONSES[416]},
)
def download_result(job_id: str, name: str, request: Request, store: StoreDep, tenant: TenantDep) -> Response:
    record = own_job(store, job_id, tenant)
    result = next((r for r in record.results if r.name == name), None)
    if result is None:
        names = ", ".join(r.name for r in record.results) or "none yet"
        raise Problem(404, f"job {job_id} has no result {echo(name)}; its results: {names}")
    etag = f'"{result.sha256}"'
    if etag in [tag.strip() for tag in request.headers.get("if-none-match", "").split(",")]:
        return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers={"ETag": etag})
    if request.headers.get("if-range") in (None, etag):  # a stale If-Range gets the whole file
        _check_range(request.headers.get("range"), result.bytes)
    return FileResponse(
        store.outputs_dir(job_id) / name,
        media_type="application/octet-stream",
        filename=name,
        headers={"ETag": etag},
    )


def _check_range(http_range: str | None, size: int) -> None:
    """Refuse a ``Range`` the file cannot satisfy as a problem (416, with ``Content-Range``)
    or a malformed one (400); FileResponse, which serves the rest, answers those in plain
    text. Its own parser decides, so both agree on what is satisfiable."""
    if http_range is None:
        return
    try:
        FileResponse._parse_range_header(http_range, size)
    except RangeNotSatisfiable:
        raise Problem(
            416, f"the range {echo(http_range)} starts past the end of this {size}-byte file; ask for "
            f"bytes 0 to {size - 1}, or leave Range out for the whole file",
            headers={"Content-Range": f"bytes */{size}"},
        ) from None
    except MalformedRangeHeader:
        raise Problem(400, f"the Range header {echo(http_range)} is malformed; send e.g. Range: bytes=0-1023") from None


def _route_paths(routes) -> set[str]:
    """The paths of ``routes``, those of included routers too (FastAPI ≥ 0.165 keeps an
    included router whole, as ``original_router``; older versions copy its routes)."""
    paths = set()
    for route in routes:
        included = getattr(route, "original_router", None)
        paths |= _route_paths(included.routes) if included is not None else {getattr(route, "path", None)}
    return paths


@router.post("/{kind}", include_in_schema=False)
def unknown_kind(kind: str, request: Request, kinds: KindsDep) -> Response:
    """Submit routes exist for the registered kinds only; this answers the rest (which would
    otherwise be 405, as ``/v1/jobs/{job_id}`` takes GET and DELETE). A path that is a route
    of its own (``/v1/jobs/results.zip``) is 405, naming its methods; the routes are looked
    up in the app's table, the kinds in the registry (no OpenAPI document is built)."""
    if request.url.path in _route_paths(request.app.routes):
        raise StarletteHTTPException(status.HTTP_405_METHOD_NOT_ALLOWED)
    raise Problem(
        404, f"there is no job kind {echo(kind)}; submit to one of: "
        + ", ".join(f"POST /v1/jobs/{name}" for name in kinds),
        title="Unknown job kind",
    )


@router.delete(
    "/{job_id}",
    summary="Cancel a queued or running job, or delete a finished one and its files",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={
        200: {"model": JobOut, "description": "A queued job, now cancelled"},
        202: {"model": JobOut, "description": "A running job, asked to stop at its next chunk"},
        204: {"description": "A finished job, deleted with its files"},
        404: PROBLEM_RESPONSES[404],
    },
)
def delete_job(job_id: str, request: Request, store: StoreDep, tenant: TenantDep) -> Response:
    if request.url.path in _route_paths(request.app.routes):  # /v1/jobs/results.zip is no job
        raise StarletteHTTPException(status.HTTP_405_METHOD_NOT_ALLOWED)
    own_job(store, job_id, tenant)

    def cancel(record: JobRecord) -> JobRecord | None:
        if record.status in TERMINAL_STATUSES:
            return None
        record.cancel_requested = True
        if record.status is JobStatus.queued:
            record.status = JobStatus.cancelled
            record.finished_at = utc_now()
        return record

    try:
        store.mark_cancel_requested(job_id)
        record = store.update(job_id, cancel)
        if record is None:
            store.delete(job_id)
            return Response(status_code=status.HTTP_204_NO_CONTENT)
    except JobNotFound:
        raise _not_found(job_id) from None
    code = status.HTTP_200_OK if record.status is JobStatus.cancelled else status.HTTP_202_ACCEPTED
    return JSONResponse(JobOut.from_record(record, request).model_dump(mode="json"), status_code=code)


@router.get(
    "/{job_id}/log",
    response_class=Response,
    summary="A job's log: what it reported while it ran",
    description="One line per event, each starting with its UTC time: attempts started, the "
    "job's own messages, the error of a refused input and, for a fault of the service, a "
    "one-line summary with the error id the operator finds the details by. Poll it while "
    "the job runs.",
    responses={
        200: {"content": {"text/plain": {"example": "2026-01-05T09:30:01.123456Z attempt 1 started on "
                                         "gpu-1:412\n"}}},
        404: PROBLEM_RESPONSES[404],
    },
)
def job_log(job_id: str, store: StoreDep, tenant: TenantDep) -> Response:
    own_job(store, job_id, tenant)
    try:
        text = store.log_path(job_id).read_bytes()
    except FileNotFoundError:  # not started yet, or deleted meanwhile
        text = b""
    # whole lines only: the runner may be appending one right now
    return Response(text[: text.rfind(b"\n") + 1], media_type="text/plain", headers={"Cache-Control": "no-store"})
