"""What a listing is asked for: ``RunFilter`` (the filters) and ``SortKey`` (a position in
listing order, newest first)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..documents import SnapshotDocument


@dataclass(frozen=True, kw_only=True)
class RunFilter:
    """Listing filters (as Mastra's ``listSuspendedRuns()``); both date bounds are inclusive, on ``createdAt``."""

    thread_id: str | None = None
    resource_id: str | None = None
    from_date: datetime | None = None
    """UTC; runs created at or after it."""
    to_date: datetime | None = None
    """UTC; runs created at or before it."""
    expires_before: datetime | None = None
    """UTC; runs whose ``expiresAt`` (earliest deadline of a pending call) is before it; runs
    without a deadline never match."""
    resource_ids: frozenset[str] | None = None
    """Access restriction, not a client's filter: only runs whose ``resourceId`` is one of these
    (runs without one never match); ``None`` for no restriction. Applied inside the query, so
    pages and counts only ever see the allowed runs."""


@dataclass(frozen=True)
class SortKey:
    """Position of a run in listing order (``createdAt`` descending, then runId descending)."""

    created_at: datetime
    run_id: str


def sort_key(doc: SnapshotDocument) -> SortKey:
    """The listing-order key of a stored run."""
    return SortKey(doc["createdAt"], doc["_id"])


__all__ = ["RunFilter", "SortKey", "sort_key"]
