"""``MongoSnapshotStore``: suspended runs in MongoDB through PyMongo's async API (docs/storage.md).

One ``AsyncMongoClient`` per store, made by ``open()`` in the running event loop and closed by
``close()``; the database is the URI's path (default ``runsgate``). Collections: docs/storage.md
"Collections and indexes". Every write to a snapshot is a single-document conditional update,
made while holding the run's lease (``_run_lock``).
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from datetime import datetime
from typing import Any, cast

from gridfs.asynchronous import AsyncGridFSBucket
from gridfs.errors import NoFile
from pymongo import ASCENDING, DESCENDING, AsyncMongoClient, MongoClient, ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.cursor import AsyncCursor
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import (
    BulkWriteError,
    ConfigurationError,
    ConnectionFailure,
    DuplicateKeyError,
    OperationFailure,
)

from ._mongo_conditions import no_value
from ._query import normalized_filter
from ._run_lock import RunWriteLocks
from .documents import (
    SCHEMA_VERSION,
    ApprovalDocument,
    DecisionDocument,
    EventDocument,
    IdempotencyDocument,
    RunErrorDocument,
    RunUpdateBatchDocument,
    SnapshotDocument,
    ToolCallDocument,
    WebhookDeliveryDocument,
    WebhookDeliveryStatus,
)
from .protocol import DuplicateRunError, NewerSchemaError, RunFilter, SortKey, StoreUnavailableError, event_list
from .rules import earliest_deadline
from .stored_json import (
    DECISION_FIELDS,
    EVENT_FIELDS,
    IDEMPOTENCY_FIELDS,
    decode,
    decode_snapshot,
    encode,
    encode_snapshot,
    encode_tool_call,
)

Document = dict[str, Any]

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

EVENT_FEED_INDEX = [("agentId", ASCENDING), ("_id", ASCENDING)]
"""The event feed's keyset walk (``list_events_after``): an agent's events in ``_id`` (creation) order."""

EXPIRY_ORDER = [("expiresAt", ASCENDING), ("_id", ASCENDING)]
"""The sweeper's expiry pass walks index ``expiring`` (``list_expired_runs``), earliest deadline first."""

AGENT_EXPIRING_INDEX = [("agentId", ASCENDING), ("expiresAt", ASCENDING)]
"""The ``expiresBefore`` listing filter: an agent's runs by deadline."""

RUN_UPDATES_INDEX = [("agentId", ASCENDING), ("runId", ASCENDING), ("_id", ASCENDING)]
"""A run's update batches in ``_id`` order (``list_run_updates``)."""

LISTING_ORDER = [("createdAt", DESCENDING), ("_id", DESCENDING)]
REVERSE_ORDER = [("createdAt", ASCENDING), ("_id", ASCENDING)]


UNAVAILABLE_CODES = frozenset({1, 6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436})
"""Server error codes that mean "not now" rather than "not this request": InternalError (1), which
FerretDB 2 answers while it cannot reach its PostgreSQL, and those MongoDB's retryable-writes
specification retries (network errors, shutdown, primary changes) that PyMongo does not already
raise as a ``ConnectionFailure``."""


@asynccontextmanager
async def _reachable() -> AsyncIterator[None]:
    """Turn connection failures, and server errors of ``UNAVAILABLE_CODES``, into
    ``StoreUnavailableError`` (no internals leak upward)."""
    try:
        yield
    except ConnectionFailure as exc:
        raise StoreUnavailableError(f"MongoDB is unreachable: {type(exc).__name__}") from exc
    except OperationFailure as exc:
        if exc.code not in UNAVAILABLE_CODES:
            raise
        raise StoreUnavailableError(f"MongoDB could not serve the request now (error {exc.code})") from exc


_NOT_FINISHED: Document = {"pendingEvents.type": {"$ne": "completed"}}
"""Runs whose ``completed`` event is pending finished: never claimed or taken over again."""


def _key_lock(key_id: str) -> str:
    """The write-lock name of an idempotency key (``_run_lock``; apart from every run id)."""
    return f"idempotency-key:{key_id}"


def store_address(uri: str) -> str:
    """The hosts a MongoDB URI names, as ``host:port`` (comma-separated; 27017 when a
    ``mongodb://`` host has no port), without the credentials, database or options."""
    scheme, _, rest = uri.partition("://")
    hosts = rest.split("?", 1)[0].rsplit("@", 1)[-1].split("/", 1)[0]
    if scheme != "mongodb":
        return hosts
    return ",".join(host if re.search(r":\d+$", host) else f"{host}:27017" for host in hosts.split(","))


def check_reachable(uri: str, timeout: float) -> None:
    """Ping the server(s) of ``uri`` with a synchronous client, waiting at most ``timeout`` seconds
    for one to answer; for a start-up check, before the server's event loop runs.

    Raises:
        StoreUnavailableError: No server answered, or the ping was refused (e.g. bad
            credentials); the message is a short reason (``Connection refused``, ``no answer
            within 1.0 s``, the server's error message), never the URI.
        ValueError: PyMongo refuses the URI itself (e.g. ``Bad database name``).
    """
    try:
        client: MongoClient[Document] = MongoClient(
            uri, serverSelectionTimeoutMS=max(1, int(timeout * 1000)), appname="runsgate"
        )
        with client:
            client.admin.command("ping")
    except ConnectionFailure as exc:
        found = re.search(r"\[Errno (-?\d+)\] ([^(,]*)", str(exc))
        if found is None:
            reason = f"no answer within {timeout:g} s"
        elif int(found[1]) > 0:
            reason = os.strerror(int(found[1]))
        else:
            reason = found[2].strip()
        raise StoreUnavailableError(reason) from exc
    except OperationFailure as exc:
        raise StoreUnavailableError(str((exc.details or {}).get("errmsg") or f"error {exc.code}")) from exc
    except ConfigurationError as exc:
        raise ValueError(str(exc)) from None


