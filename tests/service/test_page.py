"""The page's server side: a fixed shell with the job id escaped, strict security headers,
the page's own files only, and nothing added to the API's OpenAPI document."""

from __future__ import annotations

from pathlib import Path

import pytest

import service.page

pytestmark = pytest.mark.anyio

STATIC = Path(service.page.__file__).parent / "static"


async def test_shell_pages_escape_the_job_id_and_forbid_inline_script(client):
    hostile = '"><img src=x onerror=alert(1)>'
    response = await client.get(f"/jobs/{hostile}")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    assert hostile not in response.text
    assert 'data-job-id="&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"' in response.text
    assert "<img" not in response.text
    assert response.text.count("<script") == 1  # the page's own, from /static
    policy = response.headers["content-security-policy"]
    assert "script-src 'self';" in policy and "unsafe-inline" not in policy
    assert response.headers["x-content-type-options"] == "nosniff"
    index = await client.get("/")
    assert index.status_code == 200 and 'data-view="index"' in index.text


async def test_static_files_are_the_pages_own(client):
    script = await client.get("/static/page.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    assert script.content == (STATIC / "page.js").read_bytes()
    for name in ("../__init__.py", "nope.js"):
        missing = await client.get(f"/static/{name}")
        assert missing.status_code == 404 and missing.headers["content-type"] == "application/problem+json"


async def test_the_page_adds_no_api_routes(client):
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert not [p for p in paths if not p.startswith(("/v1/", "/healthz", "/readyz"))]
