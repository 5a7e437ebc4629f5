"""Multipart uploads streamed to disk, and the checks an input passes before it is queued.

The request body is parsed as it arrives (python-multipart's push parser) and each file part
goes straight into the job's staging folder in chunks, so an upload of any size costs a few
kilobytes of memory; the body is cut off at ``max_upload_bytes``. Inputs are then checked
by :mod:`worker.input_limits`, from their headers first, so a tiny .nii.gz that claims
terabytes (a gzip bomb) or a job that would need more memory than allowed is refused
without anything being inflated or allocated; the one pass that proves a ``.nii.gz`` whole
keeps the ``.nii`` it inflates to, which is what the job reads.

An upload holds a connection and file handles while it arrives, so each API process takes at
most ``max_concurrent_uploads`` at a time (``max_concurrent_uploads_per_tenant`` for one
tenant) and answers the next 503 (429 for the tenant's) with ``Retry-After``, and an upload
that sends nothing for ``upload_idle_timeout`` seconds is answered 408 and its connection
closed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from fastapi import Request
from starlette.requests import ClientDisconnect
from pydantic import BaseModel, ValidationError
from python_multipart.multipart import MultipartParser, MultipartState, parse_options_header

from service.problems import Problem
from worker.errors import InputError
from worker.input_limits import InputLimits, InputTooLarge, check_job_inputs
from worker.job_kinds import InputSlot, JobKind, UploadedInput
from worker.params import error_fields, is_list_field, params_from_text

__all__ = ["Upload", "UploadSlots", "receive_upload", "parse_fields", "check_inputs", "upload_form_schema"]

# Form fields that are not files are parameters: short strings.
_MAX_FIELD_BYTES = 64 * 1024
_MAX_LABEL_CHARS = 200
_LABEL_FIELD = "label"
# An answer given before the body was read ends the connection: the rest of the body, if
# it ever comes, is not worth reading.
_CLOSE = {"Connection": "close"}
# What a refused upload is told to wait: uploads end within the idle timeout or keep sending.
_RETRY_AFTER_SECONDS = 10


class UploadSlots:
    """The uploads this API process is receiving, by tenant, within the two caps. Used from the
    event loop only, so counting needs no lock."""

    def __init__(self, total: int, per_tenant: int):
        self.total = total
        self.per_tenant = per_tenant
        self.by_tenant: Counter[str] = Counter()

    @contextlib.contextmanager
    def hold(self, tenant: str) -> Iterator[None]:
        """A slot for one upload of ``tenant`` while the block runs; :class:`Problem` 429 when
        the tenant has ``per_tenant`` under way, 503 when the process has ``total``."""
        retry = {"Retry-After": str(_RETRY_AFTER_SECONDS), **_CLOSE}
        if self.by_tenant[tenant] >= self.per_tenant:
            raise Problem(
                429, f"this API already receives {self.per_tenant} uploads of yours at once "
                f"(FIBERTENSOR_MAX_CONCURRENT_UPLOADS_PER_TENANT); send this one again in "
                f"{_RETRY_AFTER_SECONDS} s, once one of them has finished (fibertensor submit --transfers "
                "sets how many it sends at once)", title="Too many uploads", headers=retry,
            )
        if sum(self.by_tenant.values()) >= self.total:
            raise Problem(
                503, f"this API already receives {self.total} uploads at once "
                f"(FIBERTENSOR_MAX_CONCURRENT_UPLOADS); nothing was kept, send it again in "
                f"{_RETRY_AFTER_SECONDS} s", headers=retry,
            )
        self.by_tenant[tenant] += 1
        try:
            yield
        finally:
            self.by_tenant[tenant] -= 1
            if not self.by_tenant[tenant]:
                del self.by_tenant[tenant]


@dataclass
class Upload:
    """What a multipart request carried: saved input files by slot, the file names the client
    gave them, and text fields."""

    files: dict[str, Path] = field(default_factory=dict)
    filenames: dict[str, str] = field(default_factory=dict)
    fields: dict[str, str] = field(default_factory=dict)


def _slot_suffix(slot: InputSlot, filename: str) -> str:
    lower = filename.lower()
    for suffix in sorted(slot.suffixes, key=len, reverse=True):
        if lower.endswith(suffix.lower()):
            return suffix
    raise Problem(
        422,
        f"file {filename!r} in field {slot.name!r} has the wrong type: {slot.name} must end "
        f"in {' or '.join(slot.suffixes)}",
        title="Unsupported file type",
    )


class _PartWriter:
    """python-multipart callbacks: route each part to a file in ``inputs`` or a field."""

    def __init__(self, kind: JobKind, inputs_dir: Path, upload: Upload):
        self.slots = {slot.name: slot for slot in kind.inputs}
        self.params = set(kind.params_model.model_fields) | {_LABEL_FIELD}
        self.inputs_dir = inputs_dir
        self.upload = upload
        self.header_field = b""
        self.header_value = b""
        self.headers: dict[bytes, bytes] = {}
        self.sink: BinaryIO | None = None
        self.field_name: str | None = None
        self.field_value = bytearray()

    def callbacks(self) -> dict[str, Any]:
        return {
            "on_part_begin": self.on_part_begin,
            "on_header_field": lambda data, start, end: self._grow("header_field", data[start:end]),
            "on_header_value": lambda data, start, end: self._grow("header_value", data[start:end]),
            "on_header_end": self.on_header_end,
            "on_headers_finished": self.on_headers_finished,
            "on_part_data": self.on_part_data,
            "on_part_end": self.on_part_end,
        }

    def _grow(self, name: str, data: bytes) -> None:
        value = getattr(self, name) + data
        if len(value) > _MAX_FIELD_BYTES:
            raise Problem(400, "a multipart part header is too long; send a normal form upload")
        setattr(self, name, value)

    def on_part_begin(self) -> None:
        self.headers = {}
        self.field_name = None
        self.field_value = bytearray()

    def on_header_end(self) -> None:
        self.headers[self.header_field.lower()] = self.header_value
        self.header_field = b""
        self.header_value = b""

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self.headers.get(b"content-disposition", b""))
        name = options.get(b"name", b"").decode("utf-8", "replace")
        filename = options.get(b"filename")
        known = ", ".join([*self.slots, *sorted(self.params)])
        if filename is not None:
            slot = self.slots.get(name)
            if slot is None:
                raise Problem(
                    422, f"unexpected file field {name!r}; this job takes the files "
                    f"{', '.join(self.slots)}", title="Unknown field",
                )
            if name in self.upload.files:
                raise Problem(422, f"field {name!r} was sent twice; send one file per field")
            client_name = filename.decode("utf-8", "replace")
            suffix = _slot_suffix(slot, client_name)
            path = self.inputs_dir / f"{name}{suffix}"
            self.sink = open(path, "wb")
            self.upload.files[name] = path
            self.upload.filenames[name] = client_name
        else:
            if name in self.slots:
                raise Problem(422, f"field {name!r} must be a file upload, not a text value")
            if name not in self.params:
                raise Problem(
                    422, f"unexpected field {name!r}; the fields are {known}", title="Unknown field"
                )
            self.field_name = name

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self.sink is not None:
            self.sink.write(memoryview(data)[start:end])  # no copy: the body's chunks are bytes
        else:
            self.field_value += data[start:end]
            if len(self.field_value) > _MAX_FIELD_BYTES:
                raise Problem(422, f"field {self.field_name!r} is longer than {_MAX_FIELD_BYTES} bytes")

    def on_part_end(self) -> None:
        if self.sink is not None:
            self.sink.close()
            self.sink = None
        elif self.field_name is not None:
            if self.field_name in self.upload.fields:
                raise Problem(
                    422, f"field {self.field_name!r} was sent twice; send a list as one field "
                    "with comma-separated values (e.g. ranks=8,8,4)",
                )
            self.upload.fields[self.field_name] = self.field_value.decode("utf-8", "replace")

    def close(self) -> None:
        if self.sink is not None:
            self.sink.close()


async def _chunks(request: Request, idle_timeout: float):
    """The body's chunks; :class:`Problem` 408 when none arrives for ``idle_timeout`` seconds."""
    stream = request.stream()
    while True:
        try:
            yield await asyncio.wait_for(anext(stream), idle_timeout)
        except StopAsyncIteration:
            return
        except asyncio.TimeoutError:
            raise Problem(
                408, f"the upload sent nothing for {idle_timeout:g} s (FIBERTENSOR_UPLOAD_IDLE_TIMEOUT) "
                "and was dropped; nothing was kept, send it again", title="Request timeout", headers=_CLOSE,
            ) from None


