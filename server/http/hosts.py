"""With authentication off, only this machine's own names are answered (SECURITY.md).

``LoopbackHostsOnly``: the ``Host`` (and a browser's ``Origin``) must name ``localhost``,
``127.0.0.1`` or ``[::1]`` (any port) or one of ``RUNSGATE_ALLOWED_HOSTS``; anything else gets a
400 over HTTP, a refused WebSocket handshake (403). Why (DNS rebinding): SECURITY.md.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Final
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from .http_errors import refusal

logger = logging.getLogger("runsgate.auth")

LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "[::1]"})
"""The host names answered with authentication off, whatever the port."""

_HOST = re.compile(r"^(?P<name>[a-z0-9.\-_]+|\[[0-9a-f:.]+\])(?::(?P<port>\d{1,5}))?$")
"""A ``Host`` header: a name, an IPv4 address or a bracketed IPv6 address, then maybe a port."""


def host_name(host: str | None) -> str | None:
    """The name of a ``Host`` header value without its port, lowercased (``[::1]`` keeps its
    brackets), or ``None`` when the value is missing or not a host."""
    if host is None:
        return None
    found = _HOST.match(host.strip().lower())
    return None if found is None else found["name"]


def allowed_name(name: str) -> str:
    """A name of ``RUNSGATE_ALLOWED_HOSTS`` as ``host_name`` returns it (an IPv6 address gets
    brackets).

    Raises:
        ValueError: ``name`` is not a host name or address (a port, a scheme or a path given).
    """
    candidate = name.strip().lower()
    if ":" in candidate and not candidate.startswith("["):
        candidate = f"[{candidate}]"
    if host_name(candidate) != candidate:
        raise ValueError(f"{name!r} is not a host name (give the name alone: no scheme, port or path)")
    return candidate


def origin_name(origin: str) -> str | None:
    """The host name of an ``Origin`` header as ``host_name`` writes it, or ``None`` (``null``, a
    value that is not an origin)."""
    try:
        parts = urlsplit(origin.strip())
        hostname = parts.hostname
    except ValueError:
        return None
    if not parts.scheme or not hostname:
        return None
    return f"[{hostname}]" if ":" in hostname else hostname.lower()


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


class LoopbackHostsOnly:
    """ASGI middleware: refuse a request whose ``Host`` (or ``Origin``) names a host other than
    ``names`` (module docstring). Installed by ``server.app.create_app`` when authentication is off.
    """

    def __init__(self, app: ASGIApp, *, extra_names: Iterable[str] = ()) -> None:
        self.app = app
        self.names = LOOPBACK_NAMES | frozenset(extra_names)
        self._message = (
            "authentication is off, so this server answers only requests for "
            + ", ".join(sorted(self.names))
            + " (a page on another site can reach it under its own name, by DNS rebinding); add the name "
            "a local proxy uses to RUNSGATE_ALLOWED_HOSTS, or turn authentication on"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = _header(scope, b"host")
        origin = _header(scope, b"origin")
        if host_name(host) in self.names and (origin is None or origin_name(origin) in self.names):
            await self.app(scope, receive, send)
            return
        logger.info("request refused: authentication is off and it names host %r (origin %r)", host, origin)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": ""})  # before accepting: a 403
            return
        await refusal(self._message)(scope, receive, send)


__all__ = ["LOOPBACK_NAMES", "LoopbackHostsOnly", "allowed_name", "host_name", "origin_name"]
