"""A request id for every HTTP request and WebSocket (``X-Request-ID``), via asgi-correlation-id.

The id is the incoming ``X-Request-ID`` header when it is sane (1 to 128 characters among
letters, digits and ``. _ : - / + = @``), else a fresh uuid4 hex. It is returned in the
``X-Request-ID`` response header and set in a context variable for the request's task, so
every log line written while handling the request carries it (``server.observability.logs``).
"""

from __future__ import annotations

import re

from asgi_correlation_id import CorrelationIdMiddleware, correlation_id
from starlette.middleware import Middleware

HEADER = "X-Request-ID"
_SANE = re.compile(r"[A-Za-z0-9._:\-/+=@]{1,128}")


def is_sane(value: str) -> bool:
    """Whether a client's request id may be kept: short, printable, no spaces or quotes."""
    return _SANE.fullmatch(value) is not None


def current_request_id() -> str | None:
    """The id of the request being handled, or ``None`` outside a request."""
    return correlation_id.get()


def request_id_middleware() -> Middleware:
    """The Starlette middleware entry that assigns and returns request ids."""
    return Middleware(CorrelationIdMiddleware, header_name=HEADER, validator=is_sane)