async def receive_upload(request: Request, kind: JobKind, inputs_dir: Path, max_bytes: int,
                         idle_timeout: float) -> Upload:
    """Stream a multipart/form-data body into ``inputs_dir``; at most ``max_bytes``, with a
    pause of at most ``idle_timeout`` seconds between chunks."""
    content_type, options = parse_options_header(request.headers.get("content-type", ""))
    boundary = options.get(b"boundary")
    if content_type != b"multipart/form-data" or not boundary:
        raise Problem(
            415,
            "send the job as multipart/form-data: the input files as file fields and the "
            "parameters as text fields (e.g. curl -F fod=@fod.nii.gz -F npeaks=3)",
        )
    too_large = Problem(
        413,
        f"the upload is larger than this server's limit of {max_bytes} bytes "
        "(FIBERTENSOR_MAX_UPLOAD_BYTES); crop or mask the volume, or ask the operator to raise it",
    )
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise too_large
    upload = Upload()
    writer = _PartWriter(kind, inputs_dir, upload)
    received = 0
    try:
        parser = MultipartParser(boundary, writer.callbacks())  # refuses a boundary over 256 bytes
        async for chunk in _chunks(request, idle_timeout):
            received += len(chunk)
            if received > max_bytes:
                raise too_large
            parser.write(chunk)
        parser.finalize()
        if parser.state != MultipartState.END:  # finalize() does not check it
            raise Problem(400, "the multipart body ends before its closing boundary; the upload was cut "
                          "short or malformed, send it again")
    except (Problem, ClientDisconnect, OSError):  # OSError: the disk filled up (507)
        raise
    except Exception as exc:
        raise Problem(400, f"the multipart body could not be parsed ({exc}); send a valid "
                      "multipart/form-data request") from exc
    finally:
        writer.close()
    return upload


