"""The reviewers' queue of ``MongoSnapshotStore``: pages of index ``REVIEW_QUEUE_INDEX`` in queue order
(``QueueKey``, stored as ``queueAt``; on DocumentDB read through windows, ``windows.Windows``), and
the review claims written on a run's calls (``ReviewQueueStore``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..documents import SnapshotDocument
from ..protocol import QueueFilter, QueueKey, ReviewCandidates, ReviewClaimWrite
from .base import MongoStoreBase
from .conditions import compiled, merged, no_value
from .counts import EVENT_MARKER, QUEUE_MARKER, QUEUE_RUN_FIELDS, moving_query, queue_key, queue_scope
from .mapping import NOT_FINISHED, STORE_FIELDS, UNDATED_FROM, as_utc, hinted, page, queue_at, read_page, read_snapshots
from .reachability import reachable
from .schema import REVIEW_QUEUE_INDEX, REVIEW_QUEUE_ORDER

Document = dict[str, Any]

_DATED: Document = {"$gt": datetime(1, 1, 1, tzinfo=UTC)}
"""A date (``expiresAt`` holds one, or null: no pending deadline)."""

_PLACED: Document = {"$gt": datetime(1, 1, 1, tzinfo=UTC)}
"""A place in the queue (``queueAt`` holds one, or null: no pending call)."""


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


@dataclass(frozen=True)
class QueueRead:
    """A queue page's one read, in ``REVIEW_QUEUE_ORDER``: the runs matching ``query``, one range
    of ``queueAt`` (``mapping.queue_at``); ``anchor``: the cursor's ``queueAt``, if any."""

    query: Document
    anchor: datetime | None


def queue_query(f: QueueFilter, after: QueueKey | None) -> QueueRead:
    """The read of a page: the runs ``f`` matches by ``queueAt``, those with a deadline and then
    those without one in one range (``expires_before``: the runs with a deadline before it). A
    cursor (any ``QueueKey``, those issued before ``queueAt`` too) is that range from the cursor's
    ``queueAt`` on, less the runs of that value up to the cursor (a ``$nor``): never an ``$or``
    with a range of ``_id``, which DocumentDB scans from a random id on (docs/storage.md "Windows
    instead")."""
    place: Document = dict(_PLACED)
    query = {**_filtered(f), "queueAt": place}
    if f.expires_before is not None:
        place["$lt"] = min(as_utc(f.expires_before), UNDATED_FROM)
    anchor = None
    if after is not None:
        anchor = queue_at(after.expires_at, after.suspended_at, 1)
        s, r = after.suspended_at, after.run_id
        place["$gte"] = anchor
        up_to = [
            {"queueAt": anchor, "suspendedAt": {"$lt": s}},
            {"queueAt": anchor, "suspendedAt": s, "_id": {"$lte": r}},
        ]
        query = merged(query, {"$nor": up_to})
    return QueueRead(query, anchor)


def candidate_queries(f: QueueFilter, c: ReviewCandidates, after: str | None) -> list[tuple[Document, str]]:
    """The reads of one page of ``list_review_candidates``, one per part of ``c`` with the index
    it walks (``REVIEW_CANDIDATE_INDEXES``): the runs ``count_review_questions`` counts for ``f``
    (``expires_before`` too) holding the part, from ``after`` on in ``_id`` order. A part of
    tools, claims or escalations matches a run with such a decided call too (a superset); no
    starter is ``$exists``, which means the same on every engine (docs/storage.md "Conditions
    that mean the same ...")."""
    base = merged(_filtered(f), no_value("parentRunId"))
    if f.expires_before is not None:
        base["expiresAt"] = {**_DATED, "$lt": f.expires_before}
    if after is not None:
        base["_id"] = {"$gt": after}
    parts: list[tuple[Document, str]] = []
    if c.tool_names:
        parts.append(({"toolCalls.toolName": {"$in": sorted(c.tool_names)}}, "review_tool"))
    if c.approver is not None:
        parts.append(({"toolCalls.approvals.decidedBy": c.approver}, "review_approver"))
    if c.starter is not None:
        parts.append(({"startedBy": c.starter}, "review_starter"))
    if c.unknown_starter:
        parts.append(({"startedBy": {"$exists": False}}, "review_starter"))
    if c.claimed:
        parts.append(({"toolCalls.reviewClaim.until": {"$type": "date"}}, "review_claimed"))
    if c.escalated:
        parts.append(({"toolCalls.escalated": True}, "review_escalated"))
    return [(merged(base, part), index) for part, index in parts]


