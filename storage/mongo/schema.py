"""The MongoDB store's collections, their indexes, its schema version and its backfills
(docs/storage.md "Collections and indexes", "Schema versions"): what ``MongoSnapshotStore.open()``
creates, checks and fills in."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from pymongo import ASCENDING, DESCENDING, UpdateOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError, OperationFailure

from .._query import normalized_filter
from .._run_lock import RunWriteLocks
from ..documents import SCHEMA_VERSION
from ..protocol import RunFilter
from ..rules import FINISHING_EVENTS
from .conditions import merged, no_value
from .counts import EVENT_MARKER, MARKER, QUEUE_MARKER, key, new_count, queue_key
from .mapping import LAST_PLACE, NOT_FINISHED, UNDATED_FROM, bulk_write, queue_at
from .reachability import UNAVAILABLE_CODES

Document = dict[str, Any]
logger = logging.getLogger(__name__)

RUNS = "run_snapshots"
HISTORIES = "run_histories"
LARGE_HISTORIES = "run_histories_large"
"""The GridFS bucket of histories over the inline limit (collections ``.files`` and ``.chunks``)."""
EVENTS = "run_events"
KEYS = "idempotency_keys"
LOCKS = "run_write_locks"
DELIVERIES = "webhook_deliveries"
CURSORS = "webhook_cursors"
UPDATES = "run_updates"
COUNTS = "run_counts"
META = "runsgate_meta"

COLLECTIONS = (
    RUNS,
    HISTORIES,
    EVENTS,
    KEYS,
    LOCKS,
    DELIVERIES,
    CURSORS,
    UPDATES,
    COUNTS,
    f"{LARGE_HISTORIES}.files",
    f"{LARGE_HISTORIES}.chunks",
)
"""Every collection of runs, their trail and their deliveries (``drop_all``; ``runsgate_meta`` stays)."""

LISTING_INDEXES: list[tuple[str, list[tuple[str, int]]]] = [
    ("agent_created", [("agentId", ASCENDING), ("createdAt", DESCENDING), ("_id", DESCENDING)]),
    (
        "agent_thread_created",
        [("agentId", ASCENDING), ("threadId", ASCENDING), ("createdAt", DESCENDING), ("_id", DESCENDING)],
    ),
    (
        "agent_resource_created",
        [("agentId", ASCENDING), ("resourceId", ASCENDING), ("createdAt", DESCENDING), ("_id", DESCENDING)],
    ),
    (
        "agent_thread_resource_created",
        [
            ("agentId", ASCENDING),
            ("threadId", ASCENDING),
            ("resourceId", ASCENDING),
            ("createdAt", DESCENDING),
            ("_id", DESCENDING),
        ],
    ),
]
"""One index per filter combination, each in listing order after its equality fields, so a
page is an index walk whatever the number of stored runs (docs/storage.md "Collections and indexes")."""

COMPOSITE_TERM: Document = {"enableCompositeTerm": True}
"""DocumentDB's index option (``createIndexes``' ``storageEngine``, which FerretDB 2 passes
through) for one index term per document holding every key in order: a range of ``createdAt``
after the equality fields is then one range of terms, not every term of the agent's runs
(docs/storage.md "Composite-term listing indexes")."""

COMPOSITE_LISTING_INDEXES: list[tuple[str, list[tuple[str, int]]]] = [
    (f"{name}_composite", keys) for name, keys in LISTING_INDEXES
]
"""``LISTING_INDEXES`` with ``COMPOSITE_TERM``, on DocumentDB: new names, since an index of one
name with other options would fail the open; ``create_indexes`` then drops the plain ones."""

EVENT_FEED_INDEX = [("agentId", ASCENDING), ("_id", ASCENDING)]
"""The event feed's keyset walk (``list_events_after``): an agent's events in ``_id`` (creation) order."""

EXPIRY_ORDER = [("expiresAt", ASCENDING), ("_id", ASCENDING)]
"""The sweeper's expiry pass walks index ``expiring`` (``list_expired_runs``), earliest deadline first."""
REVIEW_QUEUE_ORDER = [("queueAt", ASCENDING), ("suspendedAt", ASCENDING), ("_id", ASCENDING)]
"""The reviewers' queue walks index ``REVIEW_QUEUE_INDEX`` (``list_review_runs``) in this order, one
range: ``queueAt`` (``mapping.queue_at``) puts the runs with a deadline first, earliest first, then
those without one, oldest first."""
REVIEW_QUEUE_KEYS = [*REVIEW_QUEUE_ORDER, ("agentId", ASCENDING), ("threadId", ASCENDING), ("resourceId", ASCENDING)]
"""Index ``REVIEW_QUEUE_INDEX``: the queue's order, then the fields a queue filter names by equality
(``QueueFilter``'s agents, thread, resources), which never change the order (``_id`` is unique): on
DocumentDB each field of an index is a term of its own, so a filtered page's window fetches only
the filter's runs; mongod checks them in the index before fetching."""
REVIEW_QUEUE_INDEX = "review_queue_filters"
"""A new name for new keys: a runsgate opening the database makes its indexes before it reads the
schema version, and would fail on a name holding other keys (``RETIRED_QUEUE_INDEXES``)."""
RETIRED_QUEUE_INDEXES = ("review_queue", "review_queue_at")
"""The queue's indexes of older versions, which ``create_indexes`` drops: ``review_queue`` (on
``expiresAt``, before schema version 7), ``review_queue_at`` (``REVIEW_QUEUE_ORDER`` alone)."""

