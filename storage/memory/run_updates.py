"""The memory store's ``RunUpdateLog``: each run's batches sorted by ``_id`` (a plain list: a run
holds few, appended in order, and one list is fewer containers kept than a sorted container's),
and every batch by when it was written, for pruning oldest first."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from datetime import datetime

from sortedcontainers import SortedList

from ..documents import RunUpdateBatchDocument
from .copying import copied


def _batch_id(batch: RunUpdateBatchDocument) -> str:
    return batch["_id"]


class MemoryRunUpdateLog:
    """``RunUpdateLog`` in process."""

    def __init__(self) -> None:
        super().__init__()
        self._updates: dict[tuple[str, str], list[RunUpdateBatchDocument]] = {}
        """(agentId, runId) -> the run's update batches sorted by ``_id``."""
        self._updates_written = SortedList()
        """``(at, agentId, runId, _id)`` of every update batch: what pruning reads, oldest first."""

    async def append_run_updates(self, batch: RunUpdateBatchDocument) -> None:
        self._add_run_updates([copied(batch)])

    def _add_run_updates(self, updates: Sequence[RunUpdateBatchDocument]) -> None:
        """Keep ``updates`` as they are (the caller's copies, made at the store's boundary) in the
        same step as the caller's change (``RunStore``'s ``updates``)."""
        for batch in updates:
            key = (batch["agentId"], batch["runId"])
            batches = self._updates.get(key)
            if batches is None:
                self._updates[key] = [batch]
            elif batch["_id"] > batches[-1]["_id"]:  # a run's batches come in order: no search
                batches.append(batch)
            else:
                bisect.insort(batches, batch, key=_batch_id)
            self._updates_written.add((batch["at"], batch["agentId"], batch["runId"], batch["_id"]))

    async def list_run_updates(
        self, agent_id: str, run_id: str, *, after: str | None, limit: int
    ) -> list[RunUpdateBatchDocument]:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        batches = self._updates.get((agent_id, run_id))
        if batches is None:
            return []
        start = 0 if after is None else bisect.bisect_right(batches, after, key=_batch_id)
        return [copied(b) for b in batches[start : start + limit]]

    async def prune_run_updates(self, *, before: datetime, limit: int) -> int:
        pruned = 0
        while self._updates_written and pruned < limit and self._updates_written[0][0] < before:
            _, agent_id, run_id, batch_id = self._updates_written.pop(0)
            batches = self._updates[(agent_id, run_id)]
            del batches[bisect.bisect_left(batches, batch_id, key=_batch_id)]
            if not batches:
                del self._updates[(agent_id, run_id)]
            pruned += 1
        return pruned


__all__ = ["MemoryRunUpdateLog"]
