"""Documents of the MongoDB store as stored and as read (``stored_json``), listing filters and
pages: the mapping between ``storage.documents`` and what MongoDB holds (docs/storage.md)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from pymongo import DeleteMany, DeleteOne, UpdateMany, UpdateOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.cursor import AsyncCursor
from pymongo.errors import OperationFailure

from .._query import normalized_filter
from ..documents import EventDocument, SnapshotDocument
from ..protocol import RunFilter, SortKey
from ..rules import earliest_deadline, pending_count
from ..stored_json import EVENT_FIELDS, decode, decode_snapshot, encode_snapshot

Document = dict[str, Any]


UNDATED_FROM = datetime(5000, 1, 1, tzinfo=UTC)
"""Where the runs without a deadline start in ``queueAt`` (``queue_at``): after every deadline."""
_YEAR_ONE = datetime(1, 1, 1, tzinfo=UTC)
_LAST_DEADLINE = UNDATED_FROM - timedelta(milliseconds=1)
LAST_PLACE = datetime.max.replace(microsecond=999000, tzinfo=UTC)
"""The last place in the queue (``queue_at``)."""


def queue_at(expires_at: Any, suspended_at: Any, pending: int) -> datetime | None:
    """A run's ``queueAt``, its place in the reviewers' queue, so that (``queueAt``,
    ``suspendedAt``, ``_id``) is the queue's order: the deadline ``expires_at`` (UTC), else
    ``UNDATED_FROM`` plus the time from year 1 to ``suspended_at`` (year 5000 to 9999, oldest
    first); ``None`` when no call is ``pending`` (no queue holds the run). A deadline from year 5000
    on (a rule allows a century) counts as the last millisecond before; a place past year 9999, or
    of a run whose stored times are no dates (written by hand or an older version), as its last
    millisecond: such a run stays listed, last. Millisecond shifts of whole-millisecond dates:
    BSON keeps the order."""
    if pending <= 0:
        return None
    if isinstance(expires_at, datetime):
        return min(as_utc(expires_at), _LAST_DEADLINE)
    if not isinstance(suspended_at, datetime) or expires_at is not None:
        return LAST_PLACE
    try:
        return UNDATED_FROM + (as_utc(suspended_at) - _YEAR_ONE)
    except OverflowError:
        return LAST_PLACE


def as_utc(at: datetime) -> datetime:
    """``at``, a naive datetime read as UTC (stored times are UTC)."""
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)  # stored times are UTC


def stored_snapshot(snapshot: SnapshotDocument) -> Document:
    """``snapshot`` as stored: its JSON encoded (``stored_json``), ``expiresAt`` set, null when
    no pending call has a deadline (``rules.earliest_deadline``), and ``queueAt`` (``queue_at``)."""
    calls = snapshot["toolCalls"]
    deadline = earliest_deadline(calls)
    place = queue_at(deadline, snapshot["suspendedAt"], pending_count(calls))
    return {**encode_snapshot(snapshot), "expiresAt": deadline, "queueAt": place}


NOT_FINISHED: Document = {"$nor": [{"pendingEvents.type": "completed"}]}
"""Snapshots whose ``completed`` event is not pending: one that is belongs to a finished run, never
read, listed, counted, claimed or taken over again, only completed by the sweeper
(``complete_pending_events``; this store's own condition: only it records events inside the
snapshot, the other stores delete a finished run with its event). A ``$nor``, not ``$ne``:
FerretDB 1.24 matches ``{"pendingEvents.type": {"$ne": "completed"}}`` on a snapshot whose
``completed`` event follows another pending one. ``conditions.merged`` joins ``$nor`` lists."""


STORE_FIELDS: Document = {"pendingEvents": 0, "countsPending": 0, "questionsPending": 0}
"""The projection leaving out the fields this store keeps in a snapshot for itself (its events
pending, ``counts.MARKER``, ``counts.QUEUE_MARKER``): reads of runs give the snapshot without them."""


def read_snapshot(doc: Document | None) -> SnapshotDocument | None:
    """A stored snapshot as read: its tool- and client-defined JSON decoded (``stored_json``),
    ``expiresAt`` dropped when null (stored as null so the index and ``$lt`` see no deadline), and
    the store's own ``queueAt`` dropped."""
    if doc is None:
        return None
    doc.pop("queueAt", None)
    if doc.get("expiresAt", 0) is None:
        del doc["expiresAt"]
    return cast(SnapshotDocument, decode_snapshot(doc))


