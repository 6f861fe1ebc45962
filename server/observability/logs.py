"""Log lines: JSON objects (python-json-logger) or text, each carrying the request id.

``configure_logging`` installs one stderr handler on the root logger, which uvicorn's loggers
reach too. A JSON line has ``time`` (UTC), ``level``, ``logger``, ``message``, ``request_id``,
extras and ``exc_info``; a line is cut at ``MAX_MESSAGE_CHARS``, credentials in access lines are
``REDACTED``, and text lines escape control characters. Details: docs/operations.md.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Literal
from urllib.parse import parse_qsl, urlencode

from asgi_correlation_id import CorrelationIdFilter
from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

LogFormat = Literal["auto", "json", "text"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(correlation_id)s] %(message)s"
"""The ``text`` format: one human-readable line, with the request id in brackets."""

_JSON_FIELDS = ["levelname", "name", "message", "correlation_id"]
_JSON_RENAMES = {"levelname": "level", "name": "logger", "correlation_id": "request_id"}
_NOT_EXTRAS = [*RESERVED_ATTRS, "taskName", "color_message"]
"""Record attributes that are not extras: the standard ones, and uvicorn's coloured copy of the message."""


CREDENTIAL_PARAMETERS = frozenset(
    {"access_token", "id_token", "token", "api_key", "apikey", "api-key", "authorization", "auth", "jwt", "bearer"}
)
"""Query parameters that carry a credential (compared lowercased): refused by the server
(credentials travel only in the ``Authorization`` header or ``connection_init``), and never logged."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")

MAX_MESSAGE_CHARS = 4096
"""Characters of a log message (and of an access line's path) kept; the rest is cut, saying how much."""


def bounded(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text``, or its first ``limit`` characters and how many were cut."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters cut)"


class BoundedMessages(logging.Filter):
    """Cut every record's message (and an access record's ``path``) to ``MAX_MESSAGE_CHARS``; the
    traceback of a fault is kept whole (it is the server's, not a client's)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if len(message) > MAX_MESSAGE_CHARS:
            record.msg, record.args = bounded(message), None
        path = getattr(record, "path", None)
        if isinstance(path, str) and len(path) > MAX_MESSAGE_CHARS:
            record.path = bounded(path)
        return True


def has_credential_parameter(query_string: str) -> str | None:
    """The first parameter of ``query_string`` (undecoded) named in ``CREDENTIAL_PARAMETERS``, or None."""
    for name, _ in parse_qsl(query_string, keep_blank_values=True):
        if name.lower() in CREDENTIAL_PARAMETERS:
            return name
    return None


def redact_path(path: str) -> str:
    """``path`` with the value of every credential parameter of its query string replaced by ``REDACTED``."""
    base, sep, query = path.partition("?")
    if not sep or has_credential_parameter(query) is None:
        return path
    pairs = parse_qsl(query, keep_blank_values=True)
    return base + "?" + urlencode([(k, "REDACTED" if k.lower() in CREDENTIAL_PARAMETERS else v) for k, v in pairs])


def escape_controls(text: str) -> str:
    """``text`` with control characters (newlines included) written as Python escapes."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


class AccessFields(logging.Filter):
    """Give uvicorn's access records their parts as fields: ``client``, ``method``, ``path``,
    ``status``; a credential in the path's query string is ``REDACTED``."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "uvicorn.access" and isinstance(record.args, tuple) and len(record.args) == 5:
            client, method, path, version, status = record.args
            if isinstance(path, str):
                path = redact_path(path)
                record.args = (client, method, path, version, status)
            record.client, record.method, record.path, record.status = client, method, path, status
        return True


class EscapingFormatter(logging.Formatter):
    """``logging.Formatter`` whose messages have their control characters escaped (one record, one line
    before its traceback)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape_controls(record.message)
        return super().formatMessage(record)


def resolve_format(log_format: LogFormat, stream: object = None) -> Literal["json", "text"]:
    """``auto`` is ``text`` when ``stream`` (default stderr) is a terminal, else ``json``."""
    if log_format != "auto":
        return log_format
    isatty = getattr(stream if stream is not None else sys.stderr, "isatty", None)
    return "text" if callable(isatty) and isatty() else "json"


def make_formatter(log_format: Literal["json", "text"]) -> logging.Formatter:
    """The formatter of one format: python-json-logger's ``JsonFormatter``, or ``TEXT_FORMAT``."""
    if log_format == "json":
        return JsonFormatter(
            _JSON_FIELDS,
            rename_fields=_JSON_RENAMES,
            reserved_attrs=_NOT_EXTRAS,
            timestamp="time",
        )
    return EscapingFormatter(TEXT_FORMAT)


def configure_logging(level: str, log_format: LogFormat) -> None:
    """Replace the root logger's handlers with one stderr handler in ``log_format``, at ``level``.

    httpx2, which sends webhooks, logs every request's URL at INFO; its logger is kept at WARNING
    unless ``level`` is ``DEBUG``, so receivers' URLs (whose query strings may hold tokens) stay
    out of the logs (docs/webhooks.md).

    Args:
        level: A ``logging`` level name (``DEBUG``, ``INFO``, ``WARNING`` ...).
        log_format: ``json``, ``text`` or ``auto`` (see ``resolve_format``).
    """
    chosen = resolve_format(log_format, sys.stderr)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(make_formatter(chosen))
    handler.addFilter(CorrelationIdFilter(default_value="-" if chosen == "text" else None))
    handler.addFilter(AccessFields())
    handler.addFilter(BoundedMessages())  # after AccessFields, which reads the access record's arguments
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("httpx2").setLevel(logging.DEBUG if level.upper() == "DEBUG" else logging.WARNING)