def parse_fields(kind: JobKind, fields: Mapping[str, str]) -> tuple[BaseModel, str | None]:
    """The job's parameters (validated by its model, as the CLI validates its options) and
    its label, from text fields."""
    values = dict(fields)
    label = values.pop(_LABEL_FIELD, None)
    if label is not None:
        label = label.strip() or None
    if label is not None and (len(label) > _MAX_LABEL_CHARS or not label.isprintable()):
        raise Problem(422, f"label must be printable text of at most {_MAX_LABEL_CHARS} characters")
    try:
        params = params_from_text(kind.params_model, values)
    except ValidationError as exc:
        errors = [{"field": field, "message": message} for field, message in error_fields(exc)]
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        raise Problem(422, f"invalid parameters: {detail}", title="Invalid parameters", errors=errors) from None
    return params, label


def check_inputs(kind: JobKind, files: Mapping[str, Path], params: BaseModel,
                 limits: InputLimits) -> tuple[dict[str, Path], dict[str, UploadedInput]]:
    """All checks before queueing: required files, then
    :func:`worker.input_limits.check_job_inputs` (service limits, the job's own header
    validation, its working memory, one pass over the data). Raises :class:`Problem`: 413
    for a job over the memory limit, 422 for the rest.

    A ``.nii.gz`` (``.mif.gz``) is stored inflated, as the ``.nii`` (``.mif``) that pass
    writes, once every check passed (the job reads it without inflating it a second time):
    returns the stored files by slot, and, for each stored so, what was uploaded (name and
    sha256) for the job record (docs/decisions/api-stores-inflated-uploads.md)."""
    missing = [slot.name for slot in kind.inputs if slot.required and slot.name not in files]
    if missing:
        raise Problem(
            422, f"missing required file field(s) {', '.join(missing)}; attach them "
            f"(e.g. -F {missing[0]}=@file)", title="Missing input",
        )
    try:
        inflated = check_job_inputs(kind, files, params, limits, keep_inflated=True)
    except InputTooLarge as exc:
        raise Problem(413, exc.detail, title=exc.title) from None
    except InputError as exc:
        raise Problem(422, exc.detail, title=exc.title) from None
    for slot in inflated:
        files[slot].unlink()
    stored = {**files, **{slot: kept.path for slot, kept in inflated.items()}}
    return stored, {slot: kept.uploaded for slot, kept in inflated.items()}


def _list_as_text(field_schema: dict[str, Any]) -> dict[str, Any]:
    """A list parameter travels as one text field (``8,8,4``: a field sent twice is refused),
    not as the repeated parts an array means in a multipart body; say so, keep the items'
    schema under ``x-list``."""
    array = next(s for s in field_schema.get("anyOf", [field_schema]) if s.get("type") == "array")
    counts = [f"at least {array['minItems']}" if "minItems" in array else "",
              f"at most {array['maxItems']}" if "maxItems" in array else ""]
    count = " and ".join(c for c in counts if c)
    example = ",".join(map(str, field_schema["examples"][0])) if field_schema.get("examples") else ""
    note = f"comma-separated values{f' ({count})' if count else ''}{f', e.g. {example}' if example else ''}"
    described = f"{field_schema['description']}: {note}" if field_schema.get("description") else note
    return {"type": "string", "title": field_schema.get("title"), "description": described, "x-list": array}


def upload_form_schema(kind: JobKind) -> dict[str, Any]:
    """OpenAPI request body of ``POST /v1/jobs/{kind}``: the input slots as file fields, the
    parameters (from the kind's pydantic model) and ``label`` as text fields.

    A file field lists the file name endings it accepts in ``x-suffixes``, for clients such
    as the web page's file pickers, and in its description, for people."""
    params_schema = kind.params_model.model_json_schema()
    properties: dict[str, Any] = {
        slot.name: {
            "type": "string",
            "format": "binary",
            "description": (f"{slot.description}. " if slot.description else "")
            + f"A file ending in {' or '.join(slot.suffixes)}.",
            "x-suffixes": list(slot.suffixes),
        }
        for slot in kind.inputs
    }
    for name, field_schema in params_schema.get("properties", {}).items():
        properties[name] = _list_as_text(field_schema) if is_list_field(kind.params_model, name) else field_schema
    properties[_LABEL_FIELD] = {
        "type": "string",
        "maxLength": _MAX_LABEL_CHARS,
        "description": "Batch name; list a batch with GET /v1/jobs?label=...",
    }
    required = [slot.name for slot in kind.inputs if slot.required] + list(params_schema.get("required", []))
    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    if "$defs" in params_schema:
        schema["$defs"] = params_schema["$defs"]
    return {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": schema}}}}
