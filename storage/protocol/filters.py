"""What a listing is asked for: ``RunFilter`` (the filters), ``SortKey`` (a position in
listing order, newest first) and ``RunPage`` (which of the matching runs); ``EventsAfter``
and ``DeliveryListing``, the pages of the event log and of the webhook deliveries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..documents import SnapshotDocument, WebhookDeliveryStatus


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


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPage:
    """Which of the runs a listing matches it returns (``RunStore.list_runs``).

    Attributes:
        limit: At most this many runs; ``None`` for all.
        skip: Runs to skip first (``page * perPage``); not used with ``from_end``.
        after: Only runs strictly after this key in listing order.
        before: Only runs strictly before this key in listing order.
        from_end: Take the ``limit`` runs closest to the end of the range (Relay ``last``); the
            result is still newest first.
    """

    limit: int | None = None
    skip: int = 0
    after: SortKey | None = None
    before: SortKey | None = None
    from_end: bool = False


EVERY_RUN = RunPage()
"""The whole listing: no limit, no bound."""


def sort_key(doc: SnapshotDocument) -> SortKey:
    """The listing-order key of a stored run."""
    return SortKey(doc["createdAt"], doc["_id"])


@dataclass(frozen=True, slots=True, kw_only=True)
class EventsAfter:
    """A page of the event log (``EventLog.list_events_after``).

    Attributes:
        agent_id: Only this agent's events; ``None``: every agent's (the reviewers' queue).
        after_event_id: Exclusive lower bound on ``_id`` (compared as strings), or ``None``.
        limit: At most this many events; ask again after the last one for more.
        resource_ids: Access restriction as ``RunFilter.resource_ids``: only events whose
            ``resourceId`` is one of these (a subscriber's replay reads only what it may see).
        max_bytes: Also stop before the event that would make the events' ``event_size`` add up
            to more than this; the first event is returned whatever its size. ``None``: no bound.

    Raises:
        ValueError: ``limit`` or ``max_bytes`` is below 1.
    """

    agent_id: str | None
    after_event_id: str | None
    limit: int
    resource_ids: frozenset[str] | None = None
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ValueError(f"limit must be >= 1, got {self.limit}")
        if self.max_bytes is not None and self.max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {self.max_bytes}")


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryListing:
    """A page of webhook deliveries (``WebhookDeliveries.list_webhook_deliveries``).

    Attributes:
        status: Only deliveries in this status; ``None`` for all.
        resource_ids: Access restriction as ``RunFilter.resource_ids``: only deliveries about
            runs of these resources (``None``: no restriction).
        limit: At most this many.
        after: Only deliveries whose ``_id`` sorts strictly before this one (the next page).
    """

    status: WebhookDeliveryStatus | None
    resource_ids: frozenset[str] | None
    limit: int
    after: str | None = None


__all__ = ["EVERY_RUN", "DeliveryListing", "EventsAfter", "RunFilter", "RunPage", "SortKey", "sort_key"]
