"""``X-Content-Type-Options: nosniff`` on every answer (JSON, problems, files, the page), so
a browser never runs a served file, or a JSON body that echoes the request, as another type."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["NoSniff"]

_HEADER = (b"x-content-type-options", b"nosniff")


class NoSniff:
    """ASGI middleware adding the header to each HTTP response that does not set it."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if all(name.lower() != _HEADER[0] for name, _ in headers):
                    message = {**message, "headers": [*headers, _HEADER]}
            await send(message)

        await self.app(scope, receive, send_with_header)
