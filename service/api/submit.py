"""``POST /v1/jobs/{kind}``: one route per registered job kind, all sharing one upload path.

The route's form (files and parameters) is documented from the kind's input slots and
pydantic parameter model; the body is parsed by :mod:`service.uploads`, not by FastAPI, so
that files stream to disk instead of being spooled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

from fastapi import APIRouter, Request, status
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from service.deps import CeleryDep, SettingsDep, StoreDep, TenantDep
from service.embedded_worker import refuse_while_worker_down
from service.problems import PROBLEM_RESPONSES, Problem
from service.schemas import JobOut, api_url
from service.uploads import check_inputs, parse_fields, receive_upload, upload_form_schema
from worker.celery_app import publish_job
from worker.errors import InputError
from worker.input_limits import check_backend
from worker.job_kinds import JobKind
from worker.job_store import JobRecord, input_name, utc_now, with_input_names

__all__ = ["build_submit_router"]


def _check_backend(params: BaseModel) -> None:
    """:func:`worker.input_limits.check_backend` as a 422 problem."""
    try:
        check_backend(params)
    except InputError as exc:
        raise Problem(422, exc.detail, title=exc.title) from None


def _submit_endpoint(kind: JobKind) -> Callable[..., Any]:
    async def submit(
        request: Request, settings: SettingsDep, store: StoreDep, celery: CeleryDep, tenant: TenantDep
    ) -> JSONResponse:
        refuse_while_worker_down(settings.data_dir)
        with request.app.state.uploads.hold(tenant), store.staging() as (job_id, folder):
            upload = await receive_upload(request, kind, folder / "inputs", settings.max_upload_bytes,
                                          settings.upload_idle_timeout)
            params, label = parse_fields(kind, upload.fields)
            if settings.embedded_broker:  # the workers run on this machine: its GPU is theirs
                _check_backend(params)
            try:
                files, uploaded = await run_in_threadpool(check_inputs, kind, upload.files, params,
                                                          settings.input_limits)
            except Problem as exc:  # name the files as the client did, not as they were stored
                exc.detail = with_input_names(
                    exc.detail, {upload.files[slot].name: name for slot, name in upload.filenames.items()})
                raise
            record = JobRecord(
                id=job_id,
                kind=kind.name,
                tenant=tenant,
                label=label,
                params=params.model_dump(mode="json"),
                inputs={slot: path.name for slot, path in files.items()},
                input_names={slot: input_name(upload.filenames[slot]) for slot in files},
                uploaded=uploaded,
                created_at=utc_now(),
            )
            store.commit(folder, record)
        try:
            await run_in_threadpool(publish_job, celery, job_id)
        except Exception as exc:
            store.delete(job_id)
            raise Problem(
                503,
                f"the job queue is unreachable ({type(exc).__name__}); nothing was kept, "
                "send the job again in a moment",
            ) from None
        job = JobOut.from_record(record, request)
        return JSONResponse(
            job.model_dump(mode="json"),
            status_code=status.HTTP_202_ACCEPTED,
            headers={"Location": api_url(request, "get_job", job_id=job_id)},
        )

    submit.__name__ = f"submit_{kind.name.replace('-', '_')}"
    return submit


def build_submit_router(kinds: Mapping[str, JobKind]) -> APIRouter:
    router = APIRouter(prefix="/v1/jobs", tags=["submit"])
    for kind in kinds.values():
        router.add_api_route(
            f"/{kind.name}",
            _submit_endpoint(kind),
            methods=["POST"],
            status_code=status.HTTP_202_ACCEPTED,
            response_model=JobOut,
            summary=kind.summary or f"Submit a {kind.name} job",
            description=(
                f"{kind.summary}\n\nMultipart upload of "
                + ", ".join(f"`{s.name}`{'' if s.required else ' (optional)'}" for s in kind.inputs)
                + ", the parameters below and an optional `label` (batch name). Inputs are "
                "checked from their headers before the job is queued; a rejected upload "
                "leaves nothing behind. Answers 202 with the job and a `Location` header."
            ),
            responses={k: PROBLEM_RESPONSES[k] for k in (400, 401, 408, 413, 415, 422, 429, 503, 507)},
            openapi_extra=upload_form_schema(kind),
        )
    return router
