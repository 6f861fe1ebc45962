"""Kept counts of ``MongoSnapshotStore``: collection ``run_counts``, one document per listing filter
combination a run belongs to (its agent; agent and thread; agent and resource; agent, thread and
resource), so a ``totalCount`` without dates reads one to k documents by ``_id`` (docs/storage.md
"Kept counts on MongoDB").

MongoDB-wire servers have no multi-document transaction on every engine, so a run's write and its
count cannot change together. Each document holds ``n``, the runs counted for good, and
``pending``, entries ``i<hash of run id>`` (a run added) or ``d<hash>`` (a run removed), each
``{run, at}``: setting an entry is idempotent, so writing it again after a crash counts nothing
twice. A total is ``n`` plus the entries ``i`` minus the entries ``d``.

- A run whose membership changes carries ``countsPending`` (``MARKER``) from that write (its
  insert: ``added``; the write that records its ``completed`` event: ``removed``) until after its
  entries are written: ``added`` cleared with its ``pendingEvents`` after an insert, both gone with
  the run after a deletion (whose write first writes a missing ``i`` entry). A process that dies in
  between leaves the marker, and the sweeper writes the entries again (``complete_pending_events``,
  after the claim grace period); meanwhile a total counts such a run by its marker (``total``).
- The sweeper folds entries older than the grace into ``n`` (``settle``): an ``i`` entry once its
  run is no longer ``added`` (or is gone), a ``d`` entry once its run is gone; each fold is one
  conditional update of one document (the entry still there: ``$inc`` and ``$unset`` together),
  so two sweepers fold it once.

The guarantee: a total is the runs listed at some moment of its read, also while a dead process's
leftovers wait for the sweeper. A process stalled longer than the grace period between a
run's write and its entries could have its entries written again after they were folded (the
same assumption as a claim's lease). FerretDB 1.24 applies an update by reading then rewriting the
document, so there every write of an agent's counts holds that agent's write lease (``locked``).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from typing import Any

from pymongo import UpdateOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.cursor import AsyncCursor
from pymongo.errors import BulkWriteError, OperationFailure

from .._query import normalized_filter
from ..protocol import RunFilter

Document = dict[str, Any]
Lock = Callable[[str], AbstractAsyncContextManager[None]]

MARKER = "countsPending"
"""The snapshot field of a run whose count entries may not be written yet: ``{since, added?,
removed?}``, ``added`` from its insert and ``removed`` from the write recording its ``completed``
event (each the time of that write), ``since`` the earliest (indexed: ``counts_pending``)."""


def added_at(doc: Document) -> datetime | None:
    """When run ``doc`` was inserted, while its ``i`` entry may be unwritten."""
    return (doc.get(MARKER) or {}).get("added")


def removed_at(doc: Document) -> datetime | None:
    """When run ``doc``'s completion was recorded, while its ``d`` entry may be unwritten."""
    return (doc.get(MARKER) or {}).get("removed")


EQUALITY_FIELDS = ("agentId", "threadId", "resourceId")
"""The fields of a listing filter a count stands for (its dates aside)."""


def key(agent_id: str, thread_id: str | None, resource_id: str | None) -> str:
    """``_id`` of the count of one filter combination (``None``: not part of it)."""
    return json.dumps([agent_id, thread_id, resource_id], separators=(",", ":"))


def run_keys(doc: Document) -> list[str]:
    """The counts a run is part of: its agent's, and its thread's, resource's and both's when it has them."""
    agent, thread, resource = doc["agentId"], doc.get("threadId"), doc.get("resourceId")
    keys = [key(agent, None, None)]
    if thread is not None:
        keys.append(key(agent, thread, None))
    if resource is not None:
        keys.append(key(agent, None, resource))
    if thread is not None and resource is not None:
        keys.append(key(agent, thread, resource))
    return keys


def filter_keys(agent_id: str, run_filter: RunFilter) -> list[str] | None:
    """The counts whose sum is the total of ``run_filter`` (k of them for k allowed resources), or
    ``None`` when the filter has dates (``from_date``, ``to_date``, ``expires_before``): those
    totals count their runs."""
    f = normalized_filter(run_filter)
    if f.from_date is not None or f.to_date is not None or f.expires_before is not None:
        return None
    if f.resource_ids is not None:
        return [key(agent_id, f.thread_id, resource) for resource in sorted(f.resource_ids)]
    return [key(agent_id, f.thread_id, f.resource_id)]


