"""Errors as RFC 9457 ``application/problem+json``: every error says what is wrong and how
to fix it, in ``detail``."""

from __future__ import annotations

import errno
import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

__all__ = ["PROBLEM_JSON", "Problem", "problem_response", "install_problem_handlers", "PROBLEM_RESPONSES", "echo"]

logger = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
_HTTP_METHODS = frozenset({"get", "put", "post", "delete", "options", "head", "patch", "trace"})
# The most characters of a request's own text (a path, an id) an answer repeats.
_ECHO_CHARS = 200

_PROBLEM_SCHEMA = {
    "type": "object",
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "instance": {"type": "string"},
        "errors": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["title", "status", "detail"],
}


def _problem_doc(description: str) -> dict[str, Any]:
    return {"description": description, "content": {PROBLEM_JSON: {"schema": _PROBLEM_SCHEMA}}}


#: OpenAPI ``responses`` entries for the errors routes return.
PROBLEM_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: _problem_doc("Malformed request body"),
    401: _problem_doc("Missing or unknown API key"),
    404: _problem_doc("No such job (or not yours)"),
    408: _problem_doc("The upload stalled (sent nothing for FIBERTENSOR_UPLOAD_IDLE_TIMEOUT)"),
    409: _problem_doc("The job is not in a state that allows this"),
    413: _problem_doc("Upload larger than the limit, or the job needs more memory than allowed"),
    415: _problem_doc("Not a multipart/form-data request"),
    416: _problem_doc("The Range starts past the end of the file"),
    422: _problem_doc("Invalid input files or parameters"),
    429: _problem_doc("Too many uploads of this tenant at once; see Retry-After"),
    503: _problem_doc("Queue, worker or upload capacity unavailable; see Retry-After where given"),
    507: _problem_doc("The service's disk is full"),
}

_TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    408: "Request timeout",
    409: "Conflict",
    413: "Upload too large",
    415: "Unsupported media type",
    416: "Range not satisfiable",
    422: "Invalid request",
    429: "Too many requests",
    500: "Internal server error",
    503: "Service unavailable",
    507: "Insufficient storage",
}


def echo(text: str, *, quoted: bool = True) -> str:
    """Text from the request as an answer repeats it: cut to 200 characters (saying how long
    it was), quoted as ``repr`` unless ``quoted`` is false."""
    text = str(text)
    cut = text if len(text) <= _ECHO_CHARS else text[:_ECHO_CHARS]
    shown = repr(cut) if quoted else cut
    return shown if cut is text else f"{shown}… ({len(text)} characters)"


class Problem(Exception):
    """Raise in a route to answer with a problem document."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        title: str | None = None,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ):
        super().__init__(detail)
        self.status = status
        self.title = title or _TITLES.get(status, "Error")
        self.detail = detail
        self.headers = headers
        self.extra = extra


def problem_response(
    status: int,
    title: str,
    detail: str,
    *,
    instance: str | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    body: dict[str, Any] = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    if instance:
        body["instance"] = instance if len(instance) <= _ECHO_CHARS else instance[:_ECHO_CHARS]
    body.update(extra)
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_JSON)


def _field_path(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc if part not in ("body", "query", "path", "header"))


def _allowed_methods(request: Request) -> list[str]:
    """The documented methods of this path, from the OpenAPI document (Starlette's ``Allow``
    names only the first route that matched, while GET and DELETE of a job are two routes).
    A literal path (``/v1/jobs/peaks``) wins over templates that would match it, as in routing."""
    paths = request.app.openapi().get("paths", {})
    path = request.url.path
    matching = [paths[path]] if path in paths else [
        operations for template, operations in paths.items()
        if re.fullmatch("[^/]+".join(re.escape(part) for part in re.split(r"\{[^/}]+\}", template)), path)
    ]
    methods = {method.upper() for operations in matching for method in operations if method in _HTTP_METHODS}
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        # one line, no server folder: a detail may repeat an error about an uploaded file
        detail = request.app.state.store.user_text(exc.detail)
        return problem_response(
            exc.status, exc.title, detail, instance=request.url.path, headers=exc.headers, **exc.extra
        )

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"field": _field_path(tuple(err.get("loc", ()))), "message": err.get("msg", "")}
            for err in exc.errors()
        ]
        detail = "; ".join(f"{e['field'] or 'request'}: {e['message']}" for e in errors)
        return problem_response(
            422, "Invalid request", f"{detail}. Fix these values and send the request again.",
            instance=request.url.path, errors=errors,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        status = exc.status_code
        if status == 404:
            detail = f"there is no route {echo(request.url.path, quoted=False)}; the API is under /v1 (see /docs)"
        elif status == 405:
            allowed = _allowed_methods(request)
            detail = f"{request.method} is not allowed on {echo(request.url.path, quoted=False)}; use {', '.join(allowed)}"
            headers = {"Allow": ", ".join(allowed)}
        else:
            detail = str(exc.detail)
        return problem_response(
            status, _TITLES.get(status, "Error"), detail, instance=request.url.path,
            headers=headers if status == 405 else getattr(exc, "headers", None),
        )

    @app.exception_handler(ClientDisconnect)
    async def _disconnected(request: Request, exc: ClientDisconnect) -> JSONResponse:
        # the client's doing, not a fault: one line, no traceback; nobody reads the answer
        logger.warning("client disconnected during %s %s; its upload was discarded", request.method, request.url.path)
        return problem_response(
            400, "Client disconnected", "the request body was cut off; send it again", instance=request.url.path
        )

    @app.exception_handler(OSError)
    async def _os_error(request: Request, exc: OSError) -> JSONResponse:
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            logger.warning("out of file handles during %s %s: %s", request.method, request.url.path, exc)
            return problem_response(
                503, "Service unavailable",
                "the service has too many files and connections open to take this request now; "
                "nothing was kept, send it again in a moment.",
                instance=request.url.path, headers={"Retry-After": "10", "Connection": "close"},
            )
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            return await _unexpected(request, exc)
        logger.warning("data volume full during %s %s: %s", request.method, request.url.path, exc)
        return problem_response(
            507, "Insufficient storage",
            "the service's disk is full, so this request could not be stored; nothing was kept. "
            "Try again later, and tell the operator to free space on FIBERTENSOR_DATA_DIR.",
            instance=request.url.path,
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem_response(
            500, "Internal server error",
            f"the server failed on this request ({type(exc).__name__}); this is a fault of the "
            "service, please report it with the time of the request",
            instance=request.url.path,
        )