def read_snapshots(docs: list[Document]) -> list[SnapshotDocument]:
    return [cast(SnapshotDocument, read_snapshot(doc)) for doc in docs]


def read_events(docs: list[Document]) -> list[EventDocument]:
    """Stored events as read, without the store's own ``countsPending`` (``counts.EVENT_MARKER``)."""
    for doc in docs:
        doc.pop("countsPending", None)
    return [cast(EventDocument, decode(doc, EVENT_FIELDS)) for doc in docs]


def keyset(key: SortKey, op: str) -> Document:
    """Runs after (``$lt``) or before (``$gt``) ``key`` in listing order: one range of
    ``createdAt`` up to (from) the key's, less the runs of that instant on the key's side of
    its ``_id``. Not an ``$or`` with an ``_id`` range: DocumentDB makes that range an index
    condition, a scan of every run on one side of a random id (docs/storage.md "Windows instead")."""
    inclusive, other_side = ("$lte", "$gte") if op == "$lt" else ("$gte", "$lte")
    return {
        "createdAt": {inclusive: key.created_at},
        "$nor": [{"createdAt": key.created_at, "_id": {other_side: key.run_id}}],
    }


def page(cursor: AsyncCursor[Document], limit: int) -> AsyncCursor[Document]:
    """``cursor`` limited to ``limit`` documents in one single batch (``singleBatch``, a
    ``batchSize`` of ``limit``): one round trip, no ``getMore``, no cursor left on the server.
    FerretDB 2.5 serves a sorted, limited or skipped ``find`` that is not a single batch from a
    persisted cursor: it takes the PostgreSQL connection out of its pool for it and closes it once
    read, and the next command waits for a new one (docs/storage.md "What a page costs"). The
    server still cuts a reply at 16 MiB: read pages through ``read_page``."""
    return cursor.limit(-limit).batch_size(limit)


PAGE_RESTARTS = 2
"""Times ``read_page`` reads a page again from its start when the document a read was to start
with has moved (written or deleted meanwhile), before it takes the page as it comes."""


async def read_page(cursor: AsyncCursor[Document], limit: int, *, skip: int = 0, whole: bool = True) -> list[Document]:
    """The first ``limit`` documents of ``cursor`` (a ``find`` not yet read, with no skip or
    limit of its own) after the first ``skip``, each read a single batch (``page``). A reply
    shorter than asked ends the page only once a read from after it brings nothing new: the server
    cuts a reply at 16 MiB (and sends at least one document), so a short reply of big documents
    is not the end. A full page is one round trip, a short one two. Each read after the first
    starts at the last document read (by ``_id``) and takes what follows it: a document written
    or deleted before it meanwhile moves none in or out of the page (a page of documents without
    ``_id`` reads on by skip). A read that does not hold that document (it was deleted, or moved
    past the read) reads the page again from its start, ``PAGE_RESTARTS`` times at most, then
    takes the documents not read before. ``whole`` False: one read, possibly short (a caller that
    reads wider after a short page anyway: ``windows``)."""
    docs: list[Document] = []
    seen: set[str] = set()
    at, anchor, restarts = skip, None, 0  # where the next read starts, the key it must start with
    while len(docs) < limit:
        batch = await page(cursor.clone().skip(at), limit - len(docs) + (anchor is not None)).to_list()
        keys = [_key(doc) for doc in batch]
        after = batch
        if anchor is not None:
            if anchor in keys:
                after = batch[keys.index(anchor) + 1 :]
            elif restarts < PAGE_RESTARTS:
                docs, seen, at, anchor, restarts = [], set(), skip, None, restarts + 1
                continue
        new = [doc for doc in after if _key(doc) is None or _key(doc) not in seen][: limit - len(docs)]
        seen.update(key for key in map(_key, new) if key is not None)
        docs.extend(new)
        if not new or not whole:
            break
        anchor = keys[-1]
        at += len(batch) - (anchor is not None)
    return docs


