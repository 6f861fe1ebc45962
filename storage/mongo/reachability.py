"""Whether a MongoDB server answers: ``reachable`` turns its failures into
``StoreUnavailableError``, ``check_reachable`` pings it before start-up, and ``store_address``
names it without credentials (docs/storage.md "Unavailable store")."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pymongo import MongoClient
from pymongo.errors import ConfigurationError, ConnectionFailure, OperationFailure

from ..protocol import StoreUnavailableError
from ..url_credentials import after_credentials

UNAVAILABLE_CODES = frozenset({1, 6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436})
"""Server error codes that mean "not now" rather than "not this request": InternalError (1), which
FerretDB 2 answers while it cannot reach its PostgreSQL, and those MongoDB's retryable-writes
specification retries (network errors, shutdown, primary changes) that PyMongo does not already
raise as a ``ConnectionFailure``."""


def dns_failed(exc: ConfigurationError) -> bool:
    """Whether PyMongo's ``ConfigurationError`` is a failed DNS lookup of a ``mongodb+srv://``
    URI's records (its cause a dnspython error: no such name, a timeout, no nameserver), which
    is the store being unreachable, not a URI PyMongo refuses."""
    cause = exc.__cause__  # dnspython's, which PyMongo imports for SRV lookups: not imported here
    return cause is not None and any(kind.__module__.startswith("dns.") for kind in type(cause).__mro__)


@asynccontextmanager
async def reachable() -> AsyncIterator[None]:
    """Turn connection failures (an answer that did not come within the socket timeout among
    them), a failed DNS lookup of a ``mongodb+srv://`` URI, and server errors of
    ``UNAVAILABLE_CODES`` into ``StoreUnavailableError`` (no internals leak upward)."""
    try:
        yield
    except ConnectionFailure as exc:
        raise StoreUnavailableError(f"MongoDB is unreachable: {type(exc).__name__}") from exc
    except ConfigurationError as exc:
        if not dns_failed(exc):
            raise
        raise StoreUnavailableError(f"MongoDB is unreachable: its DNS records could not be read ({exc})") from exc
    except OperationFailure as exc:
        if exc.code not in UNAVAILABLE_CODES:
            raise
        raise StoreUnavailableError(f"MongoDB could not serve the request now (error {exc.code})") from exc


def store_address(uri: str) -> str:
    """The hosts a MongoDB URI names, as ``host:port`` (comma-separated; 27017 when a
    ``mongodb://`` host has no port), without the credentials, database or options."""
    scheme = uri.partition("://")[0]
    hosts = after_credentials(uri).split("?", 1)[0].split("/", 1)[0]  # the credentials end at the last `@`
    if scheme != "mongodb":
        return hosts
    return ",".join(host if re.search(r":\d+$", host) else f"{host}:27017" for host in hosts.split(","))


def check_reachable(uri: str, timeout: float) -> None:
    """Ping the server(s) of ``uri`` with a synchronous client, waiting at most ``timeout`` seconds
    for one to answer; for a start-up check, before the server's event loop runs.

    Raises:
        StoreUnavailableError: No server answered, or the ping was refused (e.g. bad
            credentials); the message is a short reason (``Connection refused``, ``no answer
            within 1.0 s``, the server's error message, a ``mongodb+srv://`` URI's DNS records
            that could not be read), never the URI.
        ValueError: PyMongo refuses the URI itself (e.g. ``Bad database name``).
    """
    try:
        client: MongoClient[dict[str, Any]] = MongoClient(
            uri, serverSelectionTimeoutMS=max(1, int(timeout * 1000)), appname="runsgate"
        )
        with client:
            client.admin.command("ping")
    except ConnectionFailure as exc:
        found = re.search(r"\[Errno (-?\d+)\] ([^(,]*)", str(exc))
        if found is None:
            reason = f"no answer within {timeout:g} s"
        elif int(found[1]) > 0:
            reason = os.strerror(int(found[1]))
        else:
            reason = found[2].strip()
        raise StoreUnavailableError(reason) from exc
    except OperationFailure as exc:
        raise StoreUnavailableError(str((exc.details or {}).get("errmsg") or f"error {exc.code}")) from exc
    except ConfigurationError as exc:
        if dns_failed(exc):
            raise StoreUnavailableError(f"its DNS records could not be read ({exc})") from exc
        raise ValueError(str(exc)) from None


__all__ = ["UNAVAILABLE_CODES", "check_reachable", "dns_failed", "reachable", "store_address"]
