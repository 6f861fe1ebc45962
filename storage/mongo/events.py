"""The audit log of ``MongoSnapshotStore``: collection ``run_events``, append-only, ``_id``
time-ordered (``EventLog``); and its run updates: collection ``run_updates``, one insert per batch
of a continuing run's progress, read in ``_id`` order and pruned by age (``RunUpdateLog``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from pymongo import ASCENDING, DeleteMany, UpdateMany

from .. import rules, stored_json
from ..documents import EventDocument, RunUpdateBatchDocument
from ..protocol.events import EVENT_OVERHEAD_BYTES
from ..protocol.filters import EventsAfter
from ..stored_json import EVENT_FIELDS, encode
from .base import MongoStoreBase
from .conditions import compiled
from .mapping import bulk_write, read_events, read_page
from .reachability import reachable
from .schema import EVENTS_RETENTION_INDEX, RUN_UPDATES_INDEX

Document = dict[str, Any]

BYTES_PAGE_BATCH = 32
"""Documents per batch of a page bounded in bytes (``list_events_after``'s ``max_bytes``)."""


def _stored_size(doc: Document) -> int:
    """``event_size`` of a stored event, from its JSON text (``dataJson``, or the value of one
    stored before that encoding), without decoding it."""
    size = EVENT_OVERHEAD_BYTES
    for key in ("threadId", "resourceId", "runId", "by"):
        value = doc.get(key)
        if isinstance(value, str):
            size += len(value)
    text = doc.get("dataJson")
    if isinstance(text, str):
        return size + len(text)
    return size + len(stored_json.dumps(doc.get("data")))


class MongoEvents(MongoStoreBase):
    """``EventLog`` of ``MongoSnapshotStore``."""

    async def append_event(self, event: EventDocument) -> None:
        async with reachable():
            await self._events.insert_one(encode(event, EVENT_FIELDS))

    async def list_expired_events(self, *, before: datetime, limit: int) -> list[tuple[str, str]]:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        expired = compiled(rules.events_expired(before))
        async with reachable():
            found = await read_page(
                self._events.find(expired, {"_id": 0, "agentId": 1, "runId": 1}).sort(EVENTS_RETENTION_INDEX), limit
            )
        return list(dict.fromkeys((doc["agentId"], doc["runId"]) for doc in found))

    async def postpone_event_retention(self, until: Mapping[tuple[str, str], datetime]) -> None:
        # one bulk write; each event is its own single-document update (no transaction on
        # FerretDB or DocumentDB), and a run left half postponed is postponed again by the next sweep
        updates = [
            UpdateMany(
                {"agentId": agent_id, "runId": run_id, "retentionFrom": {"$exists": True}},
                {"$set": {"retentionFrom": date}},
            )
            for (agent_id, run_id), date in until.items()
        ]
        if updates:
            async with reachable():
                await bulk_write(self._events, updates, ordered=False)

    async def delete_run_events(self, runs: Sequence[tuple[str, str]]) -> int:
        deletes = [DeleteMany({"agentId": agent_id, "runId": run_id}) for agent_id, run_id in dict.fromkeys(runs)]
        if not deletes:
            return 0
        async with reachable():
            _, deleted = await bulk_write(self._events, deletes, ordered=False)
        return deleted

    async def list_events(self, agent_id: str, run_id: str) -> list[EventDocument]:
        return await self.list_events_of_runs(agent_id, [run_id])

    async def list_events_of_runs(
        self, agent_id: str, run_ids: Sequence[str], *, resource_ids: frozenset[str] | None = None
    ) -> list[EventDocument]:
        for run_id in dict.fromkeys(run_ids):  # this store's appends still in flight are read too
            await self._behind.wait(run_id)
        query: Document = {"agentId": agent_id, "runId": {"$in": list(dict.fromkeys(run_ids))}}
        if resource_ids is not None:
            query["resourceId"] = {"$in": sorted(resource_ids)}
        async with reachable():
            docs = await self._events.find(query).sort([("at", ASCENDING), ("_id", ASCENDING)]).to_list()
        return read_events(docs)

    async def list_events_after(self, query: EventsAfter) -> list[EventDocument]:
        agent_id, after_event_id, limit = query.agent_id, query.after_event_id, query.limit
        resource_ids, max_bytes = query.resource_ids, query.max_bytes
        where: Document = {} if agent_id is None else {"agentId": agent_id}  # None: the _id index's order
        if after_event_id is not None:
            where["_id"] = {"$gt": after_event_id}
        if resource_ids is not None:
            where["resourceId"] = {"$in": sorted(resource_ids)}
        found = self._events.find(where).sort([("_id", ASCENDING)])
        await self._behind.wait_all()  # this store's appends still in flight are read too
        async with reachable():
            if max_bytes is None:
                return read_events(await read_page(found, limit))
            # a few documents a batch, so that no more than a batch beyond the page is ever read
            cursor = found.limit(limit).batch_size(min(limit, BYTES_PAGE_BATCH))
            docs: list[Document] = []
            total = 0
            try:
                async for doc in cursor:
                    total += _stored_size(doc)
                    if docs and total > max_bytes:
                        break
                    docs.append(doc)
            finally:
                await cursor.close()
        return read_events(docs)


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


__all__ = ["MongoEvents", "MongoRunUpdates"]