def entry(kind: str, run_id: str) -> str:
    """The name of run ``run_id``'s entry: ``kind`` ``i`` (added) or ``d`` (removed), then a hash
    (a run id may hold characters a field name may not)."""
    return kind + hashlib.sha256(run_id.encode()).hexdigest()[:32]


def _agent(count_id: str) -> str:
    return str(json.loads(count_id)[0])


@asynccontextmanager
async def _unlocked(_: str) -> AsyncIterator[None]:
    yield


class KeptCounts:
    """The counts of one database.

    Args:
        counts: Returns the ``run_counts`` collection.
        runs: Returns the ``run_snapshots`` collection.
        lock: Returns a lease on a name (``counts:<agent>``) held while an agent's counts are
            written, or ``None`` where single-document updates are atomic.
    """

    def __init__(
        self,
        counts: Callable[[], AsyncCollection[Document]],
        runs: Callable[[], AsyncCollection[Document]],
        lock: Callable[[], Lock | None],
    ) -> None:
        self._counts = counts
        self._runs = runs
        self._lock = lock

    def _locked(self, agent_id: str) -> AbstractAsyncContextManager[None]:
        lock = self._lock()
        return _unlocked(agent_id) if lock is None else lock(f"counts:{agent_id}")

    async def total(self, keys: Sequence[str], matching: Document) -> int:
        """The sum of the counts ``keys`` (a count never written is 0), corrected by the runs
        ``matching`` (the filter's equality fields) whose entry is not written yet.

        Those runs carry ``countsPending`` (read first, through its sparse index ``counts_pending``:
        only the runs being inserted or finished now, or left so by a dead process): a run added
        whose ``i`` entry is missing is counted, one removed (its ``completed`` event recorded)
        whose ``d`` entry is missing is not. Read in that order, the total is the runs listed at
        some moment of the read, even before the sweeper recovers a dead writer's run.
        """
        moving = await hinted(
            self._runs().find(
                {**matching, f"{MARKER}.since": {"$exists": True}},
                {"agentId": 1, "threadId": 1, "resourceId": 1, MARKER: 1},
            ),
            "counts_pending",
        )
        found = await self._counts().find({"_id": {"$in": list(keys)}}, {"n": 1, "pending": 1}).to_list()
        total = sum(int(doc.get("n", 0)) + _pending(doc) for doc in found)
        pending = {doc["_id"]: doc.get("pending") or {} for doc in found}
        for run in moving:
            for kind, at, change in (("i", added_at(run), 1), ("d", removed_at(run), -1)):
                if at is None:
                    continue
                name = entry(kind, run["_id"])
                total += change * sum(
                    name not in pending.get(count_id, {}) for count_id in set(run_keys(run)) & set(keys)
                )
        return total

    async def record(self, doc: Document, kind: str, at: datetime) -> None:
        """Write run ``doc``'s entry ``kind`` (``i``: added, ``d``: removed) into each of its
        counts, dated ``at`` (its ``countsPending``); writing it again changes nothing."""
        name = f"pending.{entry(kind, doc['_id'])}"
        keys = run_keys(doc)
        change = {"$set": {name: {"run": doc["_id"], "at": at}}, "$min": {"pendingSince": at}}
        ops = [UpdateOne({"_id": count_id}, change) for count_id in keys]
        async with self._locked(doc["agentId"]):
            done = await self._counts().bulk_write(ops, ordered=False)
            if done.matched_count < len(ops):  # a count not made yet: make it, then write again
                await self._create(keys)
                await self._counts().bulk_write(ops, ordered=False)

    async def add_many(self, docs: Iterable[Document]) -> None:
        """Count new runs at once (the data generator's bulk insert): one ``$inc`` per count.
        Not idempotent: a bulk insert interrupted between its runs and this is counted short."""
        added: Counter[str] = Counter(count_id for doc in docs for count_id in run_keys(doc))
        by_agent: dict[str, list[UpdateOne]] = {}
        for count_id, runs in added.items():
            by_agent.setdefault(_agent(count_id), []).append(UpdateOne({"_id": count_id}, {"$inc": {"n": runs}}))
        await self._create(list(added))
        for agent_id, ops in by_agent.items():
            async with self._locked(agent_id):
                await self._counts().bulk_write(ops, ordered=False)

    async def settle(self, *, before: datetime, limit: int) -> int:
        """Fold the entries dated before ``before`` whose runs are done with them into ``n``
        (docs/storage.md "Kept counts on MongoDB"), at most ``limit`` counts; returns the entries folded."""
        counts = self._counts()
        docs = await counts.find({"pendingSince": {"$lt": before}}, {"pending": 1}).limit(limit).to_list()
        if not docs:
            return 0
        due = [(d["_id"], name, value) for d in docs for name, value in d["pending"].items() if value["at"] < before]
        ids = list({value["run"] for _, _, value in due})
        found = await self._runs().find({"_id": {"$in": ids}}, {MARKER: 1}).to_list()
        present = {d["_id"]: d for d in found}
        folds: dict[str, list[UpdateOne]] = {}
        folded = 0
        for count_id, name, value in due:
            run = present.get(value["run"])
            done = run is None or (name.startswith("i") and added_at(run) is None)
            if done:
                path = f"pending.{name}"
                change = {"$inc": {"n": 1 if name.startswith("i") else -1}, "$unset": {path: ""}}
                folds.setdefault(_agent(count_id), []).append(
                    UpdateOne({"_id": count_id, path: {"$exists": True}}, change)
                )
                folded += 1
        for doc in docs:  # a count left with no entry no longer needs the sweeper
            op = UpdateOne({"_id": doc["_id"], "pending": {}}, {"$unset": {"pendingSince": ""}})
            folds.setdefault(_agent(doc["_id"]), []).append(op)
        for agent_id, ops in folds.items():
            async with self._locked(agent_id):
                await counts.bulk_write(ops, ordered=True)
        return folded

    async def rebuild(self, not_finished: Document) -> None:
        """Set every count from the runs stored that ``not_finished`` matches (the listing's
        condition): the backfill of a database written before counts (O(runs), once). The
        caller keeps other writers of this version away meanwhile (``schema.backfill``'s lease)."""
        counts, runs = self._counts(), self._runs()
        await counts.delete_many({})
        text = {"$type": "string"}
        scopes: list[tuple[Document, Document]] = [
            ({}, {"a": "$agentId"}),
            ({"threadId": text}, {"a": "$agentId", "t": "$threadId"}),
            ({"resourceId": text}, {"a": "$agentId", "r": "$resourceId"}),
            ({"threadId": text, "resourceId": text}, {"a": "$agentId", "t": "$threadId", "r": "$resourceId"}),
        ]
        for match, group in scopes:
            pipeline = [{"$match": {**not_finished, **match}}, {"$group": {"_id": group, "n": {"$sum": 1}}}]
            batch: list[Document] = []
            async for found in await runs.aggregate(pipeline):
                g = found["_id"]
                batch.append({"_id": key(g["a"], g.get("t"), g.get("r")), "n": found["n"], "pending": {}})
                if len(batch) >= 1000:
                    await counts.insert_many(batch)
                    batch = []
            if batch:
                await counts.insert_many(batch)

    async def _create(self, keys: Sequence[str]) -> None:
        """Make the counts ``keys`` that do not exist yet (``n`` 0, no entry), by inserts: one that
        exists already refuses the insert (its unique ``_id``), and is kept. Never by upserts:
        FerretDB 2.5 on DocumentDB let concurrent upserts of one missing ``_id`` each insert it,
        the later ones replacing the first with its entries."""
        try:
            await self._counts().insert_many([{"_id": k, "n": 0, "pending": {}} for k in keys], ordered=False)
        except BulkWriteError as exc:
            if any(error.get("code") != 11000 for error in exc.details.get("writeErrors", [])):
                raise


async def hinted(cursor: AsyncCursor[Document], index: str) -> list[Document]:
    """``cursor``'s documents read through ``index``; without the hint when the server has no such
    index (a database whose collections were dropped under a running store: ``drop_all``)."""
    try:
        return await cursor.clone().hint(index).to_list()
    except OperationFailure as exc:
        if "hint" not in str(exc).lower():
            raise
        return await cursor.to_list()


def _pending(doc: Document) -> int:
    return sum(1 if name.startswith("i") else -1 for name in doc.get("pending") or {})


__all__ = [
    "EQUALITY_FIELDS",
    "MARKER",
    "KeptCounts",
    "added_at",
    "entry",
    "filter_keys",
    "hinted",
    "key",
    "removed_at",
    "run_keys",
]
