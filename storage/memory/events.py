"""The memory store's ``EventLog``: each run's events in append order, and each agent's (and every
agent's) sorted by ``_id`` (creation order) for the subscription feed's keyset walk."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from datetime import datetime

from sortedcontainers import SortedKeyList, SortedList

from .. import rules
from ..documents import EventDocument
from ..protocol.events import within_bytes
from ..protocol.filters import EventsAfter
from .copying import copied


def _event_id(event: EventDocument) -> str:
    return event["_id"]


class MemoryEventLog:
    """``EventLog`` in process; the other parts append a write's events with ``_append``."""

    def __init__(self) -> None:
        super().__init__()
        self._events: dict[tuple[str, str], list[EventDocument]] = {}
        """(agentId, runId) -> the run's events, in append order."""
        self._agent_events: dict[str, SortedKeyList] = {}
        """agentId -> its events sorted by ``_id`` (creation order), for ``list_events_after``."""
        self._all_events: SortedKeyList = SortedKeyList(key=_event_id)
        """Every agent's events sorted by ``_id``, for ``list_events_after`` of every agent."""
        self._retention: SortedList = SortedList()
        """``(retentionFrom, agentId, runId, _id)`` of each event with a ``retentionFrom``, oldest first."""

    async def append_event(self, event: EventDocument) -> None:
        self._append([copied(event)])

    def _append(self, events: Sequence[EventDocument]) -> None:
        """Keep ``events``, in order, as they are (the caller's copies, made at the store's boundary)
        without awaiting: after a state change, in the same step of the event loop, so the two form
        one unit of work."""
        for event in events:
            agent_id, run_id = event["agentId"], event["runId"]
            self._events.setdefault((agent_id, run_id), []).append(event)
            by_agent = self._agent_events.get(agent_id)
            if by_agent is None:
                by_agent = self._agent_events[agent_id] = SortedKeyList(key=_event_id)
            by_agent.add(event)
            self._all_events.add(event)
            if "retentionFrom" in event:
                self._retention.add((event["retentionFrom"], agent_id, run_id, event["_id"]))

    async def complete_pending_events(self, *, before: datetime, limit: int) -> int:
        """Nothing is ever pending: a change and its event are written at once."""
        return 0

    async def list_expired_events(self, *, before: datetime, limit: int) -> list[tuple[str, str]]:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        expired = rules.events_expired(before)
        runs: dict[tuple[str, str], None] = {}
        for _, agent_id, run_id, event_id in self._retention:
            event = next(e for e in self._events[(agent_id, run_id)] if e["_id"] == event_id)
            if not rules.matches(expired, event):
                break  # sorted by retentionFrom: no later one is expired either
            runs[(agent_id, run_id)] = None
            if len(runs) == limit:
                break
        return list(runs)

    async def postpone_event_retention(self, until: Mapping[tuple[str, str], datetime]) -> None:
        for (agent_id, run_id), date in until.items():
            for event in self._events.get((agent_id, run_id), []):
                if "retentionFrom" in event:
                    self._retention.remove((event["retentionFrom"], agent_id, run_id, event["_id"]))
                    event["retentionFrom"] = date
                    self._retention.add((date, agent_id, run_id, event["_id"]))

    async def delete_run_events(self, runs: Sequence[tuple[str, str]]) -> int:
        deleted = 0
        for agent_id, run_id in dict.fromkeys(runs):
            events = self._events.pop((agent_id, run_id), [])
            by_agent = self._agent_events.get(agent_id)
            for event in events:
                if by_agent is not None:
                    by_agent.remove(event)
                self._all_events.remove(event)
                if "retentionFrom" in event:
                    self._retention.discard((event["retentionFrom"], agent_id, run_id, event["_id"]))
            deleted += len(events)
        return deleted

    async def list_events(self, agent_id: str, run_id: str) -> list[EventDocument]:
        return await self.list_events_of_runs(agent_id, [run_id])

    async def list_events_of_runs(
        self, agent_id: str, run_ids: Sequence[str], *, resource_ids: frozenset[str] | None = None
    ) -> list[EventDocument]:
        events = [
            e
            for run_id in dict.fromkeys(run_ids)
            for e in self._events.get((agent_id, run_id), [])
            if resource_ids is None or e.get("resourceId") in resource_ids
        ]
        return copied(sorted(events, key=lambda e: (e["at"], e["_id"])))

    async def list_events_after(self, query: EventsAfter) -> list[EventDocument]:
        agent_id, after_event_id, limit = query.agent_id, query.after_event_id, query.limit
        resource_ids, max_bytes = query.resource_ids, query.max_bytes
        events = self._all_events if agent_id is None else self._agent_events.get(agent_id)
        if events is None:
            return []
        found = events.irange_key(min_key=after_event_id, inclusive=(False, True)) if after_event_id else iter(events)
        if resource_ids is not None:
            found = (e for e in found if e.get("resourceId") in resource_ids)
        return [copied(e) for e in within_bytes(itertools.islice(found, limit), max_bytes)]


__all__ = ["MemoryEventLog"]
