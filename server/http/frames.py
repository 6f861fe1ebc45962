"""No page of runsgate may be framed (SECURITY.md): clickjacking, and a page of another site
reading what a person sees through a frame.

``NoFraming`` adds ``X-Frame-Options: DENY`` to every HTML response, and
``Content-Security-Policy: frame-ancestors 'none'`` to one that has no policy of its own (the
inbox's policy already says it). The GraphiQL page is the one it covers today; a new HTML page
is covered without doing anything.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class NoFraming:
    """ASGI middleware: the framing headers on every ``text/html`` response (module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def framed(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if headers.get("content-type", "").startswith("text/html"):
                    headers["x-frame-options"] = "DENY"
                    if "content-security-policy" not in headers:
                        headers["content-security-policy"] = "frame-ancestors 'none'"
            await send(message)

        await self.app(scope, receive, framed)


__all__ = ["NoFraming"]