def _snapshot(doc: Document | None) -> SnapshotDocument | None:
    """A stored snapshot as read: its tool- and client-defined JSON decoded (``stored_json``), and
    ``expiresAt`` dropped when null (stored as null so the index and ``$lt`` see no deadline)."""
    if doc is None:
        return None
    if doc.get("expiresAt", 0) is None:
        del doc["expiresAt"]
    return cast(SnapshotDocument, decode_snapshot(doc))


def _snapshots(docs: list[Document]) -> list[SnapshotDocument]:
    return [cast(SnapshotDocument, _snapshot(doc)) for doc in docs]


def _events(docs: list[Document]) -> list[EventDocument]:
    return [cast(EventDocument, decode(doc, EVENT_FIELDS)) for doc in docs]


def _keyset(key: SortKey, op: str) -> Document:
    return {"$or": [{"createdAt": {op: key.created_at}}, {"createdAt": key.created_at, "_id": {op: key.run_id}}]}


def _page(cursor: AsyncCursor[Document], limit: int) -> AsyncCursor[Document]:
    """``cursor`` limited to ``limit`` documents, all in its first batch: one round trip, no
    ``getMore`` (a first batch holds 101 documents unless told; a second costs about 30 ms more on
    DocumentDB). Every read with a limit goes through here; a reply over 16 MB still splits."""
    return cursor.limit(limit).batch_size(limit)


def listing_query(agent_id: str, run_filter: RunFilter) -> Document:
    """The MongoDB filter for a listing: equality fields first, then the inclusive date range."""
    f = normalized_filter(run_filter)
    query: Document = {"agentId": agent_id}
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


def _undecided(agent_id: str, run_id: str, index: int, tool_call_id: str, question_id: str | None) -> Document:
    """The filter of a decision's (or an approval's) conditional update: the suspended run whose
    call at ``index`` is ``tool_call_id``, still waiting on ``question_id`` (``None``: a call
    without one, stored before calls had a ``questionId``), with no decision."""
    path = f"toolCalls.{index}"
    query: Document = {"_id": run_id, "agentId": agent_id, "status": "suspended", f"{path}.toolCallId": tool_call_id}
    if question_id is not None:
        query[f"{path}.questionId"] = question_id
        return {**query, **no_value(f"{path}.decision")}
    return {**query, **no_value(f"{path}.decision", f"{path}.questionId")}


def _deadline_once_decided(index: int) -> Callable[[Document], Document]:
    """The ``derive`` of a write deciding call ``index``: the run's ``expiresAt`` becomes the
    earliest deadline of its other pending calls (``None``: none has one)."""

    def derive(current: Document) -> Document:
        pending = [c for i, c in enumerate(current["toolCalls"]) if i != index and c.get("decision") is None]
        return {"expiresAt": min((c["expiresAt"] for c in pending if c.get("expiresAt")), default=None)}

    return derive