REVIEW_CANDIDATE_INDEXES: list[tuple[str, list[tuple[str, int]]]] = [
    ("review_approver", [("toolCalls.approvals.decidedBy", ASCENDING), ("_id", ASCENDING)]),
    ("review_starter", [("startedBy", ASCENDING), ("_id", ASCENDING)]),
    ("review_tool", [("toolCalls.toolName", ASCENDING), ("_id", ASCENDING)]),
    ("review_claimed", [("toolCalls.reviewClaim.until", ASCENDING), ("_id", ASCENDING)]),
    ("review_escalated", [("toolCalls.escalated", ASCENDING), ("_id", ASCENDING)]),
]
"""The queue total's candidate runs (``list_review_candidates``), one index per part of
``ReviewCandidates`` in ``_id`` order (multikey through ``toolCalls``)."""

AGENT_EXPIRING_INDEX = [("agentId", ASCENDING), ("expiresAt", ASCENDING)]
"""The ``expiresBefore`` listing filter: an agent's runs by deadline."""

KEYS_FINISHED_INDEX = [("finishedAt", ASCENDING)]
"""Index ``keys_finished`` (sparse: a key in flight has no ``finishedAt``), the walk of
``delete_expired_idempotency_keys``, oldest answer first."""

DELIVERIES_FINISHED_INDEX = [("finishedAt", ASCENDING)]
"""Index ``deliveries_finished``, the walk of ``delete_expired_webhook_deliveries``, oldest first
(a pending delivery's ``finishedAt`` is null: no bound matches it)."""

EVENTS_RETENTION_INDEX = [("retentionFrom", ASCENDING)]
"""Index ``events_retention`` (sparse: only finishing events have ``retentionFrom``), the walk of
``list_expired_events``, oldest first."""

INDEX_NOT_FOUND = 27
"""The server's code for an index that does not exist (``IndexNotFound``)."""

BACKFILL_VERSION = 5
"""The backfills this runsgate applies (``runsgate_meta`` document ``backfill``): 1 = the
``finishedAt`` of idempotency keys answered before it, 2 = the ``retentionFrom`` of finishing
events written before it (the time of the open), 3 = the kept counts of ``run_counts``
(``rebuild_counts``), 4 = the queue's kept counts there (``rebuild_queue_counts``), 5 = each run's
place in the queue, ``queueAt`` (``place_runs_in_queue``)."""

