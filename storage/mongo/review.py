"""The reviewers' queue of ``MongoSnapshotStore``: pages of index ``review_queue`` in queue order
(``QueueKey``), and the review claims written on a run's calls (``ReviewQueueStore``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ..documents import SnapshotDocument
from ..protocol import QueueFilter, QueueKey, ReviewClaimWrite
from .base import MongoStoreBase
from .conditions import compiled, merged, no_value
from .mapping import NOT_FINISHED, page, read_snapshots
from .reachability import reachable
from .schema import REVIEW_QUEUE_ORDER

Document = dict[str, Any]

_DATED: Document = {"$gt": datetime(1, 1, 1, tzinfo=UTC)}
"""A date (``expiresAt`` holds one, or null: no pending deadline)."""


def _filtered(f: QueueFilter) -> Document:
    query: Document = {"pendingCount": {"$gt": 0}, "status": "suspended", **NOT_FINISHED}
    if f.agent_ids is not None:
        query["agentId"] = {"$in": sorted(f.agent_ids)}
    if f.thread_id is not None:
        query["threadId"] = f.thread_id
    if f.resource_ids is not None:
        allowed: Document = {"$in": sorted(f.resource_ids)}
        query["resourceId"] = allowed if f.resource_id is None else {"$eq": f.resource_id, **allowed}
    elif f.resource_id is not None:
        query["resourceId"] = f.resource_id
    return query


def queue_queries(f: QueueFilter, after: QueueKey | None) -> list[Document]:
    """The filters of one page, read in turn in ``REVIEW_QUEUE_ORDER``: the runs with a deadline,
    then (unless ``after`` is past them or ``expires_before`` is set) those without one."""
    queries = []
    if after is None or after.expires_at is not None:
        dated = {**_filtered(f), "expiresAt": dict(_DATED)}
        if f.expires_before is not None:
            dated["expiresAt"]["$lt"] = f.expires_before
        if after is not None and after.expires_at is not None:
            e, s, r = after.expires_at, after.suspended_at, after.run_id
            dated["$or"] = [
                {"expiresAt": {"$gt": e}},
                {"expiresAt": e, "suspendedAt": {"$gt": s}},
                {"expiresAt": e, "suspendedAt": s, "_id": {"$gt": r}},
            ]
        queries.append(dated)
    if f.expires_before is None:
        # stored null when no pending call has a deadline; ``$type`` means the same on every engine
        undated = {**_filtered(f), "expiresAt": {"$type": "null"}}
        if after is not None and after.expires_at is None:
            s, r = after.suspended_at, after.run_id
            undated["$or"] = [{"suspendedAt": {"$gt": s}}, {"suspendedAt": s, "_id": {"$gt": r}}]
        queries.append(undated)
    return queries


class MongoReviewQueue(MongoStoreBase):
    """``ReviewQueueStore`` of ``MongoSnapshotStore``."""

    async def list_review_runs(
        self, queue_filter: QueueFilter, *, limit: int, after: QueueKey | None = None
    ) -> list[SnapshotDocument]:
        found: list[Document] = []
        for query in queue_queries(queue_filter, after):
            if len(found) >= limit:
                break
            cursor = page(self._runs.find(query).sort(REVIEW_QUEUE_ORDER), limit - len(found))
            async with reachable():
                found.extend(await cursor.to_list())
        return read_snapshots(found)

    async def count_review_questions(self, queue_filter: QueueFilter) -> int:
        query = merged(_filtered(queue_filter), no_value("parentRunId"))  # not a sub-run
        if queue_filter.expires_before is not None:
            query["expiresAt"] = {**_DATED, "$lt": queue_filter.expires_before}
        pipeline = [{"$match": query}, {"$group": {"_id": None, "total": {"$sum": "$pendingCount"}}}]
        async with reachable():
            found = await (await self._runs.aggregate(pipeline)).to_list()
        return int(found[0]["total"]) if found else 0

    async def explain_review_queue(self, queue_filter: QueueFilter, limit: int) -> list[Mapping[str, Any]]:
        """The server's query plan of each query of a queue page (index checks, ``bench/``)."""
        plans: list[Mapping[str, Any]] = []
        for query in queue_queries(queue_filter, None):
            async with reachable():
                plans.append(await page(self._runs.find(query).sort(REVIEW_QUEUE_ORDER), limit).explain())
        return plans

    async def record_review_claim(self, write: ReviewClaimWrite) -> SnapshotDocument | None:
        path = f"toolCalls.{write.index}.reviewClaim"
        update: Document = {"$set": {"updatedAt": write.now}, "$inc": {"version": 1}}
        if write.claim is None:
            update["$unset"] = {path: ""}
        else:
            update["$set"][path] = dict(write.claim)
        return await self._update_then_append(write.event, write.run_id, compiled(write.condition()), update)


__all__ = ["MongoReviewQueue", "queue_queries"]
