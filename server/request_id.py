"""Request ids: each HTTP request and WebSocket gets one, sent back in ``X-Request-Id`` and
written in every log line made while serving it (so a masked fault can be found in the log
from the id a client reports).

A client may send its own ``X-Request-Id`` (1 to 64 of ``A-Z a-z 0-9 . _ -``); anything else
is replaced by a fresh one, so a client cannot inject text into the logs.
"""

from __future__ import annotations

import logging
import re
import uuid
from contextvars import ContextVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = b"x-request-id"
_VALID = re.compile(rb"[A-Za-z0-9._-]{1,64}")
_current: ContextVar[str] = ContextVar("runsgate_request_id", default="-")


def current_request_id() -> str:
    """The id of the request being served, or ``-`` outside one."""
    return _current.get()


class RequestId:
    """ASGI middleware: picks the request's id, makes it current, and adds it to the response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        given = next((bytes(v) for k, v in scope.get("headers", []) if k.lower() == HEADER), b"")
        request_id = given.decode() if _VALID.fullmatch(given) else uuid.uuid4().hex
        token = _current.set(request_id)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (HEADER, request_id.encode())]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            _current.reset(token)


class RequestIdFilter(logging.Filter):
    """Gives every log record a ``request_id`` attribute (for ``%(request_id)s`` in the format)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = _current.get()
        return True


__all__ = ["RequestId", "RequestIdFilter", "current_request_id"]
