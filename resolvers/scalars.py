"""Custom scalars: ``DateTime`` (RFC 3339 with offset, UTC out; mapped from ``datetime`` through
``StrawberryConfig.scalar_map``) and ``JSON``."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import strawberry
from strawberry.scalars import JSON


def serialize_datetime(value: datetime) -> str:
    """RFC 3339 in UTC with millisecond precision, e.g. ``2026-11-29T22:28:04.123Z``."""
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})?")
"""RFC 3339 ``date-time`` (offset checked apart, for a clearer message); ``fromisoformat`` alone is
more lenient (other ISO 8601 forms, stray characters)."""


def parse_datetime(value: Any) -> datetime:
    """Parse an RFC 3339 date-time that carries an offset; return it in UTC.

    Raises:
        ValueError: Not a string, not a date-time, or no offset (a naive time is ambiguous).
    """
    if not isinstance(value, str):
        raise ValueError("DateTime must be an RFC 3339 string such as 2026-01-31T09:00:00Z")
    if not _RFC3339.fullmatch(value):
        raise ValueError(f"DateTime {value!r} is not RFC 3339 (e.g. 2026-01-31T09:00:00Z)")
    try:
        parsed = datetime.fromisoformat(value.upper())  # RFC 3339 allows t and z
    except ValueError:
        raise ValueError(f"DateTime {value!r} is not RFC 3339 (e.g. 2026-01-31T09:00:00Z)") from None
    if parsed.tzinfo is None:
        raise ValueError(f"DateTime {value!r} has no UTC offset; add Z or +hh:mm")
    return parsed.astimezone(UTC)


DateTime = strawberry.scalar(
    name="DateTime",
    description="An RFC 3339 date-time with a UTC offset; runsgate returns UTC (`Z`).",
    serialize=serialize_datetime,
    parse_value=parse_datetime,
    specified_by_url="https://datatracker.ietf.org/doc/html/rfc3339#section-5.6",
)

__all__ = ["JSON", "DateTime", "parse_datetime", "serialize_datetime"]
