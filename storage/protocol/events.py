"""``EventLog``: the append-only audit log of runs; ``event_list``, a write's ``event=`` as a
list; ``event_size``, what an event counts for in a page bounded in bytes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from .. import stored_json
from ..documents import EventDocument
from .filters import EventsAfter

EVENT_OVERHEAD_BYTES = 1024
"""What ``event_size`` adds to an event's strings: about what the rest of a decoded event (its
dict, id, type, date) holds in a Python process."""


def event_size(event: EventDocument) -> int:
    """About how many bytes ``event`` holds in a process: ``EVENT_OVERHEAD_BYTES``, plus its
    ``runId``, ``threadId``, ``resourceId`` and ``by``, plus its ``data`` as the stores write it
    (compact JSON, ``stored_json.dumps``), in characters. What ``list_events_after``'s
    ``max_bytes`` counts, and the event feed's bounds."""
    size = EVENT_OVERHEAD_BYTES
    for key in ("threadId", "resourceId", "runId", "by"):
        value = event.get(key)
        if isinstance(value, str):
            size += len(value)
    try:
        return size + len(stored_json.dumps(event.get("data")))
    except (TypeError, ValueError):  # not JSON (a store never returns such an event)
        return size + len(str(event.get("data")))


def within_bytes(events: Iterable[EventDocument], max_bytes: int | None) -> list[EventDocument]:
    """The first of ``events`` whose ``event_size`` add up to at most ``max_bytes``, and the first
    event whatever its size (``max_bytes`` ``None``: all of them). Stops reading ``events`` at
    the first one left out."""
    kept: list[EventDocument] = []
    total = 0
    for event in events:
        if max_bytes is not None:
            total += event_size(event)
            if kept and total > max_bytes:
                break
        kept.append(event)
    return kept


def event_list(event: EventDocument | Sequence[EventDocument] | None) -> list[EventDocument]:
    """A write's ``event=`` (one event, several written in order, or none) as a list."""
    if event is None:
        return []
    if isinstance(event, dict):
        return [event]
    return list(event)


class EventLog(Protocol):
    """The append-only audit log of runs (collection or table ``run_events``), kept after a run is
    deleted until its retention passed (``delete_run_events``); the source of the
    ``suspendedRunEvents`` subscription. Every method may raise ``StoreUnavailableError``."""

    async def append_event(self, event: EventDocument) -> None:
        """Append to the event log (collection ``run_events``); only its ``retentionFrom`` is ever
        updated, and the run's events deleted together."""

    async def list_events(self, agent_id: str, run_id: str) -> list[EventDocument]:
        """Events of one run, oldest first; kept after the snapshot is deleted."""
        ...

    async def list_events_of_runs(
        self, agent_id: str, run_ids: Sequence[str], *, resource_ids: frozenset[str] | None = None
    ) -> list[EventDocument]:
        """Events of several runs of ``agent_id`` in one query, oldest first (DataLoader batches).

        Args:
            resource_ids: Access restriction as ``RunFilter.resource_ids``: only events whose
                ``resourceId`` is one of these (events written without one never match).
        """
        ...

    async def list_events_after(self, query: EventsAfter) -> list[EventDocument]:
        """Events of ``query.agent_id`` (every agent's when ``None``) whose ``_id`` sorts strictly after
        ``query.after_event_id``, in ``_id`` order.

        Event ids are time-ordered strings (``EventDocument._id``), so this is a keyset walk of the
        log in the order events were created, all runs of the agent together (the subscription
        feed polls it). ``None`` starts from the oldest event. With ``query.max_bytes``, the store
        reads no more than it returns (a few events more at most), so a page bounded in bytes
        costs that many bytes whatever the events after it.
        """
        ...

    async def complete_pending_events(self, *, before: datetime, limit: int) -> int:
        """Finish the units of work a dead process left half done: append the events recorded
        inside snapshots (at or before ``before``) but not yet in the log, and finish what they
        record (a run whose ``completed`` event was pending is deleted). Only MongoDB-wire stores
        ever have any (SQLite and memory write both at once); the sweeper calls it.

        Returns:
            How many snapshots were completed (at most ``limit``).
        """
        ...

    async def list_expired_events(self, *, before: datetime, limit: int) -> list[tuple[str, str]]:
        """The runs with an event meeting ``rules.events_expired(before)`` (finished before
        ``before``, UTC), as ``(agentId, runId)`` pairs, oldest ``retentionFrom`` first, at most
        ``limit``, through an index whatever the size of the log.

        Raises:
            ValueError: ``limit`` is below 1.
        """
        ...

    async def postpone_event_retention(self, until: Mapping[tuple[str, str], datetime]) -> None:
        """For each ``(agentId, runId)`` → date (UTC) of ``until``, set ``retentionFrom`` to that
        date on every event of the run that has one, so the run is listed again once the date is a
        retention period old. One transaction on SQLite, one round trip on MongoDB (each event
        its own single-document update)."""

    async def delete_run_events(self, runs: Sequence[tuple[str, str]]) -> int:
        """Delete every event of the ``(agentId, runId)`` runs (the sweeper, once their retention
        passed): one transaction on SQLite, one round trip on MongoDB. Returns events deleted."""
        ...


__all__ = ["EVENT_OVERHEAD_BYTES", "EventLog", "event_list", "event_size", "within_bytes"]