class MongoSnapshotStore:
    """``SnapshotStore`` on a MongoDB wire-protocol server (MongoDB 6+, FerretDB 2.5 on DocumentDB or
    FerretDB 1.24; every condition means the same on each, ``_mongo_conditions``).

    Args:
        uri: A ``mongodb://`` URI; its path names the database (default ``runsgate``).
        server_selection_timeout: Seconds to wait for a reachable server before an operation
            fails with ``StoreUnavailableError``.
        inline_history_limit: Compressed histories up to this many bytes are stored in one
            document; larger ones go to GridFS.
    """

    def __init__(
        self,
        uri: str,
        *,
        server_selection_timeout: float = 5.0,
        inline_history_limit: int = 8 * 1024 * 1024,
    ) -> None:
        self._uri = uri
        self._timeout_ms = int(server_selection_timeout * 1000)
        self._inline_history_limit = inline_history_limit
        self._client: AsyncMongoClient[Document] | None = None
        self._locks = RunWriteLocks(lambda: self.database["run_write_locks"])
        self.before_event: Callable[[Sequence[Mapping[str, Any]]], Awaitable[None]] | None = None
        """Test-only: awaited with the events about to be appended, between a run's state change
        (which recorded them in ``pendingEvents``) and their append."""

    def _lock(self, run_id: str) -> AbstractAsyncContextManager[None]:
        """Exclusive right to write the run's snapshot, across processes (see ``_run_lock``)."""
        return self._locks.hold(run_id)

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def uri(self) -> str:
        """The ``mongodb://`` URI this store connects to."""
        return self._uri

    @property
    def database(self) -> AsyncDatabase[Document]:
        if self._client is None:
            raise RuntimeError("MongoSnapshotStore.open() was not called")
        return self._client.get_default_database(default="runsgate")

    @property
    def _runs(self) -> AsyncCollection[Document]:
        return self.database["run_snapshots"]

    @property
    def _histories(self) -> AsyncCollection[Document]:
        return self.database["run_histories"]

    @property
    def _events(self) -> AsyncCollection[Document]:
        return self.database["run_events"]

    @property
    def _keys(self) -> AsyncCollection[Document]:
        return self.database["idempotency_keys"]

    @property
    def _deliveries(self) -> AsyncCollection[Document]:
        return self.database["webhook_deliveries"]

    @property
    def _cursors(self) -> AsyncCollection[Document]:
        return self.database["webhook_cursors"]

    @property
    def _updates(self) -> AsyncCollection[Document]:
        return self.database["run_updates"]

    @property
    def _meta(self) -> AsyncCollection[Document]:
        return self.database["runsgate_meta"]

    @property
    def _large_histories(self) -> AsyncGridFSBucket:
        return AsyncGridFSBucket(self.database, bucket_name="run_histories_large")

    async def open(self) -> None:
        """Create the client and the indexes, then check the stored schema version.

        Raises:
            StoreUnavailableError: MongoDB cannot be reached.
            NewerSchemaError: A snapshot has a ``schemaVersion`` above ``SCHEMA_VERSION``.
        """
        self._client = AsyncMongoClient(
            self._uri, tz_aware=True, serverSelectionTimeoutMS=self._timeout_ms, appname="runsgate"
        )
        async with _reachable():
            for name, keys in LISTING_INDEXES:
                await self._runs.create_index(keys, name=name)
            await self._runs.create_index([("pendingCount", ASCENDING), ("updatedAt", ASCENDING)], name="stalled")
            await self._runs.create_index([("schemaVersion", DESCENDING)], name="schema_version")
            await self._runs.create_index(EXPIRY_ORDER, name="expiring")
            await self._runs.create_index(AGENT_EXPIRING_INDEX, name="agent_expiring")
            await self._runs.create_index([("pendingEvents.at", ASCENDING)], name="pending_events", sparse=True)
            await self._events.create_index(
                [("agentId", ASCENDING), ("runId", ASCENDING), ("at", ASCENDING)], name="agent_run_at"
            )
            await self._events.create_index(EVENT_FEED_INDEX, name="agent_event_order")
            await self._deliveries.create_index(
                [("status", ASCENDING), ("nextAttemptAt", ASCENDING)], name="deliveries_due"
            )
            await self._deliveries.create_index([("status", ASCENDING), ("_id", DESCENDING)], name="deliveries_order")
            await self._updates.create_index(RUN_UPDATES_INDEX, name="run_updates_order")
            await self._updates.create_index([("at", ASCENDING)], name="run_updates_written")
            found = await self._stored_schema_version()
        if found > SCHEMA_VERSION:
            await self.close()
            raise NewerSchemaError(found, SCHEMA_VERSION)

    async def _stored_schema_version(self) -> int:
        """The store's schema version: one read of the ``runsgate_meta`` document ``schema``.

        A database written before that document existed has none: its snapshots are looked at
        once (through the ``schema_version`` index) and the document is written, so later starts
        read it alone, whatever the number of stored runs.
        """
        meta = await self._meta.find_one({"_id": "schema"})
        if meta is not None:
            found = int(meta["version"])
            if found < SCHEMA_VERSION:  # the version only grows: once this one opened it, an older one refuses it
                await self._raise_schema_version(SCHEMA_VERSION)
            return found
        newer = await self._runs.find_one(
            {"schemaVersion": {"$gt": SCHEMA_VERSION}}, {"schemaVersion": 1}, sort=[("schemaVersion", DESCENDING)]
        )
        found = SCHEMA_VERSION if newer is None else int(newer["schemaVersion"])
        await self._raise_schema_version(found)
        return found

    async def _raise_schema_version(self, version: int) -> None:
        """Record that the store holds documents of ``version`` (the stored version only grows)."""
        try:
            await self._meta.update_one({"_id": "schema"}, {"$max": {"version": version}}, upsert=True)
        except DuplicateKeyError:  # another process's upsert inserted it first (starts racing): update it
            await self._meta.update_one({"_id": "schema"}, {"$max": {"version": version}})

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def ping(self) -> None:
        async with _reachable():
            await self.database.command("ping")

    # -- reading -------------------------------------------------------------------------------
    async def get(self, agent_id: str, run_id: str) -> SnapshotDocument | None:
        async with _reachable():
            doc = await self._runs.find_one({"_id": run_id, "agentId": agent_id})
        return _snapshot(doc)

    async def get_many(self, run_ids: Sequence[str]) -> list[SnapshotDocument]:
        if not run_ids:
            return []
        async with _reachable():
            ids = list(dict.fromkeys(run_ids))
            docs = await _page(self._runs.find({"_id": {"$in": ids}}), len(ids)).to_list()
        return _snapshots(docs)

    async def list_runs(
        self,
        agent_id: str,
        run_filter: RunFilter,
        *,
        limit: int | None = None,
        skip: int = 0,
        after: SortKey | None = None,
        before: SortKey | None = None,
        from_end: bool = False,
    ) -> list[SnapshotDocument]:
        query = listing_query(agent_id, run_filter)
        bounds = []
        if after is not None:
            bounds.append(_keyset(after, "$lt"))
        if before is not None:
            bounds.append(_keyset(before, "$gt"))
        if bounds:
            query["$and"] = bounds
        cursor = self._runs.find(query).sort(REVERSE_ORDER if from_end else LISTING_ORDER)
        if skip and not from_end:
            cursor = cursor.skip(skip)
        if limit is not None:
            cursor = _page(cursor, limit)
        async with _reachable():
            docs = await cursor.to_list()
        if from_end:
            docs.reverse()
        return _snapshots(docs)

    async def count_runs(self, agent_id: str, run_filter: RunFilter) -> int:
        async with _reachable():
            return await self._runs.count_documents(listing_query(agent_id, run_filter))

    async def load_history(self, agent_id: str, run_id: str) -> bytes | None:
        snapshot = await self.get(agent_id, run_id)
        if snapshot is None:
            return None
        return await self._read_history(snapshot["historyId"])

    async def _read_history(self, history_id: str) -> bytes | None:
        async with _reachable():
            doc = await self._histories.find_one({"_id": history_id})
            if doc is None:
                return None
            if doc.get("gridfs"):
                try:
                    stream = await self._large_histories.open_download_stream(history_id)
                except NoFile:
                    return None
                compressed = await stream.read()
            else:
                compressed = doc["data"]
        return zlib.decompress(compressed)

    # -- writing -------------------------------------------------------------------------------
    async def _write_history(self, history_id: str, run_id: str, history: bytes) -> None:
        compressed = zlib.compress(history, 6)
        async with _reachable():
            if len(compressed) > self._inline_history_limit:
                await self._large_histories.upload_from_stream_with_id(history_id, run_id, compressed)
                await self._histories.insert_one({"_id": history_id, "runId": run_id, "gridfs": True})
            else:
                await self._histories.insert_one({"_id": history_id, "runId": run_id, "data": compressed})

    async def _delete_history(self, history_id: str) -> None:
        async with _reachable():
            doc = await self._histories.find_one_and_delete({"_id": history_id})
            if doc is not None and doc.get("gridfs"):
                with suppress(NoFile):
                    await self._large_histories.delete(history_id)

    async def insert(
        self,
        snapshot: SnapshotDocument,
        history: bytes,
        *,
        event: EventDocument | Sequence[EventDocument] | None = None,
    ) -> None:
        events = event_list(event)
        if snapshot["schemaVersion"] > SCHEMA_VERSION:  # an older runsgate's next open() must refuse the store
            async with _reachable():
                await self._raise_schema_version(snapshot["schemaVersion"])
        await self._write_history(snapshot["historyId"], snapshot["_id"], history)
        stored = encode_snapshot(snapshot)
        stored["expiresAt"] = earliest_deadline(snapshot["toolCalls"])
        if events:  # recorded inside the snapshot first, then appended (_settle)
            stored["pendingEvents"] = [encode(one, EVENT_FIELDS) for one in events]
        try:
            async with _reachable():
                await self._runs.insert_one(stored)
        except DuplicateKeyError as exc:
            await self._delete_history(snapshot["historyId"])
            raise DuplicateRunError(f"run {snapshot['_id']!r} is already stored") from exc
        except Exception:  # refused (e.g. DocumentTooLarge): leave no history behind
            with suppress(Exception):
                await self._delete_history(snapshot["historyId"])
            raise
        if events:
            await self._settle(stored)

    async def insert_many(self, snapshots: Sequence[tuple[SnapshotDocument, bytes]]) -> None:
        """Bulk insert (data generator): all histories (inline size only), then all snapshots."""
        if not snapshots:
            return
        histories = [{"_id": s["historyId"], "runId": s["_id"], "data": zlib.compress(h, 6)} for s, h in snapshots]
        newest = max(s["schemaVersion"] for s, _ in snapshots)
        try:
            async with _reachable():
                if newest > SCHEMA_VERSION:  # first, so an older runsgate refuses the store even if this fails
                    await self._raise_schema_version(newest)
                await self._histories.insert_many(histories, ordered=False)
                await self._runs.insert_many(
                    [{**encode_snapshot(s), "expiresAt": earliest_deadline(s["toolCalls"])} for s, _ in snapshots],
                    ordered=False,
                )
        except BulkWriteError as exc:
            raise DuplicateRunError(f"bulk insert failed: {exc.details.get('writeErrors', [])[:1]}") from exc

    async def _update(
        self,
        run_id: str,
        query: Document,
        update: Document,
        derive: Callable[[Document], Document] | None = None,
    ) -> SnapshotDocument | None:
        """One conditional update under the run's lease. With ``derive``, the matching document is
        read first (still under the lease) and ``derive(doc)`` adds to the update's ``$set``
        (fields computed from the whole document, such as ``expiresAt``); the update is then
        conditioned on the ``version`` read too."""
        async with _reachable(), self._lock(run_id):
            if derive is not None:
                current = await self._runs.find_one(query)
                if current is None:
                    return None
                query = {**query, "version": current["version"]}
                update = {**update, "$set": {**update.get("$set", {}), **derive(current)}}
            doc = await self._runs.find_one_and_update(query, update, return_document=ReturnDocument.AFTER)
        return _snapshot(doc)

    async def _update_then_append(
        self,
        event: EventDocument | Sequence[EventDocument] | None,
        run_id: str,
        query: Document,
        update: Document,
        derive: Callable[[Document], Document] | None = None,
        preceding_events: Sequence[EventDocument] = (),
    ) -> SnapshotDocument | None:
        """``_update`` with ``event`` (one or several, after ``preceding_events``) recorded inside
        the snapshot (``pendingEvents``) by the same single-document write, then appended to
        ``run_events`` (``_settle``)."""
        events = [*preceding_events, *event_list(event)]
        if events:
            pushed = {"$each": [encode(one, EVENT_FIELDS) for one in events]}
            update = {**update, "$push": {**update.get("$push", {}), "pendingEvents": pushed}}
        doc = await self._update(run_id, query, update, derive)
        if doc is not None and events:
            await self._settle(cast(Document, doc))
        return doc

    async def _settle(self, doc: Document) -> None:
        """Append every event pending in the snapshot ``doc`` (as just written) to ``run_events``,
        ignoring the ones already there (same ``_id``), then clear ``pendingEvents`` unless the
        run was written again since (that writer settles them). ``doc`` is returned without the
        field. ``before_event`` runs first (tests inject a crash there)."""
        pending = doc.pop("pendingEvents", None) or []
        if self.before_event is not None:
            await self.before_event(pending)
        await self._append_each(pending)
        async with _reachable(), self._lock(doc["_id"]):
            await self._runs.update_one(
                {"_id": doc["_id"], "version": doc["version"]}, {"$unset": {"pendingEvents": ""}}
            )

    async def _append_each(self, events: Sequence[Document]) -> None:
        for event in events:
            try:
                async with _reachable():
                    await self._events.insert_one(event)
            except DuplicateKeyError:
                pass  # appended before (by the writer, or by an earlier recovery)

    async def complete_pending_events(self, *, before: datetime, limit: int) -> int:
        """Append the events left inside snapshots by a process that died between a write and its
        append (``pendingEvents`` older than ``before``), and finish what they record: a run
        whose ``completed`` event was pending is deleted with its history. Returns how many
        snapshots were completed (``pending_events`` index)."""
        async with _reachable():
            fields = {"pendingEvents": 1, "historyId": 1, "version": 1}
            docs = await _page(self._runs.find({"pendingEvents.at": {"$lt": before}}, fields), limit).to_list()
        for doc in docs:
            events = doc["pendingEvents"]
            await self._append_each(events)
            completed = [e["_id"] for e in events if e["type"] == "completed"]
            async with _reachable(), self._lock(doc["_id"]):
                if completed:
                    gone = await self._runs.find_one_and_delete({"_id": doc["_id"], "pendingEvents._id": completed[0]})
                else:
                    gone = None
                    await self._runs.update_one(
                        {"_id": doc["_id"], "version": doc["version"]}, {"$unset": {"pendingEvents": ""}}
                    )
            if gone is not None:
                await self._delete_history(gone["historyId"])
        return len(docs)

    async def record_decision(
        self,
        agent_id: str,
        run_id: str,
        *,
        index: int,
        tool_call_id: str,
        question_id: str | None = None,
        decision: DecisionDocument,
        now: datetime,
        event: EventDocument | None = None,
        preceding_events: Sequence[EventDocument] = (),
    ) -> SnapshotDocument | None:
        path = f"toolCalls.{index}"
        return await self._update_then_append(
            event,
            run_id,
            _undecided(agent_id, run_id, index, tool_call_id, question_id),
            {
                "$set": {f"{path}.decision": encode(decision, DECISION_FIELDS), "updatedAt": now},
                "$inc": {"pendingCount": -1, "version": 1},
            },
            _deadline_once_decided(index),
            preceding_events,
        )

    async def record_approval(
        self,
        agent_id: str,
        run_id: str,
        *,
        index: int,
        tool_call_id: str,
        question_id: str | None = None,
        approval: ApprovalDocument,
        approvals_before: int,
        decision: DecisionDocument | None,
        now: datetime,
        event: EventDocument | Sequence[EventDocument] | None = None,
    ) -> SnapshotDocument | None:
        path = f"toolCalls.{index}"
        # exactly ``approvals_before`` approvals: the one at that position is missing (so is the
        # whole list when there is none) and, unless none are expected, the one before it exists
        count: Document = {f"{path}.approvals.{approvals_before}": {"$exists": False}}
        if approvals_before > 0:
            count[f"{path}.approvals.{approvals_before - 1}"] = {"$exists": True}
        changes: Document = {"updatedAt": now}
        if decision is not None:
            changes[f"{path}.decision"] = encode(decision, DECISION_FIELDS)
        return await self._update_then_append(
            event,
            run_id,
            {**_undecided(agent_id, run_id, index, tool_call_id, question_id), **count},
            {
                "$set": changes,
                "$push": {f"{path}.approvals": dict(approval)},
                "$inc": {"pendingCount": 0 if decision is None else -1, "version": 1},
            },
            None if decision is None else _deadline_once_decided(index),
        )

    async def claim(
        self,
        agent_id: str,
        run_id: str,
        *,
        by: str,
        until: datetime,
        now: datetime,
        events: Sequence[EventDocument] = (),
        version: int | None = None,
    ) -> SnapshotDocument | None:
        return await self._update_then_append(
            events,
            run_id,
            {
                "_id": run_id,
                "agentId": agent_id,
                "$or": [
                    {"status": "suspended", "pendingCount": 0},
                    {"status": "resuming", "claim.until": {"$lt": now}},
                ],
                **_NOT_FINISHED,
                **({} if version is None else {"version": version}),
            },
            {
                "$set": {"status": "resuming", "claim": {"by": by, "until": until}, "updatedAt": now},
                "$inc": {"version": 1},
            },
        )

    @staticmethod
    def _held(agent_id: str, run_id: str, by: str) -> Document:
        return {"_id": run_id, "agentId": agent_id, "status": "resuming", "claim.by": by}

    async def renew_claim(self, agent_id: str, run_id: str, *, by: str, until: datetime) -> bool:
        held = self._held(agent_id, run_id, by)
        async with _reachable(), self._lock(run_id):
            result = await self._runs.update_one(held, {"$set": {"claim.until": until}})
        return result.matched_count == 1

    async def replace_claimed(
        self,
        agent_id: str,
        run_id: str,
        *,
        by: str,
        tool_calls: list[ToolCallDocument],
        history: bytes,
        history_id: str,
        now: datetime,
        event: EventDocument | Sequence[EventDocument] | None = None,
    ) -> SnapshotDocument | None:
        changes: Document = {
            "toolCalls": [encode_tool_call(c) for c in tool_calls],
            "pendingCount": sum(1 for c in tool_calls if c["decision"] is None),
            "status": "suspended",
            "claim": None,
            "lastError": None,
            "suspendedAt": now,
            "updatedAt": now,
            "expiresAt": earliest_deadline(tool_calls),
        }
        return await self._update_claimed_with_history(agent_id, run_id, by, changes, history, history_id, event)

    async def _update_claimed_with_history(
        self,
        agent_id: str,
        run_id: str,
        by: str,
        changes: Document,
        history: bytes,
        history_id: str,
        event: EventDocument | Sequence[EventDocument] | None,
    ) -> SnapshotDocument | None:
        """Set ``changes`` and point the snapshot to a new history, only while ``by`` holds the claim.

        The history is written under its new id first, so a lost claim never overwrites the one
        another instance relies on; then whichever history the snapshot no longer points to is
        deleted (never the live one).
        """
        async with _reachable():
            current = await self._runs.find_one(self._held(agent_id, run_id, by), {"historyId": 1})
        if current is None:
            return None
        await self._write_history(history_id, run_id, history)
        doc = await self._update_then_append(
            event,
            run_id,
            self._held(agent_id, run_id, by),
            {"$set": {**changes, "historyId": history_id}, "$inc": {"version": 1}},
        )
        await self._delete_history(current["historyId"] if doc is not None else history_id)
        return doc

    async def delete_claimed(self, agent_id: str, run_id: str, *, by: str, event: EventDocument | None = None) -> bool:
        """With ``event``: recorded inside the snapshot first (still under the claim), appended,
        then the snapshot deleted. A process dying in between leaves a snapshot that is never
        claimed or listed as stalled again, and that ``complete_pending_events`` deletes after
        appending the event."""
        held = self._held(agent_id, run_id, by)
        if event is not None:
            marked = await self._update(run_id, held, {"$push": {"pendingEvents": encode(event, EVENT_FIELDS)}})
            if marked is None:
                return False
            pending = cast(Document, marked).get("pendingEvents") or []
            if self.before_event is not None:
                await self.before_event(pending)
            await self._append_each(pending)
        async with _reachable(), self._lock(run_id):
            doc = await self._runs.find_one_and_delete(held)
        if doc is None:
            return False
        await self._delete_history(doc["historyId"])
        return True

    async def release_claim(
        self,
        agent_id: str,
        run_id: str,
        *,
        by: str,
        error: RunErrorDocument,
        now: datetime,
        history: bytes | None = None,
        history_id: str | None = None,
        event: EventDocument | None = None,
    ) -> SnapshotDocument | None:
        changes: Document = {"status": "suspended", "claim": None, "lastError": dict(error), "updatedAt": now}
        if history is None:
            return await self._update_then_append(
                event, run_id, self._held(agent_id, run_id, by), {"$set": changes, "$inc": {"version": 1}}
            )
        if history_id is None:
            raise ValueError("a new history needs a new history_id")
        return await self._update_claimed_with_history(agent_id, run_id, by, changes, history, history_id, event)

    async def list_stalled_runs(self, *, now: datetime, idle_before: datetime, limit: int) -> list[SnapshotDocument]:
        query: Document = {
            "pendingCount": 0,
            "$or": [
                {"status": "resuming", "claim.until": {"$lt": now}},
                {"status": "suspended", **no_value("lastError"), "updatedAt": {"$lt": idle_before}},
            ],
            **_NOT_FINISHED,
        }
        async with _reachable():
            docs = await _page(
                self._runs.find(query).sort([("updatedAt", ASCENDING), ("_id", ASCENDING)]), limit
            ).to_list()
        return _snapshots(docs)

    async def list_expired_runs(self, *, now: datetime, limit: int) -> list[SnapshotDocument]:
        async with _reachable():
            docs = await self._expired_cursor(now, limit).to_list()
        return _snapshots(docs)

    def _expired_cursor(self, now: datetime, limit: int) -> Any:
        return _page(self._runs.find({"expiresAt": {"$lte": now}}).sort(EXPIRY_ORDER), limit)

    async def explain_expired_runs(self, *, now: datetime, limit: int) -> Mapping[str, Any]:
        """The server's query plan of ``list_expired_runs`` (index checks)."""
        async with _reachable():
            return cast(Mapping[str, Any], await self._expired_cursor(now, limit).explain())

    # -- audit log -----------------------------------------------------------------------------
    async def append_event(self, event: EventDocument) -> None:
        async with _reachable():
            await self._events.insert_one(encode(event, EVENT_FIELDS))

    async def list_events(self, agent_id: str, run_id: str) -> list[EventDocument]:
        return await self.list_events_of_runs(agent_id, [run_id])

    async def list_events_of_runs(
        self, agent_id: str, run_ids: Sequence[str], *, resource_ids: frozenset[str] | None = None
    ) -> list[EventDocument]:
        query: Document = {"agentId": agent_id, "runId": {"$in": list(dict.fromkeys(run_ids))}}
        if resource_ids is not None:
            query["resourceId"] = {"$in": sorted(resource_ids)}
        async with _reachable():
            docs = await self._events.find(query).sort([("at", ASCENDING), ("_id", ASCENDING)]).to_list()
        return _events(docs)

    async def list_events_after(
        self, agent_id: str, after_event_id: str | None, limit: int, *, resource_ids: frozenset[str] | None = None
    ) -> list[EventDocument]:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        query: Document = {"agentId": agent_id}
        if after_event_id is not None:
            query["_id"] = {"$gt": after_event_id}
        if resource_ids is not None:
            query["resourceId"] = {"$in": sorted(resource_ids)}
        async with _reachable():
            docs = await _page(self._events.find(query).sort([("_id", ASCENDING)]), limit).to_list()
        return _events(docs)

    # -- idempotency ---------------------------------------------------------------------------
    async def reserve_idempotency_key(
        self,
        key_id: str,
        fingerprint: str,
        now: datetime,
        *,
        by: str | None = None,
        until: datetime | None = None,
    ) -> IdempotencyDocument | None:
        try:
            async with _reachable():
                await self._keys.insert_one(
                    {
                        "_id": key_id,
                        "fingerprint": fingerprint,
                        "result": None,
                        "createdAt": now,
                        "reservedBy": by,
                        "reservedUntil": until,
                    }
                )
        except DuplicateKeyError:
            lapsed: Document = {
                **self._held_key(key_id, None),
                "fingerprint": fingerprint,
                "reservedUntil": {"$lt": now},
            }
            async with _reachable(), self._lock(_key_lock(key_id)):
                taken = await self._keys.update_one(lapsed, {"$set": {"reservedBy": by, "reservedUntil": until}})
            if taken.matched_count == 1:
                return None
            async with _reachable():
                existing = await self._keys.find_one({"_id": key_id})
            if existing is not None:
                existing.setdefault("reservedBy", None)
                existing.setdefault("reservedUntil", None)
                return cast(IdempotencyDocument, decode(existing, IDEMPOTENCY_FIELDS))
            return await self.reserve_idempotency_key(key_id, fingerprint, now, by=by, until=until)
        return None

    @staticmethod
    def _held_key(key_id: str, by: str | None) -> Document:
        """The condition of a reservation still held (by ``by`` unless ``None``): no result yet."""
        held: Document = {"_id": key_id, **no_value("result", "resultJson")}  # either form of the answer
        if by is not None:
            held["reservedBy"] = by
        return held

    async def renew_idempotency_key(self, key_id: str, *, by: str, until: datetime) -> bool:
        async with _reachable(), self._lock(_key_lock(key_id)):
            result = await self._keys.update_one(self._held_key(key_id, by), {"$set": {"reservedUntil": until}})
        return result.matched_count == 1

    async def complete_idempotency_key(self, key_id: str, result: dict[str, Any], *, by: str | None = None) -> None:
        async with _reachable(), self._lock(_key_lock(key_id)):
            await self._keys.update_one(
                self._held_key(key_id, by), {"$set": encode({"result": result}, IDEMPOTENCY_FIELDS)}
            )

    async def release_idempotency_key(self, key_id: str, *, by: str | None = None) -> None:
        async with _reachable(), self._lock(_key_lock(key_id)):
            await self._keys.delete_one(self._held_key(key_id, by))

    # -- webhook deliveries --------------------------------------------------------------------
    async def webhook_cursor(self, cursor_id: str) -> str | None:
        async with _reachable():
            doc = await self._cursors.find_one({"_id": cursor_id})
        return None if doc is None else str(doc["eventId"])

    async def advance_webhook_cursor(self, cursor_id: str, event_id: str) -> None:
        """Under the cursor's write lease (``_run_lock``), so two instances never move it back."""
        async with _reachable(), self._lock(f"webhook-cursor:{cursor_id}"):
            result = await self._cursors.update_one(
                {"_id": cursor_id, "eventId": {"$lt": event_id}}, {"$set": {"eventId": event_id}}
            )
            if result.matched_count == 0:
                with suppress(DuplicateKeyError):
                    await self._cursors.insert_one({"_id": cursor_id, "eventId": event_id})

    async def add_webhook_deliveries(self, deliveries: Sequence[WebhookDeliveryDocument]) -> int:
        added = 0
        async with _reachable():
            for delivery in deliveries:
                try:
                    await self._deliveries.insert_one(dict(delivery))
                except DuplicateKeyError:
                    continue
                added += 1
        return added

    async def claim_webhook_deliveries(
        self,
        *,
        by: str,
        until: datetime,
        now: datetime,
        limit: int,
        endpoint_id: str | None = None,
        other_than: Collection[str] = (),
    ) -> list[WebhookDeliveryDocument]:
        """Each candidate is leased by one conditional update under its write lease (``_run_lock``:
        FerretDB does not apply conditional updates atomically)."""
        due: Document = {
            "status": "pending",
            "nextAttemptAt": {"$lte": now},
            "$or": [no_value("lease"), {"lease.until": {"$lt": now}}],
        }
        if endpoint_id is not None or other_than:
            due["endpointId"] = {
                **({"$eq": endpoint_id} if endpoint_id is not None else {}),
                **({"$nin": list(other_than)} if other_than else {}),
            }
        async with _reachable():
            order = [("nextAttemptAt", ASCENDING), ("_id", ASCENDING)]
            candidates = await _page(self._deliveries.find(due, {"_id": 1}).sort(order), limit).to_list()
            claimed: list[WebhookDeliveryDocument] = []
            for candidate in candidates:
                async with self._lock(f"webhook:{candidate['_id']}"):
                    doc = await self._deliveries.find_one_and_update(
                        {"_id": candidate["_id"], **due},
                        {"$set": {"lease": {"by": by, "until": until}}},
                        return_document=ReturnDocument.AFTER,
                    )
                if doc is not None:
                    claimed.append(cast(WebhookDeliveryDocument, doc))
        return claimed

    async def finish_webhook_attempt(
        self,
        delivery_id: str,
        *,
        by: str,
        status: WebhookDeliveryStatus,
        at: datetime,
        next_attempt_at: datetime,
        status_code: int | None,
        error: str | None,
    ) -> bool:
        async with _reachable(), self._lock(f"webhook:{delivery_id}"):
            result = await self._deliveries.update_one(
                {"_id": delivery_id, "status": "pending", "lease.by": by},
                {
                    "$set": {
                        "status": status,
                        "lastAttemptAt": at,
                        "nextAttemptAt": next_attempt_at,
                        "lastStatusCode": status_code,
                        "lastError": error,
                        "finishedAt": None if status == "pending" else at,
                        "lease": None,
                    },
                    "$inc": {"attempts": 1},
                },
            )
        return result.modified_count == 1

    async def list_webhook_deliveries(
        self,
        *,
        status: WebhookDeliveryStatus | None,
        resource_ids: frozenset[str] | None,
        limit: int,
        after: str | None = None,
    ) -> list[WebhookDeliveryDocument]:
        query: Document = {}
        if status is not None:
            query["status"] = status
        if after is not None:
            query["_id"] = {"$lt": after}
        if resource_ids is not None:
            query["resourceId"] = {"$in": sorted(resource_ids)}
        async with _reachable():
            docs = await _page(self._deliveries.find(query).sort([("_id", DESCENDING)]), limit).to_list()
        return [cast(WebhookDeliveryDocument, doc) for doc in docs]

    # -- run updates ---------------------------------------------------------------------------
    async def append_run_updates(self, batch: RunUpdateBatchDocument) -> None:
        async with _reachable():
            await self._updates.insert_one(dict(batch))

    async def list_run_updates(
        self, agent_id: str, run_id: str, *, after: str | None, limit: int
    ) -> list[RunUpdateBatchDocument]:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        query: Document = {"agentId": agent_id, "runId": run_id}
        if after is not None:
            query["_id"] = {"$gt": after}
        async with _reachable():
            docs = await self._updates.find(query).sort(RUN_UPDATES_INDEX).limit(limit).to_list()
        return [cast(RunUpdateBatchDocument, doc) for doc in docs]

    async def prune_run_updates(self, *, before: datetime, limit: int) -> int:
        async with _reachable():
            old = (
                await self._updates.find({"at": {"$lt": before}}, {"_id": 1})
                .sort("at", ASCENDING)
                .limit(limit)
                .to_list()
            )
            if not old:
                return 0
            deleted = await self._updates.delete_many({"_id": {"$in": [doc["_id"] for doc in old]}})
        return deleted.deleted_count

    # -- administration ------------------------------------------------------------------------
    async def drop_all(self) -> None:
        """Drop every runsgate collection of the database (tests and ``runsgate seed --reset``)."""
        async with _reachable():
            for name in (
                "run_snapshots",
                "run_histories",
                "run_events",
                "idempotency_keys",
                "run_write_locks",
                "webhook_deliveries",
                "webhook_cursors",
                "run_updates",
                "run_histories_large.files",
                "run_histories_large.chunks",
            ):
                await self.database.drop_collection(name)

    async def explain_listing(self, agent_id: str, run_filter: RunFilter, limit: int) -> Mapping[str, Any]:
        """The server's query plan for a listing page (index checks, ``bench/``)."""
        async with _reachable():
            return await _page(
                self._runs.find(listing_query(agent_id, run_filter)).sort(LISTING_ORDER), limit
            ).explain()


__all__ = ["EVENT_FEED_INDEX", "LISTING_INDEXES", "MongoSnapshotStore", "listing_query"]
