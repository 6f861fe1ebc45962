"""Run updates of ``MongoSnapshotStore``: collection ``run_updates``, one insert per batch of a
continuing run's progress, read in ``_id`` order and pruned by age (``RunUpdateLog``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from pymongo import ASCENDING

from ..documents import RunUpdateBatchDocument
from .base import MongoStoreBase
from .mapping import read_page
from .reachability import reachable
from .schema import RUN_UPDATES_INDEX

Document = dict[str, Any]


class MongoRunUpdates(MongoStoreBase):
    """``RunUpdateLog`` of ``MongoSnapshotStore``."""

    async def append_run_updates(self, batch: RunUpdateBatchDocument) -> None:
        await self._behind.wait(batch["runId"])  # after the run's batches still in flight
        async with reachable():
            await self._updates.insert_one(dict(batch))

    async def list_run_updates(
        self, agent_id: str, run_id: str, *, after: str | None, limit: int
    ) -> list[RunUpdateBatchDocument]:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        await self._behind.wait(run_id)  # this store's batches still in flight are read too
        query: Document = {"agentId": agent_id, "runId": run_id}
        if after is not None:
            query["_id"] = {"$gt": after}
        async with reachable():
            docs = await read_page(self._updates.find(query).sort(RUN_UPDATES_INDEX), limit)
        return [cast(RunUpdateBatchDocument, doc) for doc in docs]

    async def prune_run_updates(self, *, before: datetime, limit: int) -> int:
        async with reachable():
            old = await read_page(self._updates.find({"at": {"$lt": before}}, {"_id": 1}).sort("at", ASCENDING), limit)
            if not old:
                return 0
            deleted = await self._updates.delete_many({"_id": {"$in": [doc["_id"] for doc in old]}})
        return deleted.deleted_count


__all__ = ["MongoRunUpdates"]