def _key(doc: Document) -> str | None:
    return repr(doc["_id"]) if "_id" in doc else None


async def hinted(
    cursor: AsyncCursor[Document], index: str, limit: int | None = None, *, skip: int = 0, whole: bool = True
) -> list[Document]:
    """``cursor``'s documents read through ``index``; without the hint when the server has no such
    index (a database whose collections were dropped under a running store: ``drop_all``).
    ``limit``: its first ``limit`` documents, as ``mapping.read_page`` reads them (``whole`` too);
    ``skip``: after the first ``skip`` (``cursor`` has no skip of its own)."""

    async def read(found: AsyncCursor[Document]) -> list[Document]:
        if limit is None:
            return await found.skip(skip).to_list()
        return await read_page(found, limit, skip=skip, whole=whole)

    try:
        return await read(cursor.clone().hint(index))
    except OperationFailure as exc:
        if not _no_such_index(exc):
            raise
        return await read(cursor)


async def hinted_count(collection: AsyncCollection[Document], query: Document, index: str) -> int:
    """``collection``'s documents matching ``query``, counted through ``index``; without the hint
    when the server has no such index, as ``hinted`` reads."""
    try:
        return await collection.count_documents(query, hint=index)
    except OperationFailure as exc:
        if not _no_such_index(exc):
            raise
        return await collection.count_documents(query)


def _no_such_index(exc: OperationFailure) -> bool:
    """Whether ``exc`` refuses a hint naming an index the collection does not have."""
    return "hint" in str(exc).lower()


def listing_query(agent_id: str, run_filter: RunFilter) -> Document:
    """The MongoDB filter for a listing and its count: equality fields first, then the inclusive
    date range; finished snapshots left out as ``get`` leaves them out (``NOT_FINISHED``)."""
    f = normalized_filter(run_filter)
    query: Document = {"agentId": agent_id, **NOT_FINISHED}
    if f.thread_id is not None:
        query["threadId"] = f.thread_id
    if f.resource_id is not None:
        query["resourceId"] = f.resource_id
    if f.resource_ids is not None:  # access restriction, inside the query so pages and counts respect it
        allowed: Document = {"$in": sorted(f.resource_ids)}
        query["resourceId"] = allowed if f.resource_id is None else {"$eq": f.resource_id, **allowed}
    created: Document = {}
    if f.from_date is not None:
        created["$gte"] = f.from_date
    if f.to_date is not None:
        created["$lte"] = f.to_date
    if created:
        query["createdAt"] = created
    if f.expires_before is not None:
        query["expiresAt"] = {"$lt": f.expires_before}  # null (no deadline) never matches
    return query


BULK_CHUNK = 50
"""Operations sent in one write command at most: FerretDB 1.24 never answers one of 100 or more
(its goroutines wait for a SQLite connection for good; 99 are answered at once)."""

WriteOp = UpdateOne | UpdateMany | DeleteOne | DeleteMany


async def bulk_write(
    collection: AsyncCollection[Document], ops: Sequence[WriteOp], *, ordered: bool
) -> tuple[int, int]:
    """``collection.bulk_write(ops)`` in commands of ``BULK_CHUNK`` operations, one after the other
    (``ordered``: each in order, and none after a failed one); ``(matched, deleted)`` in all."""
    matched = deleted = 0
    for start in range(0, len(ops), BULK_CHUNK):
        done = await collection.bulk_write(ops[start : start + BULK_CHUNK], ordered=ordered)
        matched, deleted = matched + done.matched_count, deleted + done.deleted_count
    return matched, deleted


__all__ = [
    "BULK_CHUNK",
    "LAST_PLACE",
    "PAGE_RESTARTS",
    "UNDATED_FROM",
    "as_utc",
    "bulk_write",
    "hinted",
    "hinted_count",
    "keyset",
    "listing_query",
    "page",
    "queue_at",
    "read_events",
    "read_page",
    "read_snapshot",
    "read_snapshots",
    "stored_snapshot",
]
