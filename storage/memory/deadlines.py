"""The memory store's deadline index: ``(expiresAt, runId)`` of every run with a deadline, sorted,
all together (the sweeper's expiry pass) and per agent (the ``expiresBefore`` filter)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from sortedcontainers import SortedList

from ..documents import SnapshotDocument


class DeadlineIndex:
    """Run ids by deadline; ``set_deadline`` and ``drop`` cost O(log n), a walk O(log n + found)."""

    def __init__(self) -> None:
        self._expiring = SortedList()
        """``(expiresAt, runId)`` of every run with a deadline: the sweeper's expiry pass reads
        only the expired front of it (``list_expired_runs``; SQLite and MongoDB: an index)."""
        self._expiring_by_agent: dict[str, SortedList] = {}
        """agentId -> ``(expiresAt, runId)`` of its runs with a deadline (the ``expiresBefore`` filter)."""

    def set_deadline(self, doc: SnapshotDocument, deadline: datetime | None) -> None:
        """Set ``doc["expiresAt"]`` to ``deadline`` (the earliest of its pending calls',
        ``rules.earliest_deadline``; ``None``: removed) and re-index it."""
        self.drop(doc)
        doc.pop("expiresAt", None)
        if deadline is not None:
            doc["expiresAt"] = deadline
            key = (deadline, doc["_id"])
            self._expiring.add(key)
            by_agent = self._expiring_by_agent.get(doc["agentId"])
            if by_agent is None:
                by_agent = self._expiring_by_agent[doc["agentId"]] = SortedList()
            by_agent.add(key)

    def drop(self, doc: SnapshotDocument) -> None:
        """Forget ``doc``'s deadline (its ``expiresAt`` as indexed); nothing when it has none."""
        deadline = doc.get("expiresAt")
        if deadline is None:
            return
        key = (deadline, doc["_id"])
        self._expiring.discard(key)
        by_agent = self._expiring_by_agent.get(doc["agentId"])
        if by_agent is not None:
            by_agent.discard(key)
            if not by_agent:
                del self._expiring_by_agent[doc["agentId"]]

    def due(self, now: datetime) -> Iterator[str]:
        """Ids of the runs, of any agent, whose deadline is at or before ``now`` (UTC), earliest first."""
        for _, run_id in self._expiring.irange(maximum=(now, chr(0x10FFFF)), inclusive=(True, True)):
            yield run_id

    def of_agent_before(self, agent_id: str, bound: datetime) -> Iterator[str]:
        """Ids of ``agent_id``'s runs whose deadline is before ``bound`` (UTC), earliest first."""
        deadlines = self._expiring_by_agent.get(agent_id)
        if deadlines is None:
            return
        for _, run_id in deadlines.irange(maximum=(bound,), inclusive=(True, False)):
            yield run_id


__all__ = ["DeadlineIndex"]