WAITING: Document = merged({"status": "suspended", "pendingCount": {"$gt": 0}}, no_value("parentRunId"), NOT_FINISHED)
"""The runs the reviewers' queue counts (``count_review_questions``): suspended with a pending
call, not a sub-run, not finished."""

BACKFILL_LEASE = 600.0
"""Seconds one process holds the backfill's lease (``run_write_locks`` ``backfill``): the others
opening the store meanwhile wait for it, so no writer of this version runs during a rebuild of the
counts; a lease left by a process that died lapses after this."""

BACKFILL_BATCH = 500
"""Events one write of backfill 2 dates, runs one write of backfill 5 places (one
single-document update each)."""

RUN_UPDATES_INDEX = [("agentId", ASCENDING), ("runId", ASCENDING), ("_id", ASCENDING)]
"""A run's update batches in ``_id`` order (``list_run_updates``)."""

LISTING_ORDER = [("createdAt", DESCENDING), ("_id", DESCENDING)]
REVERSE_ORDER = [("createdAt", ASCENDING), ("_id", ASCENDING)]


async def create_indexes(database: AsyncDatabase[Document], *, composite_terms: bool = False) -> bool:
    """Create every index of docs/storage.md "Collections and indexes" (one that exists is kept);
    whether the listing indexes are ``COMPOSITE_LISTING_INDEXES``.

    ``composite_terms`` (DocumentDB only: mongod refuses the option): the listing indexes are made
    with ``COMPOSITE_TERM`` and the plain ones dropped; a server refusing the option gets the
    plain ones (``LISTING_INDEXES``), as every other server does."""
    runs, events = database[RUNS], database[EVENTS]
    deliveries, updates = database[DELIVERIES], database[UPDATES]
    composite = composite_terms and await _create_composite_listing(runs)
    if not composite:
        for name, keys in LISTING_INDEXES:
            await runs.create_index(keys, name=name)
    await runs.create_index([("pendingCount", ASCENDING), ("updatedAt", ASCENDING)], name="stalled")
    await runs.create_index([("schemaVersion", DESCENDING)], name="schema_version")
    await runs.create_index(EXPIRY_ORDER, name="expiring")
    await runs.create_index(AGENT_EXPIRING_INDEX, name="agent_expiring")
    await runs.create_index(REVIEW_QUEUE_KEYS, name=REVIEW_QUEUE_INDEX)
    for retired in RETIRED_QUEUE_INDEXES:
        await _drop_index(runs, retired)
    for name, keys in REVIEW_CANDIDATE_INDEXES:
        await runs.create_index(keys, name=name)
    await runs.create_index([("pendingEvents.at", ASCENDING)], name="pending_events", sparse=True)
    await runs.create_index([(f"{MARKER}.since", ASCENDING)], name="counts_pending", sparse=True)
    await runs.create_index([(f"{QUEUE_MARKER}.since", ASCENDING)], name="questions_pending", sparse=True)
    await database[COUNTS].create_index([("pendingSince", ASCENDING)], name="counts_due", sparse=True)
    await database[COUNTS].create_index([("scope", ASCENDING)], name="queue_scope", sparse=True)
    await events.create_index([("agentId", ASCENDING), ("runId", ASCENDING), ("at", ASCENDING)], name="agent_run_at")
    await events.create_index(EVENT_FEED_INDEX, name="agent_event_order")
    await events.create_index(EVENTS_RETENTION_INDEX, name="events_retention", sparse=True)
    await events.create_index([(f"{EVENT_MARKER}.at", ASCENDING)], name="events_counts_pending", sparse=True)
    await deliveries.create_index([("status", ASCENDING), ("nextAttemptAt", ASCENDING)], name="deliveries_due")
    await deliveries.create_index([("status", ASCENDING), ("_id", DESCENDING)], name="deliveries_order")
    await deliveries.create_index(DELIVERIES_FINISHED_INDEX, name="deliveries_finished")
    await database[KEYS].create_index(KEYS_FINISHED_INDEX, name="keys_finished", sparse=True)
    await updates.create_index(RUN_UPDATES_INDEX, name="run_updates_order")
    await updates.create_index([("at", ASCENDING)], name="run_updates_written")
    return composite


