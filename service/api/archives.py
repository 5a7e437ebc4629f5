"""``results.zip``: every result of a job, or of a batch (a label), as one streamed zip.

The archive is written while it is sent: :class:`zipfile.ZipFile` on a write-only sink
(no ``seek``/``tell``) emits local headers, data and data descriptors in order, so the
server holds one chunk at a time whatever the size of the results. Members are stored,
not deflated: NIfTI results are gzip already. Tenants are kept apart exactly as by the
other job routes: another tenant's job is 404, and a batch lists only the caller's jobs.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from service.api.jobs import own_job
from service.deps import StoreDep, TenantDep
from service.problems import PROBLEM_RESPONSES, Problem
from worker.job_store import JobRecord, JobStatus, JobStore

__all__ = ["router"]

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], responses={401: PROBLEM_RESPONSES[401]})

_CHUNK = 1 << 20
_ZIP_DOC = {200: {"content": {"application/zip": {}}, "description": "A zip, streamed"}}


class _Sink:
    """A write-only file for :class:`zipfile.ZipFile`; :meth:`drain` hands over what was
    written since the last call."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def drain(self) -> bytes:
        data = b"".join(self._parts)
        self._parts.clear()
        return data


def _zip_stream(members: list[tuple[str, Path]]) -> Iterator[bytes]:
    """Yield a zip of ``(name in archive, file)`` pairs, a chunk at a time.

    A file that vanishes meanwhile (its job deleted) raises, which aborts the transfer:
    the client sees a failed download, never a silently incomplete archive.
    """
    sink = _Sink()
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for arcname, path in members:
            # the size known up front lets zipfile use zip64 only for members that need it
            info = zipfile.ZipInfo.from_file(path, arcname)
            with open(path, "rb") as source, archive.open(info, "w") as member:
                while block := source.read(_CHUNK):
                    member.write(block)
                    yield sink.drain()
            yield sink.drain()
    yield sink.drain()


def _attachment(stem: str) -> dict[str, str]:
    """``Content-Disposition`` for ``stem.zip``: an ASCII fallback and the UTF-8 name."""
    ascii_name = re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip("._") or "results"
    return {
        "Content-Disposition": f"attachment; filename=\"{ascii_name}.zip\"; "
        f"filename*=UTF-8''{quote(stem + '.zip', safe='')}"
    }


def _input_stem(record: JobRecord) -> str:
    """The job's first input's uploaded name without its file type (``sub-01_fod`` of
    ``sub-01_fod.nii.gz``), else the job's id (a job recorded before names were kept)."""
    for slot, name in record.input_names.items():
        uploaded = record.uploaded.get(slot)
        stored = uploaded.name if uploaded else record.inputs.get(slot, slot)
        suffix = stored[len(slot):]  # stored as "<slot><suffix>", the suffix the name ends in
        stem = name[: len(name) - len(suffix)] if suffix and name.lower().endswith(suffix.lower()) else name
        if stem.strip("."):
            return stem
    return record.id


def _batch_folders(records: list[JobRecord]) -> list[str]:
    """One folder name per job: its input's stem, made unique with ``-2``, ``-3``... in order."""
    taken: set[str] = set()
    folders = []
    for record in records:
        stem = _input_stem(record)
        folder, n = stem, 1
        while folder in taken:
            n += 1
            folder = f"{stem}-{n}"
        taken.add(folder)
        folders.append(f"{folder}/")
    return folders


def _members(store: JobStore, record: JobRecord, folder: str = "") -> list[tuple[str, Path]]:
    outputs = store.outputs_dir(record.id)
    return [(f"{folder}{result.name}", outputs / result.name) for result in record.results]


@router.get(
    "/results.zip",
    response_class=StreamingResponse,
    summary="Download every result of a batch (the succeeded jobs with this label) as a zip",
    description="One folder per job, named after its (first) input file without the file "
    "type, `sub-01_fod/` for `sub-01_fod.nii.gz`, with `-2`, `-3`... added where two jobs' "
    "inputs have the same name, oldest job first. Streamed: it starts at once and "
    "costs the server one chunk of memory whatever its size.",
    responses={**_ZIP_DOC, 404: PROBLEM_RESPONSES[404], 422: PROBLEM_RESPONSES[422]},
)
def batch_results_zip(
    store: StoreDep,
    tenant: TenantDep,
    label: Annotated[str, Query(min_length=1, max_length=200, description="The batch's label")],
) -> StreamingResponse:
    records = list(store.records(tenant=tenant, status=JobStatus.succeeded, label=label))
    if not records:
        raise Problem(
            404,
            f"no succeeded jobs labelled {label!r}; list the batch with GET /v1/jobs?label=... "
            "and wait until some succeed",
        )
    records.reverse()
    members = [m for record, folder in zip(records, _batch_folders(records)) for m in _members(store, record, folder)]
    return StreamingResponse(_zip_stream(members), media_type="application/zip", headers=_attachment(label))


@router.get(
    "/{job_id}/results.zip",
    response_class=StreamingResponse,
    summary="Download every result of a job as a zip",
    responses={**_ZIP_DOC, 404: PROBLEM_RESPONSES[404], 409: PROBLEM_RESPONSES[409]},
)
def job_results_zip(job_id: str, store: StoreDep, tenant: TenantDep) -> StreamingResponse:
    record = own_job(store, job_id, tenant)
    if not record.results:
        raise Problem(
            409,
            f"job {job_id} has no results (it is {record.status.value}); results are there "
            "once it has succeeded",
        )
    stem = f"{record.label}-{record.id}" if record.label else record.id
    return StreamingResponse(_zip_stream(_members(store, record)), media_type="application/zip",
                             headers=_attachment(stem))
