"""``EventLog``: the append-only audit log of runs, and ``event_list``, a write's ``event=`` as a
list."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

from ..documents import EventDocument


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

    async def list_events_after(
        self, agent_id: str, after_event_id: str | None, limit: int, *, resource_ids: frozenset[str] | None = None
    ) -> list[EventDocument]:
        """Events of ``agent_id`` whose ``_id`` sorts strictly after ``after_event_id``, in ``_id`` order.

        Event ids are time-ordered strings (``EventDocument._id``), so this is a keyset walk of the
        log in the order events were created, all runs of the agent together (the subscription
        feed polls it). ``None`` starts from the oldest event.

        Args:
            agent_id: Only this agent's events.
            after_event_id: Exclusive lower bound on ``_id`` (compared as strings), or ``None``.
            limit: At most this many events; ask again after the last one for more.
            resource_ids: Access restriction as ``RunFilter.resource_ids``: only events whose
                ``resourceId`` is one of these (a subscriber's replay reads only what it may see).

        Raises:
            ValueError: ``limit`` is below 1.
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


__all__ = ["EventLog", "event_list"]
