"""HEAD on every GET route (RFC 9110 §9.3.2): the GET's status and headers, no body.

FastAPI routes answer only the methods they declare, so HEAD on a GET route was 405 while
the 405's ``Allow`` named it. A route that declares HEAD itself (a result file: its size and
ETag without reading it) answers it; any other HEAD is sent on as a GET whose body is
dropped, and a path that takes neither keeps HEAD's own 405.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["HeadFromGet"]


class HeadFromGet:
    """ASGI middleware: HEAD answered by the route's HEAD, else by its GET without the body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        refusal: list[Message] = []

        async def as_head(message: Message) -> None:
            if refusal or (message["type"] == "http.response.start" and message["status"] == 405):
                refusal.append(message)  # held: GET may be allowed where HEAD is not
            else:
                await send(message)

        await self.app(scope, receive, as_head)
        if not refusal:
            return
        answered = False

        async def headers_only(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.start":
                answered = message["status"] != 405
                if answered:
                    await send(message)
            elif answered and not message.get("more_body", False):
                await send({"type": "http.response.body", "body": b""})

        await self.app({**scope, "method": "GET"}, receive, headers_only)
        if not answered:  # neither HEAD nor GET: HEAD's own 405, naming the path's methods
            for message in refusal:
                await send(message)