async def _create_composite_listing(runs: AsyncCollection[Document]) -> bool:
    """Create ``COMPOSITE_LISTING_INDEXES`` and drop the plain listing indexes; False, with
    nothing dropped, when the server refuses ``COMPOSITE_TERM``."""
    for name, keys in COMPOSITE_LISTING_INDEXES:
        try:
            await runs.create_index(keys, name=name, storageEngine=COMPOSITE_TERM)
        except OperationFailure as exc:
            if exc.code in UNAVAILABLE_CODES:
                raise
            logger.warning("composite-term listing index %s refused (%s): plain listing indexes", name, exc)
            return False
    for name, _ in LISTING_INDEXES:
        await _drop_index(runs, name)
    return True


def listing_index(run_filter: RunFilter) -> str | None:
    """The composite-term listing index of ``run_filter``'s equality fields, which its pages
    read (a hint: DocumentDB's planner takes any index holding ``agentId``); ``None`` with
    ``expiresBefore`` (the planner's choice, ``agent_expiring``)."""
    f = normalized_filter(run_filter)
    if f.expires_before is not None:
        return None
    thread = f.thread_id is not None
    resource = f.resource_id is not None or f.resource_ids is not None
    fields = "thread_resource" if thread and resource else "thread" if thread else "resource" if resource else ""
    return f"agent_{fields}_created_composite" if fields else "agent_created_composite"


async def _drop_index(collection: AsyncCollection[Document], name: str) -> None:
    """Drop index ``name`` of ``collection`` if it exists (another process opening the store may
    drop it first)."""
    if not any(index["name"] == name for index in await (await collection.list_indexes()).to_list()):
        return
    try:
        await collection.drop_index(name)
    except OperationFailure as exc:
        if exc.code != INDEX_NOT_FOUND:
            raise


async def stored_schema_version(database: AsyncDatabase[Document]) -> int:
    """The store's schema version: one read of the ``runsgate_meta`` document ``schema``.

    A database written before that document existed has none: its snapshots are looked at
    once (through the ``schema_version`` index) and the document is written, so later starts
    read it alone, whatever the number of stored runs.
    """
    meta = await database[META].find_one({"_id": "schema"})
    if meta is not None:
        found = int(meta["version"])
        if found < SCHEMA_VERSION:  # the version only grows: once this one opened it, an older one refuses it
            await raise_schema_version(database[META], SCHEMA_VERSION)
        return found
    newer = await database[RUNS].find_one(
        {"schemaVersion": {"$gt": SCHEMA_VERSION}}, {"schemaVersion": 1}, sort=[("schemaVersion", DESCENDING)]
    )
    found = SCHEMA_VERSION if newer is None else int(newer["schemaVersion"])
    await raise_schema_version(database[META], found)
    return found


async def raise_schema_version(meta: AsyncCollection[Document], version: int) -> None:
    """Record in ``meta`` that the store holds documents of ``version`` (the stored version only grows)."""
    try:
        await meta.update_one({"_id": "schema"}, {"$max": {"version": version}}, upsert=True)
    except DuplicateKeyError:  # another process's upsert inserted it first (starts racing): update it
        await meta.update_one({"_id": "schema"}, {"$max": {"version": version}})


async def backfill(database: AsyncDatabase[Document], now: datetime) -> None:
    """Once per database (``runsgate_meta`` document ``backfill`` below ``BACKFILL_VERSION``),
    under the backfill's lease (``BACKFILL_LEASE``): give every answered idempotency key without a
    ``finishedAt`` the time ``now`` (UTC), so it expires a retention period after this open (keys
    in flight stay without one), every finishing event without a ``retentionFrom`` the time
    ``now`` too, set the listing's counts from the runs listed (``rebuild_counts``), the queue's
    from the runs waiting (``rebuild_queue_counts``) and each run's ``queueAt``
    (``place_runs_in_queue``); then record the version."""
    if await _backfilled(database) >= BACKFILL_VERSION:
        return
    leases = RunWriteLocks(lambda: database[LOCKS], lease=BACKFILL_LEASE, wait=2 * BACKFILL_LEASE)
    async with leases.hold("backfill"):
        await _backfill_held(database, now)


