"""The web page: ``/`` (submit jobs, list them) and ``/jobs/{id}`` (one job).

The server sends a fixed HTML shell and a little vanilla JavaScript; everything the page
shows or does goes through the public ``/v1`` API from the browser, with the API key the
user typed (kept in ``sessionStorage``, sent as ``X-API-Key``), so the page adds no
privilege to the server. The submit forms are built in the browser from the app's own
``/openapi.json``, so a new job kind or parameter appears without page code.

A strict Content-Security-Policy (scripts and styles only from this origin, nothing
inline) backs up the page's rule of inserting API data as text, never as HTML.
"""

from __future__ import annotations

import functools
import html
from pathlib import Path
from string import Template

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse

from service.problems import Problem

__all__ = ["router"]

_HERE = Path(__file__).parent
_STATIC_TYPES = {
    "page.js": "text/javascript",
    "page.css": "text/css",
    "favicon.svg": "image/svg+xml",
}
_SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

router = APIRouter(include_in_schema=False)


@functools.cache
def _template(name: str) -> Template:
    return Template((_HERE / "templates" / name).read_text(encoding="utf-8"))


def _page(view: str, title: str, job_id: str = "") -> HTMLResponse:
    content = _template(f"{view}.html").substitute()
    body = _template("layout.html").substitute(
        title=html.escape(title), view=view, job_id=html.escape(job_id, quote=True), content=content
    )
    return HTMLResponse(body, headers={**_SECURITY_HEADERS, "Cache-Control": "no-cache"})


@router.get("/")
def index_page() -> HTMLResponse:
    return _page("index", "Jobs")


@router.get("/jobs/{job_id}")
def job_page(job_id: str) -> HTMLResponse:
    return _page("job", f"Job {job_id}", job_id)


@router.get("/static/{name}")
def static_file(name: str) -> FileResponse:
    if name not in _STATIC_TYPES:
        raise Problem(404, f"no static file {name!r}; the page's files are {', '.join(_STATIC_TYPES)}")
    return FileResponse(
        _HERE / "static" / name,
        media_type=_STATIC_TYPES[name],
        headers={**_SECURITY_HEADERS, "Cache-Control": "no-cache"},
    )
