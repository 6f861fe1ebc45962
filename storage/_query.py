"""Helpers shared by the stores: time, ordering and keyset conditions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from .protocol import RunFilter, SortKey


def utcnow() -> datetime:
    """Now, aware UTC, truncated to milliseconds (BSON datetime precision)."""
    return to_bson_precision(datetime.now(UTC))


def to_bson_precision(value: datetime) -> datetime:
    """``value`` in UTC truncated to milliseconds, so both stores order and compare alike.

    Raises:
        ValueError: ``value`` is naive (runsgate never guesses a timezone).
    """
    if value.tzinfo is None:
        raise ValueError("datetime must be timezone-aware")
    value = value.astimezone(UTC)
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def normalized_filter(run_filter: RunFilter) -> RunFilter:
    """The filter with its dates at BSON precision (a bound below 1 ms cannot match more).

    A ``resource_id`` filter within ``resource_ids`` makes the restriction redundant (it is
    dropped, so the equality index serves the query); one outside them matches nothing
    (``resource_ids`` becomes empty).
    """
    allowed = run_filter.resource_ids
    if allowed is not None and run_filter.resource_id is not None:
        allowed = None if run_filter.resource_id in allowed else frozenset()
    return RunFilter(
        thread_id=run_filter.thread_id,
        resource_id=run_filter.resource_id,
        from_date=None if run_filter.from_date is None else _ceil_ms(run_filter.from_date),
        to_date=None if run_filter.to_date is None else to_bson_precision(run_filter.to_date),
        expires_before=None if run_filter.expires_before is None else _ceil_ms(run_filter.expires_before),
        resource_ids=allowed,
    )


def _ceil_ms(value: datetime) -> datetime:
    truncated = to_bson_precision(value)
    if truncated < value.astimezone(UTC):
        truncated += timedelta(milliseconds=1)
    return truncated


def is_after(key: SortKey, bound: SortKey) -> bool:
    """True when ``key`` comes strictly after ``bound`` in listing order (newest first)."""
    return (key.created_at, key.run_id) < (bound.created_at, bound.run_id)
