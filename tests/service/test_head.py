"""HeadFromGet on a small app: a route's own HEAD, a GET's headers without its body (a
streamed one too), and HEAD's own 405 where the path takes neither."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI, Response
from fastapi.responses import StreamingResponse

from service.head import HeadFromGet

pytestmark = pytest.mark.anyio


@pytest.fixture
def client():
    app = FastAPI()
    app.add_middleware(HeadFromGet)

    @app.get("/text")
    def text() -> Response:
        return Response("twelve bytes", media_type="text/plain", headers={"ETag": '"t"'})

    @app.head("/file")
    def file_head() -> Response:
        return Response(headers={"Content-Length": "7", "X-Own": "head"})

    @app.get("/file")
    def file_get() -> Response:
        return Response("content", headers={"X-Own": "get"})

    @app.get("/stream")
    def stream() -> StreamingResponse:
        return StreamingResponse(iter([b"a" * 10, b"b" * 10]), media_type="application/zip")

    @app.post("/only-post")
    def only_post() -> dict:
        return {}

    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


async def test_head_is_get_without_its_body(client):
    async with client:
        get, head = await client.get("/text"), await client.head("/text")
        assert (head.status_code, head.content, head.headers["etag"], head.headers["content-length"]) == (
            200, b"", '"t"', "12") and get.content == b"twelve bytes"
        head = await client.head("/stream")
        assert (head.status_code, head.content, head.headers["content-type"]) == (200, b"", "application/zip")
        # a route's own HEAD answers it
        head = await client.head("/file")
        assert (head.status_code, head.headers["x-own"], head.content) == (200, "head", b"")


async def test_a_path_without_get_keeps_heads_own_405(client):
    async with client:
        head = await client.head("/only-post")
        assert head.status_code == 405 and head.headers["allow"] == "POST"
        assert (await client.head("/missing")).status_code == 404
