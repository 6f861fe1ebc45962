"""Kept counts of ``MongoSnapshotStore``: collection ``run_counts``, one document per listing filter
combination a run belongs to, and one per queue filter combination, read by ``_id`` (or ``scope``).

No multi-document transactions: each count holds ``n`` and idempotent entries: ``i<hash>`` (a run
added), ``d<hash>`` (a run removed), ``m<hash>`` (a change of a run's waiting questions, valued).
Writes mark the run (``countsPending``, ``questionsPending``) or its ``completed`` event; the
insert and the sweeper write the entries, a total corrects for the marked runs and events whose
entries are missing, and the sweeper folds entries into ``n`` a grace period after they were
written. docs/storage.md "Kept counts on MongoDB" has the whole protocol.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from typing import Any

from pymongo import UpdateOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import BulkWriteError

from .._query import normalized_filter, utcnow
from ..protocol import RunFilter
from .mapping import bulk_write, hinted, read_page

Document = dict[str, Any]
Lock = Callable[[str], AbstractAsyncContextManager[None]]

MARKER = "countsPending"
"""The snapshot field of a run whose count entries may not be written yet: ``{since, added?,
removed?}``, ``added`` from its insert and ``removed`` from the write recording its ``completed``
event (each the time of that write), ``since`` the earliest (indexed: ``counts_pending``)."""


EVENT_MARKER = "countsPending"
"""The field of a ``completed`` event in ``run_events`` whose run's ``d`` entries may not be
written yet: ``{at, threadId, resourceId}``, the time its completion was recorded (indexed:
``events_counts_pending``, sparse) and the run's fields its counts are of (``with_run_keys``).
Never read back as part of the event (``mapping.read_events``)."""


QUEUE_MARKER = "questionsPending"
"""The snapshot field of a run whose questions changed by writes whose ``m`` entries may not be
written yet: ``{since, moves: {<id>: q}}``, each move the change in the run's waiting questions
(``pendingCount`` while suspended, not a sub-run) that one write made, set by that write itself
(``moved``; indexed: ``questions_pending``, sparse). Cleared once written (``record``)."""


QUEUE_RUN_FIELDS: Document = {"agentId": 1, "threadId": 1, "resourceId": 1, "parentRunId": 1, QUEUE_MARKER: 1}
"""The fields of a run carrying moves that a queue total reads."""


def moving_query(runs: Document) -> Document:
    """The runs ``runs`` selects that carry moves whose entries may not be written (``QUEUE_MARKER``)."""
    return {**runs, f"{QUEUE_MARKER}.since": {"$exists": True}}


def moved(update: Document, questions: int, now: datetime) -> Document:
    """``update`` (a run's single-document write) that also records a change of ``questions`` in the
    run's waiting questions under a new move id (``QUEUE_MARKER``); ``update`` itself when 0."""
    if not questions:
        return update
    fields = {f"{QUEUE_MARKER}.moves.{secrets.token_hex(8)}": questions, f"{QUEUE_MARKER}.since": now}
    return {**update, "$set": {**update.get("$set", {}), **fields}}


def inserted_moves(doc: Document, now: datetime) -> Document | None:
    """The ``QUEUE_MARKER`` of run ``doc`` as inserted: its waiting questions as one move, or ``None``."""
    questions = waiting_questions(doc)
    return {"since": now, "moves": {secrets.token_hex(8): questions}} if questions else None


def waiting_questions(doc: Document) -> int:
    """The questions run ``doc`` adds to the queue: its ``pendingCount`` while suspended, not a sub-run."""
    waiting = doc.get("status") == "suspended" and doc.get("parentRunId") is None
    return int(doc.get("pendingCount") or 0) if waiting else 0


def moves_of(doc: Document) -> dict[str, int]:
    """The moves run ``doc`` (or its finished run's event marker, ``_run_of``) carries; none for a sub-run."""
    if doc.get("parentRunId") is not None:
        return {}
    return dict((doc.get(QUEUE_MARKER) or {}).get("moves") or {})


def with_run_keys(events: Sequence[Document], run: Document) -> list[Document]:
    """``events`` (stored form, about to be appended) with each ``countsPending`` (a time, as the
    run's write recorded it) completed by run ``run``'s ``threadId`` and ``resourceId``, and the
    moves of its questions not yet written (``QUEUE_MARKER``), which the sweeper writes with its
    ``d`` entries once the run is gone."""
    done = []
    for event in events:
        marker = event.get(EVENT_MARKER)
        if isinstance(marker, datetime):
            keys = {"at": marker, "threadId": run.get("threadId"), "resourceId": run.get("resourceId")}
            if moves := moves_of(run):
                keys["moves"] = moves
            event = {**event, EVENT_MARKER: keys}
        done.append(event)
    return done


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


def queue_key(agent_id: str, thread_id: str | None, resource_id: str | None) -> str:
    """``_id`` of the queue's count of one filter combination: ``key``'s, marked ``"q"``."""
    return json.dumps([agent_id, thread_id, resource_id, "q"], separators=(",", ":"))


def queue_scope(thread_id: str | None, resource_id: str | None) -> str:
    """The ``scope`` of the queue's counts of one thread and resource, every agent's (indexed:
    ``queue_scope``), so a total of every agent reads one count per agent."""
    return json.dumps([thread_id, resource_id], separators=(",", ":"))


def run_queue_keys(doc: Document) -> list[str]:
    """The queue's counts run ``doc`` is part of (``run_keys``' combinations); none for a sub-run."""
    if doc.get("parentRunId") is not None:
        return []
    return [_as_queue_key(count_id) for count_id in run_keys(doc)]


def _as_queue_key(count_id: str) -> str:
    return queue_key(*json.loads(count_id))


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


def new_count(count_id: str) -> Document:
    """A count not written yet: ``n`` 0, no entry; a queue's with its ``scope``."""
    parts = json.loads(count_id)
    doc: Document = {"_id": count_id, "n": 0, "pending": {}}
    if len(parts) == 4:
        doc["scope"] = queue_scope(parts[1], parts[2])
    return doc


def weight(name: str, value: Document) -> int:
    """What entry ``name`` adds to its count: an ``m`` entry its ``q``, ``i`` 1, ``d`` -1."""
    if name.startswith("m"):
        return int(value["q"])
    return 1 if name.startswith("i") else -1


@asynccontextmanager
async def _unlocked(_: str) -> AsyncIterator[None]:
    yield


class KeptCounts:
    """The counts of one database.

    Args:
        counts: Returns the ``run_counts`` collection.
        runs: Returns the ``run_snapshots`` collection.
        events: Returns the ``run_events`` collection.
        lock: Returns a lease on a name (``counts:<agent>``) held while an agent's counts are
            written, or ``None`` where single-document updates are atomic.
    """

    def __init__(
        self,
        counts: Callable[[], AsyncCollection[Document]],
        runs: Callable[[], AsyncCollection[Document]],
        events: Callable[[], AsyncCollection[Document]],
        lock: Callable[[], Lock | None],
    ) -> None:
        self._counts = counts
        self._runs = runs
        self._events = events
        self._lock = lock

    def _locked(self, agent_id: str) -> AbstractAsyncContextManager[None]:
        lock = self._lock()
        return _unlocked(agent_id) if lock is None else lock(f"counts:{agent_id}")

    async def total(self, keys: Sequence[str], matching: Document) -> int:
        """The sum of the counts ``keys`` (a count never written is 0), corrected by the runs
        ``matching`` (the filter's equality fields) whose entry is not written yet.

        Read first: the runs carrying ``countsPending`` (sparse index ``counts_pending``: only the
        runs being inserted or finished now, or left so by a dead process), then the ``completed``
        events carrying it (sparse index ``events_counts_pending``: runs finished since the
        sweeper's last pass), then the counts. A run added whose ``i`` entry is missing is
        counted; a run finished (its ``completed`` event pending in it, or the run gone) whose
        ``d`` entry is missing is not. So the total is the runs listed at some moment of the read.
        """
        fields = {"agentId": 1, "threadId": 1, "resourceId": 1, MARKER: 1, "pendingEvents.type": 1}
        moving = await hinted(
            self._runs().find({**matching, f"{MARKER}.since": {"$exists": True}}, fields), "counts_pending"
        )
        of_runs = {(k if k == "agentId" else f"{EVENT_MARKER}.{k}"): v for k, v in matching.items()}
        finished = await hinted(
            self._events().find({**of_runs, f"{EVENT_MARKER}.at": {"$exists": True}}, {"runId": 1, EVENT_MARKER: 1}),
            "events_counts_pending",
        )
        found = await self._counts().find({"_id": {"$in": list(keys)}}, {"n": 1, "pending": 1}).to_list()
        total = sum(int(doc.get("n", 0)) + pending_total(doc) for doc in found)
        pending = {doc["_id"]: doc.get("pending") or {} for doc in found}
        wanted = set(keys)

        def missing(run: Document, kind: str) -> int:
            name = entry(kind, run["_id"])
            return sum(name not in pending.get(count_id, {}) for count_id in set(run_keys(run)) & wanted)

        listed: set[str] = set()
        leaving: dict[str, Document] = {}
        for run in moving:
            if added_at(run) is not None:
                total += missing(run, "i")
            if _finished(run):
                leaving[run["_id"]] = run
            else:
                listed.add(run["_id"])
        for event in finished:
            if event["runId"] not in listed:
                leaving.setdefault(event["runId"], _run_of(event, matching["agentId"]))
        return total - sum(missing(run, "d") for run in leaving.values())

    async def queue_total(
        self,
        counts: Document,
        runs: Document,
        events: Document,
        count_of: Callable[[Document], str | None],
        moving: list[Document] | None = None,
    ) -> int:
        """The sum of the queue's counts ``counts`` selects, corrected by the moves whose ``m``
        entry is not written yet of the runs ``runs`` selects and of the finished runs whose
        ``completed`` event ``events`` selects (each a run's fields as ``_run_of`` gives them):
        such a move is added when its entry is missing from the count ``count_of(run)`` (``None``:
        the run is not in the total). Read in ``total``'s order, for the same reason: the runs
        carrying moves (sparse index ``questions_pending``; ``moving``: read already, at least
        ``moving_query(runs)``'s runs, with ``QUEUE_RUN_FIELDS``), the events carrying them, the counts."""
        if moving is None:
            moving = await hinted(self._runs().find(moving_query(runs), QUEUE_RUN_FIELDS), "questions_pending")
        flagged = {**events, f"{EVENT_MARKER}.at": {"$exists": True}, f"{EVENT_MARKER}.moves": {"$exists": True}}
        finished = await hinted(
            self._events().find(flagged, {"runId": 1, "agentId": 1, EVENT_MARKER: 1}), "events_counts_pending"
        )
        found = await self._counts().find(counts, {"n": 1, "pending": 1}).to_list()
        total = sum(int(doc.get("n", 0)) + pending_total(doc) for doc in found)
        pending = {doc["_id"]: doc.get("pending") or {} for doc in found}
        seen: set[tuple[str, str]] = set()
        for run in [*moving, *(_run_of(event, event["agentId"]) for event in finished)]:
            count_id = count_of(run)
            for move, questions in moves_of(run).items():
                if count_id is None or (run["_id"], move) in seen:
                    continue
                seen.add((run["_id"], move))
                total += questions * (entry("m", f"{run['_id']}:{move}") not in pending.get(count_id, {}))
        return total

    async def record(self, doc: Document, kind: str | None) -> None:
        """Write run ``doc``'s entry ``kind`` (``i``: added, ``d``: removed, ``None``: none) into each
        of its counts, and an ``m`` entry of each move it carries (``moves_of``) into each of its
        queue's counts, dated now (``settle`` folds them a grace period later); writing one again
        changes nothing but its date."""
        await self.record_many([(doc, kind)])

    async def record_many(self, runs: Sequence[tuple[Document, str | None]]) -> None:
        """``record`` of several runs: one ``update`` command per agent."""
        at = utcnow()
        entries: dict[str, Document] = {}
        for doc, kind in runs:
            if kind is not None:
                name = f"pending.{entry(kind, doc['_id'])}"
                for count_id in run_keys(doc):
                    entries.setdefault(count_id, {})[name] = {"run": doc["_id"], "at": at}
            for move, questions in moves_of(doc).items():
                value = {"run": doc["_id"], "at": at, "q": questions, "m": move}
                for count_id in run_queue_keys(doc):
                    entries.setdefault(count_id, {})[f"pending.{entry('m', doc['_id'] + ':' + move)}"] = value
        by_agent: dict[str, list[str]] = {}
        for count_id in entries:
            by_agent.setdefault(_agent(count_id), []).append(count_id)
        for agent_id, ids in by_agent.items():
            ops = [UpdateOne({"_id": i}, {"$set": entries[i], "$min": {"pendingSince": at}}) for i in ids]
            async with self._locked(agent_id):
                matched, _ = await bulk_write(self._counts(), ops, ordered=False)
                if matched < len(ops):  # a count not made yet: make it, then write again
                    await self._create(ids)
                    await bulk_write(self._counts(), ops, ordered=False)

    async def moved_runs(self, limit: int) -> list[Document]:
        """The runs carrying moves not yet written (``QUEUE_MARKER``), at most ``limit``, with the
        fields ``record`` and the marker's clearing read."""
        fields = {"agentId": 1, "threadId": 1, "resourceId": 1, "parentRunId": 1, "version": 1, QUEUE_MARKER: 1}
        found = self._runs().find({f"{QUEUE_MARKER}.since": {"$exists": True}}, fields)
        return await hinted(found, "questions_pending", limit)

    async def record_removals(self, *, before: datetime, limit: int) -> int:
        """Write the ``d`` entries of the runs finished before ``before`` whose ``completed`` event
        still carries ``countsPending`` and whose snapshot is gone, then clear the event's field
        (one update each); at most ``limit`` events. Returns the events cleared."""
        events = self._events()
        flagged = await hinted(
            events.find({f"{EVENT_MARKER}.at": {"$lt": before}}, {"runId": 1, "agentId": 1, EVENT_MARKER: 1}),
            "events_counts_pending",
            limit,
        )
        if not flagged:
            return 0
        present = {
            d["_id"]
            for d in await self._runs().find({"_id": {"$in": [e["runId"] for e in flagged]}}, {"_id": 1}).to_list()
        }
        cleared = 0
        for event in flagged:
            if event["runId"] in present:  # still being finished (``complete_pending_events`` deletes it)
                continue
            await self.record(_run_of(event, event["agentId"]), "d")
            await events.update_one({"_id": event["_id"]}, {"$unset": {EVENT_MARKER: ""}})
            cleared += 1
        return cleared

    async def add_many(self, docs: Iterable[Document]) -> None:
        """Count new runs at once (the data generator's bulk insert): one ``$inc`` per count.
        Not idempotent: a bulk insert interrupted between its runs and this is counted short."""
        added: Counter[str] = Counter()
        for doc in docs:
            added.update(run_keys(doc))
            if questions := waiting_questions(doc):
                added.update({count_id: questions for count_id in run_queue_keys(doc)})
        by_agent: dict[str, list[UpdateOne]] = {}
        for count_id, runs in added.items():
            by_agent.setdefault(_agent(count_id), []).append(UpdateOne({"_id": count_id}, {"$inc": {"n": runs}}))
        await self._create(list(added))
        for agent_id, ops in by_agent.items():
            async with self._locked(agent_id):
                await bulk_write(self._counts(), ops, ordered=False)

    async def settle(self, *, before: datetime, limit: int) -> int:
        """Fold the entries dated before ``before`` whose runs are done with them into ``n``
        (docs/storage.md "Kept counts on MongoDB"), at most ``limit`` counts; returns the entries folded."""
        counts = self._counts()
        docs = await read_page(counts.find({"pendingSince": {"$lt": before}}, {"pending": 1}), limit)
        if not docs:
            return 0
        due = [(d["_id"], name, value) for d in docs for name, value in d["pending"].items() if value["at"] < before]
        ids = list({value["run"] for _, _, value in due})
        found = await self._runs().find({"_id": {"$in": ids}}, {MARKER: 1, QUEUE_MARKER: 1}).to_list()
        present = {d["_id"]: d for d in found}
        flagged = await hinted(
            self._events().find({"runId": {"$in": ids}, f"{EVENT_MARKER}.at": {"$exists": True}}, {"runId": 1}),
            "events_counts_pending",
        )
        unsettled = {e["runId"] for e in flagged}  # ``record_removals`` may write their ``d`` entry again
        folds: dict[str, list[UpdateOne]] = {}
        folded = 0
        for count_id, name, value in due:
            run = present.get(value["run"])
            if name.startswith("i"):
                done = run is None or added_at(run) is None
            elif name.startswith("m"):  # written again while its run or its event still carries it
                moves = {} if run is None else (run.get(QUEUE_MARKER) or {}).get("moves") or {}
                done = value["m"] not in moves and value["run"] not in unsettled
            else:
                done = run is None and value["run"] not in unsettled
            if done:
                path = f"pending.{name}"
                change = {"$inc": {"n": weight(name, value)}, "$unset": {path: ""}}
                folds.setdefault(_agent(count_id), []).append(
                    UpdateOne({"_id": count_id, path: {"$exists": True}}, change)
                )
                folded += 1
        for doc in docs:  # a count left with no entry no longer needs the sweeper
            op = UpdateOne({"_id": doc["_id"], "pending": {}}, {"$unset": {"pendingSince": ""}})
            folds.setdefault(_agent(doc["_id"]), []).append(op)
        for agent_id, ops in folds.items():
            async with self._locked(agent_id):
                await bulk_write(counts, ops, ordered=True)
        return folded

    async def _create(self, keys: Sequence[str]) -> None:
        """Make the counts ``keys`` that do not exist yet (``n`` 0, no entry), by inserts: one that
        exists already refuses the insert (its unique ``_id``), and is kept. Never by upserts:
        FerretDB 2.5 on DocumentDB let concurrent upserts of one missing ``_id`` each insert it,
        the later ones replacing the first with its entries."""
        try:
            await self._counts().insert_many([new_count(k) for k in keys], ordered=False)
        except BulkWriteError as exc:
            if any(error.get("code") != 11000 for error in exc.details.get("writeErrors", [])):
                raise


def _run_of(event: Document, agent_id: str) -> Document:
    """The fields of a finished run that its counts are of, from its ``completed`` event's marker."""
    marker = event[EVENT_MARKER]
    return {
        "_id": event["runId"],
        "agentId": agent_id,
        "threadId": marker["threadId"],
        "resourceId": marker["resourceId"],
        QUEUE_MARKER: {"moves": marker.get("moves") or {}},
    }


def _finished(run: Document) -> bool:
    """Whether snapshot ``run`` records its ``completed`` event (so it is no longer listed: ``NOT_FINISHED``)."""
    return any(event.get("type") == "completed" for event in run.get("pendingEvents") or [])


def pending_total(doc: Document) -> int:
    """What count ``doc``'s entries add to its ``n`` (``weight``)."""
    return sum(weight(name, value) for name, value in (doc.get("pending") or {}).items())


__all__ = [
    "EQUALITY_FIELDS",
    "EVENT_MARKER",
    "MARKER",
    "QUEUE_MARKER",
    "KeptCounts",
    "added_at",
    "entry",
    "filter_keys",
    "inserted_moves",
    "key",
    "moved",
    "moves_of",
    "new_count",
    "pending_total",
    "queue_key",
    "queue_scope",
    "removed_at",
    "run_keys",
    "waiting_questions",
    "with_run_keys",
]