async def _backfilled(database: AsyncDatabase[Document]) -> int:
    meta = await database[META].find_one({"_id": "backfill"})
    return 0 if meta is None else int(meta["version"])


async def _backfill_held(database: AsyncDatabase[Document], now: datetime) -> None:
    done = await _backfilled(database)  # another process may have done it while this one waited
    if done >= BACKFILL_VERSION:
        return
    if done < 1:
        answered = [{field: {"$exists": True, "$not": {"$type": "null"}}} for field in ("result", "resultJson")]
        await database[KEYS].update_many(
            {"finishedAt": {"$exists": False}, "$or": answered}, {"$set": {"finishedAt": now}}
        )
    if done < 2:
        await _date_finishing_events(database[EVENTS], now)
    if done < 3:
        await rebuild_counts(database)
    if done < 4:
        await rebuild_queue_counts(database)
    await place_runs_in_queue(database)
    try:
        await database[META].update_one({"_id": "backfill"}, {"$max": {"version": BACKFILL_VERSION}}, upsert=True)
    except DuplicateKeyError:  # another process's upsert inserted it first
        await database[META].update_one({"_id": "backfill"}, {"$max": {"version": BACKFILL_VERSION}})


async def rebuild_counts(database: AsyncDatabase[Document]) -> None:
    """Set every listing count of ``run_counts`` from the runs listed (``NOT_FINISHED``): O(runs),
    once. The caller keeps other writers of this version away meanwhile (the backfill's lease)."""
    await database[COUNTS].delete_many({"scope": {"$exists": False}})
    await _count_groups(database, NOT_FINISHED, {"$sum": 1}, key)


async def rebuild_queue_counts(database: AsyncDatabase[Document]) -> None:
    """Set every queue count of ``run_counts`` from the ``pendingCount`` of the runs ``WAITING``
    matches, and clear their moves (``QUEUE_MARKER``), which that counts: O(runs), once, as
    ``rebuild_counts``."""
    await database[COUNTS].delete_many({"scope": {"$exists": True}})
    await database[RUNS].update_many({f"{QUEUE_MARKER}.since": {"$exists": True}}, {"$unset": {QUEUE_MARKER: ""}})
    await _count_groups(database, WAITING, {"$sum": "$pendingCount"}, queue_key)