APPROVED_READ = 500
"""Runs the kept count's first read returns at most when it also looks for an approver's approvals."""


def _approved(approver: str) -> Document:
    """The suspended runs holding an approval by ``approver`` (index ``review_approver``)."""
    return {"toolCalls.approvals.decidedBy": approver, "status": "suspended"}


def _holds_approval(doc: Document, approver: str) -> bool:
    """Whether run ``doc`` (its ``toolCalls.approvals.decidedBy`` read) is suspended and holds an
    approval by ``approver``."""
    return doc.get("status") == "suspended" and any(
        approval.get("decidedBy") == approver
        for call in doc.get("toolCalls") or []
        for approval in call.get("approvals") or []
    )


def _window_key(f: QueueFilter) -> tuple[Any, ...]:
    """The key a queue filter's window is remembered under (never a listing's: its first item is a tuple)."""
    agents = None if f.agent_ids is None else tuple(sorted(f.agent_ids))
    resources = None if f.resource_ids is None else tuple(sorted(f.resource_ids))
    return (("queue", "queueAt"), agents, f.thread_id, f.resource_id, resources, f.expires_before)


class MongoReviewQueue(MongoStoreBase):
    """``ReviewQueueStore`` of ``MongoSnapshotStore``."""

    async def list_review_runs(
        self, queue_filter: QueueFilter, *, limit: int, after: QueueKey | None = None
    ) -> list[SnapshotDocument]:
        """On DocumentDB the page is read through windows of ``queueAt`` (``Windows``), as listing
        pages are: the planner sorts every run a read matches. A window's span is measured past
        ``UNDATED_FROM`` once a page reaches the runs without a deadline (``split``). A window is
        an index condition of ``REVIEW_QUEUE_INDEX`` beside the filter's agents, thread and
        resources (``REVIEW_QUEUE_KEYS``), so only the filter's runs inside it are fetched."""
        part = queue_query(queue_filter, after)

        async def read(window: Document | None) -> list[Document]:
            bounded = part.query if window is None else merged(part.query, {"$and": [window]})
            cursor = self._runs.find(bounded, STORE_FIELDS).sort(REVIEW_QUEUE_ORDER)
            async with reachable():
                if window is None:
                    return await read_page(cursor, limit)
                # a window through the queue's index alone: without the hint, DocumentDB may AND
                # in `stalled`'s every waiting run (`pendingCount`) while its statistics are young;
                # one read, a short one read wider (``Windows``)
                return await hinted(cursor, REVIEW_QUEUE_INDEX, limit, whole=False)

        if not self._windowed_pages or limit <= 0:
            return read_snapshots(await read(None) if limit > 0 else [])
        found = await self._windows.page(
            _window_key(queue_filter),
            limit,
            cursor=part.anchor,
            older=False,
            read=read,
            field="queueAt",
            first_from_top=True,
            split=UNDATED_FROM,
        )
        return read_snapshots(found)

    async def count_review_questions(self, queue_filter: QueueFilter) -> int:
        """Without ``expires_before``: the queue's kept counts (``counts.KeptCounts.queue_total``),
        one per agent and allowed resource, whatever the number of runs; with it, a sum over the
        runs due before it (O(matches)), a range of ``queueAt``."""
        if queue_filter.expires_before is None:
            async with reachable():
                return (await self._kept_questions(queue_filter, None))[0]
        query = merged(queue_query(queue_filter, None).query, no_value("parentRunId"))  # not a sub-run
        pipeline = [{"$match": query}, {"$group": {"_id": None, "total": {"$sum": "$pendingCount"}}}]
        async with reachable():
            found = await (await self._runs.aggregate(pipeline)).to_list()
        return int(found[0]["total"]) if found else 0

    async def count_review_questions_seeing(self, queue_filter: QueueFilter, approver: str) -> tuple[int, bool]:
        """The kept count's first read (the runs carrying moves) also reads the suspended runs
        holding an approval by ``approver`` (one ``$or`` of two indexes, ``APPROVED_READ`` runs at
        most, else ``True`` and the runs carrying moves read alone); ``expires_before``: ``True``."""
        if queue_filter.expires_before is not None:
            return await self.count_review_questions(queue_filter), True
        async with reachable():
            return await self._kept_questions(queue_filter, approver)

    async def _kept_questions(self, f: QueueFilter, approver: str | None) -> tuple[int, bool]:
        """The questions of ``f`` (without dates) from the queue's counts: those of its agents (every
        agent's by ``scope``), its thread and each resource it allows (the queue's rule as
        ``QueueFilter.admits`` and SQLite's ``kept_count_sql`` state it); and whether a suspended
        run may hold an approval by ``approver`` (``None``: not read, ``True``; none when ``f``
        matches nothing)."""
        allowed = f.resource_ids
        if allowed is not None and f.resource_id is not None:
            allowed = None if f.resource_id in allowed else frozenset()
        resources: list[str | None] = [f.resource_id] if allowed is None else [*sorted(allowed)]
        if not resources or (f.agent_ids is not None and not f.agent_ids):
            return 0, False  # nothing matches: no candidate either
        by_resource = resources != [None]
        runs: Document = {} if f.agent_ids is None else {"agentId": {"$in": sorted(f.agent_ids)}}
        events = dict(runs)
        if f.thread_id is not None:
            runs["threadId"] = events[f"{EVENT_MARKER}.threadId"] = f.thread_id
        if by_resource:
            runs["resourceId"] = events[f"{EVENT_MARKER}.resourceId"] = {"$in": resources}
        if f.agent_ids is None:
            counts: Document = {"scope": {"$in": [queue_scope(f.thread_id, r) for r in resources]}}
        else:
            counts = {"_id": {"$in": [queue_key(a, f.thread_id, r) for a in sorted(f.agent_ids) for r in resources]}}

        def count_of(run: Document) -> str | None:
            agent, thread, resource = run["agentId"], run.get("threadId"), run.get("resourceId")
            if not f.admits(agent, thread, resource):
                return None
            return queue_key(agent, f.thread_id, resource if by_resource else None)

        moving, approved = None, True
        if approver is not None:
            moving, approved = await self._moving_or_approved(runs, approver)
        return await self._counts.queue_total(counts, runs, events, count_of, moving), approved

    async def _moving_or_approved(self, runs: Document, approver: str) -> tuple[list[Document] | None, bool]:
        """The runs carrying moves among ``runs`` (with others, which ``count_of`` leaves out) and
        whether a suspended run holds an approval by ``approver``, in one read; ``(None, True)``
        past ``APPROVED_READ`` runs (the caller reads the moving runs alone)."""
        either = {"$or": [moving_query(runs), _approved(approver)]}
        fields = {**QUEUE_RUN_FIELDS, "status": 1, "toolCalls.approvals.decidedBy": 1}
        # no `limit`: after a find with one, FerretDB 2.5 holds the connection's next command
        # about 12 ms (bench/RESULTS.md "The queue's candidates in its count's read"); one batch,
        # closed when more runs match
        found: list[Document] = []
        async with self._runs.find(either, fields).batch_size(APPROVED_READ + 1) as cursor:
            async for doc in cursor:
                found.append(doc)
                if len(found) > APPROVED_READ:
                    return None, True
        moving = [doc for doc in found if (doc.get(QUEUE_MARKER) or {}).get("since") is not None]
        return moving, any(_holds_approval(doc, approver) for doc in found)

    async def list_review_candidates(
        self, queue_filter: QueueFilter, candidates: ReviewCandidates, *, limit: int, after: str | None = None
    ) -> list[SnapshotDocument]:
        async def part(query: Document, index: str) -> list[Document]:
            async with reachable():  # hinted: else DocumentDB ANDs in `stalled`'s every waiting run
                return await hinted(self._runs.find(query).sort([("_id", 1)]), index, limit)

        parts = candidate_queries(queue_filter, candidates, after) if limit > 0 else []
        found = {doc["_id"]: doc for docs in await asyncio.gather(*(part(*one) for one in parts)) for doc in docs}
        return read_snapshots([found[run_id] for run_id in sorted(found)[:limit]])

    async def explain_review_queue(self, queue_filter: QueueFilter, limit: int) -> list[Mapping[str, Any]]:
        """The server's query plan of the query of a queue page, in a list (index checks, ``bench/``)."""
        query = queue_query(queue_filter, None).query
        async with reachable():
            return [await page(self._runs.find(query).sort(REVIEW_QUEUE_ORDER), limit).explain()]

    async def record_review_claim(self, write: ReviewClaimWrite) -> SnapshotDocument | None:
        path = f"toolCalls.{write.index}.reviewClaim"
        update: Document = {"$set": {"updatedAt": write.now}, "$inc": {"version": 1}}
        if write.claim is None:
            update["$unset"] = {path: ""}
        else:
            update["$set"][path] = dict(write.claim)
        return await self._update_then_append(write.event, write.run_id, compiled(write.condition), update)


__all__ = ["MongoReviewQueue", "QueueRead", "candidate_queries", "queue_query"]