async def place_runs_in_queue(database: AsyncDatabase[Document]) -> None:
    """Set ``queueAt`` (``mapping.queue_at``) on every run without one, O(runs), once: one
    ``update`` with an aggregation pipeline computing it where the server takes one (DocumentDB,
    MongoDB: 0.2 s for 10,000 runs), else (FerretDB 1.24) a walk of the runs without it,
    ``BACKFILL_BATCH`` runs a write (an unordered ``update`` command of single-document updates,
    each conditioned on the field still missing)."""
    runs = database[RUNS]
    unplaced: Document = {"queueAt": {"$exists": False}}
    shift = (UNDATED_FROM - datetime(1, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    deadline = {"$min": ["$expiresAt", UNDATED_FROM - timedelta(milliseconds=1)]}
    undated = {"$cond": [{"$eq": [{"$type": "$suspendedAt"}, "date"]}, {"$add": ["$suspendedAt", shift]}, LAST_PLACE]}
    place = {
        "$cond": [
            {"$gt": ["$pendingCount", 0]},
            {"$cond": [{"$eq": [{"$type": "$expiresAt"}, "date"]}, deadline, undated]},
            None,
        ]
    }
    try:
        await runs.update_many(unplaced, [{"$set": {"queueAt": place}}])
        return
    except OperationFailure as exc:
        if exc.code in UNAVAILABLE_CODES:
            raise
    batch: list[UpdateOne] = []
    fields = {"expiresAt": 1, "suspendedAt": 1, "pendingCount": 1}
    async for doc in runs.find(unplaced, fields, batch_size=BACKFILL_BATCH):
        pending = doc.get("pendingCount")
        at = queue_at(doc.get("expiresAt"), doc.get("suspendedAt"), pending if isinstance(pending, int) else 0)
        batch.append(UpdateOne({"_id": doc["_id"], **unplaced}, {"$set": {"queueAt": at}}))
        if len(batch) >= BACKFILL_BATCH:
            await bulk_write(runs, batch, ordered=False)
            batch = []
    if batch:
        await bulk_write(runs, batch, ordered=False)


async def _count_groups(database: AsyncDatabase[Document], match: Document, total: Document, name: Any) -> None:
    """Insert a count (``name(agent, thread, resource)``) of ``total`` summed over the runs ``match``
    selects for each filter combination they belong to (``counts.run_keys``)."""
    text = {"$type": "string"}
    scopes: list[tuple[Document, Document]] = [
        ({}, {"a": "$agentId"}),
        ({"threadId": text}, {"a": "$agentId", "t": "$threadId"}),
        ({"resourceId": text}, {"a": "$agentId", "r": "$resourceId"}),
        ({"threadId": text, "resourceId": text}, {"a": "$agentId", "t": "$threadId", "r": "$resourceId"}),
    ]
    for scope, group in scopes:
        pipeline = [{"$match": merged(match, scope)}, {"$group": {"_id": group, "n": total}}]
        batch: list[Document] = []
        async for found in await database[RUNS].aggregate(pipeline):
            g = found["_id"]
            batch.append({**new_count(name(g["a"], g.get("t"), g.get("r"))), "n": found["n"]})
            if len(batch) >= 1000:
                await database[COUNTS].insert_many(batch)
                batch = []
        if batch:
            await database[COUNTS].insert_many(batch)


async def _date_finishing_events(events: AsyncCollection[Document], now: datetime) -> None:
    """Set ``retentionFrom`` = ``now`` on each finishing event without one, ``BACKFILL_BATCH`` a
    write (one ``update_many`` by ``_id``, each document its own single-document update)."""
    undated = {"type": {"$in": sorted(FINISHING_EVENTS)}, "retentionFrom": {"$exists": False}}
    while True:
        found = await events.find(undated, {"_id": 1}).limit(BACKFILL_BATCH).to_list()
        if not found:
            return
        ids = [doc["_id"] for doc in found]
        await events.update_many(
            {"_id": {"$in": ids}, "retentionFrom": {"$exists": False}}, {"$set": {"retentionFrom": now}}
        )


__all__ = [
    "AGENT_EXPIRING_INDEX",
    "BACKFILL_LEASE",
    "BACKFILL_VERSION",
    "COLLECTIONS",
    "COMPOSITE_LISTING_INDEXES",
    "COMPOSITE_TERM",
    "COUNTS",
    "DELIVERIES_FINISHED_INDEX",
    "EVENTS_RETENTION_INDEX",
    "EVENT_FEED_INDEX",
    "EXPIRY_ORDER",
    "KEYS_FINISHED_INDEX",
    "LISTING_INDEXES",
    "LISTING_ORDER",
    "RETIRED_QUEUE_INDEXES",
    "REVERSE_ORDER",
    "REVIEW_CANDIDATE_INDEXES",
    "REVIEW_QUEUE_INDEX",
    "REVIEW_QUEUE_KEYS",
    "REVIEW_QUEUE_ORDER",
    "RUN_UPDATES_INDEX",
    "WAITING",
    "backfill",
    "create_indexes",
    "listing_index",
    "place_runs_in_queue",
    "raise_schema_version",
    "rebuild_counts",
    "rebuild_queue_counts",
    "stored_schema_version",
]
