"""The core every part of ``MongoSnapshotStore`` builds on: the client and its collections,
opening and closing, the write leases (``_run_lock``, on FerretDB 1.x only), message histories
(inline or GridFS), and the conditional single-document update that records events inside the
snapshot before appending them (docs/storage.md "One unit of work")."""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext, suppress
from datetime import UTC, datetime
from typing import Any, cast

from gridfs.asynchronous import AsyncGridFSBucket
from gridfs.errors import NoFile
from pymongo import AsyncMongoClient, ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError, OperationFailure

from .._query import to_bson_precision
from .._run_lock import RunWriteLocks, needs_write_leases
from ..documents import SCHEMA_VERSION, EventDocument, RunUpdateBatchDocument, SnapshotDocument
from ..protocol import NewerSchemaError, event_list
from ..stored_json import EVENT_FIELDS, encode
from . import schema
from .counts import MARKER, QUEUE_MARKER, KeptCounts, added_at, removed_at
from .in_flight import Appended, Behind, ReadAhead
from .mapping import read_snapshot
from .reachability import UNAVAILABLE_CODES, reachable
from .windows import Windows

logger = logging.getLogger(__name__)

Document = dict[str, Any]
Derive = Callable[[Document], Document]
"""Fields of an update computed from the whole matching document (``MongoStoreBase._update``)."""
DUPLICATE_KEY = 11000
DERIVE_TRIES = 10
"""Reads of a run ``_update`` makes for one ``derive`` before it reports no match: each read after
the first follows a write by another writer that changed the run's version meanwhile."""
DELETE_TRIES = 10
"""Deletes ``deleted_one`` sends at most while a read still finds a document matching its query."""
DELETE_PAUSE = 0.2
"""Seconds ``deleted_one`` waits at most between two deletes (doubling from 1 ms)."""


async def deleted_one(collection: AsyncCollection[Document], query: Document) -> Document | None:
    """``find_one_and_delete(query)``: the document deleted, or ``None`` when none matched, a miss
    confirmed by a read. DocumentDB 0.106 (FerretDB 2.5) can answer a conditional delete with
    nothing when another command updates the matching document at that moment, though it matches
    before and after (``tests/storage/test_concurrent_writes.py``): while the read finds a match,
    the delete is sent again after a pause that doubles from 1 ms to ``DELETE_PAUSE`` (so a burst of
    writes to it, such as the sweeper's marks, ends first), ``DELETE_TRIES`` deletes in all, about
    0.45 s at most. Call under ``reachable()``."""
    for attempt in range(DELETE_TRIES):
        if attempt:
            await asyncio.sleep(min(DELETE_PAUSE, 0.001 * 2 ** (attempt - 1)))
        doc = await collection.find_one_and_delete(query)
        if doc is not None or await collection.find_one(query, {"_id": 1}) is None:
            return doc
    return None


class MongoStoreBase:
    """The client, collections, lifecycle, histories and conditional updates of ``MongoSnapshotStore``
    (its arguments are documented there)."""

    def __init__(
        self,
        uri: str,
        *,
        server_selection_timeout: float = 5.0,
        socket_timeout: float = 30.0,
        inline_history_limit: int = 8 * 1024 * 1024,
        write_leases: bool | None = None,
    ) -> None:
        self._uri = uri
        self._socket_timeout_ms = int(socket_timeout * 1000)
        self._leases_setting = write_leases
        self._write_leases = True  # until open() asks the server
        self._timeout_ms = int(server_selection_timeout * 1000)
        self._inline_history_limit = inline_history_limit
        self._client: AsyncMongoClient[Document] | None = None
        self._locks = RunWriteLocks(lambda: self.database[schema.LOCKS])
        self._windows = Windows()
        self._windowed_pages = False
        """Whether listing pages are read through windows (``windows``): on DocumentDB (FerretDB 2),
        whose planner sorts every match of a page's filter."""
        self._composite_listing = False
        """Whether the listing indexes are ``schema.COMPOSITE_LISTING_INDEXES`` (DocumentDB), which
        a page names (``schema.listing_index``)."""
        self._rewrites_whole_documents = False
        """Whether the server applies an update by reading then rewriting the document (FerretDB
        1.x), so concurrent updates of one document need a lease (``counts``)."""
        self._counts = KeptCounts(
            lambda: self.database[schema.COUNTS],
            lambda: self._runs,
            lambda: self._events,
            lambda: self._locks.hold if self._rewrites_whole_documents else None,
        )
        self._appended = Appended()
        self._behind = Behind()
        self._ahead = ReadAhead()
        self.before_event: Callable[[Sequence[Mapping[str, Any]]], Awaitable[None]] | None = None
        """Test-only: awaited with the events about to be appended, between a run's state change
        (which recorded them in ``pendingEvents``) and their append."""

    def _lock(self, run_id: str) -> AbstractAsyncContextManager[None]:
        """Exclusive right to write the run's snapshot, across processes (see ``_run_lock``), on a
        server that needs write leases (``write_leases``); elsewhere nothing: each conditional
        write is atomic on its own there."""
        return self._locks.hold(run_id) if self._write_leases else nullcontext()

    @property
    def write_leases(self) -> bool:
        """Whether every write to a run (an idempotency key, a webhook delivery or cursor) holds a
        write lease: on FerretDB 1.x, as ``open()`` found (``_run_lock.needs_write_leases``), or
        as the ``write_leases`` argument says. True until ``open()``."""
        return self._write_leases

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
        return self.database[schema.RUNS]

    @property
    def _histories(self) -> AsyncCollection[Document]:
        return self.database[schema.HISTORIES]

    @property
    def _events(self) -> AsyncCollection[Document]:
        return self.database[schema.EVENTS]

    @property
    def _keys(self) -> AsyncCollection[Document]:
        return self.database[schema.KEYS]

    @property
    def _deliveries(self) -> AsyncCollection[Document]:
        return self.database[schema.DELIVERIES]

    @property
    def _cursors(self) -> AsyncCollection[Document]:
        return self.database[schema.CURSORS]

    @property
    def _updates(self) -> AsyncCollection[Document]:
        return self.database[schema.UPDATES]

    @property
    def _large_histories(self) -> AsyncGridFSBucket:
        return AsyncGridFSBucket(self.database, bucket_name=schema.LARGE_HISTORIES)

    async def open(self) -> None:
        """Create the client and the indexes, check the stored schema version, then apply the
        backfills (``schema.backfill``).

        Raises:
            StoreUnavailableError: MongoDB cannot be reached (nor, for a ``mongodb+srv://`` URI,
                its DNS records read).
            NewerSchemaError: A snapshot has a ``schemaVersion`` above ``SCHEMA_VERSION``.
            Whatever it raises, it closes the client it made first.
        """
        try:
            async with reachable():  # a mongodb+srv:// URI's DNS lookup may fail here already
                self._client = self._new_client(socketTimeoutMS=self._socket_timeout_ms)
                self._write_leases = await self._needs_write_leases()
                build = await self.database.command("buildInfo")
                self._rewrites_whole_documents = "ferretdbVersion" in build  # FerretDB 1.x
                self._windowed_pages = isinstance(build.get("ferretdb"), Mapping)  # FerretDB 2: DocumentDB
                async with self._unbounded() as database:  # an index build takes what it takes
                    self._composite_listing = await schema.create_indexes(
                        database, composite_terms=self._windowed_pages
                    )
                found = await schema.stored_schema_version(self.database)
            if found > SCHEMA_VERSION:
                raise NewerSchemaError(found, SCHEMA_VERSION)
            async with reachable(), self._unbounded() as database:
                await schema.backfill(database, to_bson_precision(datetime.now(UTC)))
        except BaseException:
            await self.close()  # an open that fails leaves no client behind
            raise

    async def _needs_write_leases(self) -> bool:
        """The ``write_leases`` argument, else whether the server's ``buildInfo`` names FerretDB
        1.x (``needs_write_leases``); a server that refuses ``buildInfo`` gets them."""
        if self._leases_setting is not None:
            return self._leases_setting
        assert self._client is not None
        try:
            info = await self._client.admin.command("buildInfo")
        except OperationFailure as exc:
            if exc.code in UNAVAILABLE_CODES:
                raise
            logger.info("buildInfo refused (%s): taking write leases", exc)
            return True
        leases = needs_write_leases(info)
        ferretdb = info.get("ferretdbVersion") or info.get("ferretdb")
        logger.info("MongoDB server %s (FerretDB: %s): write leases %s", info.get("version"), ferretdb, leases)
        return leases

    async def _raise_schema_version(self, version: int) -> None:
        """Record that the store holds documents of ``version`` (the stored version only grows)."""
        await schema.raise_schema_version(self.database[schema.META], version)

    def _new_client(self, **options: Any) -> AsyncMongoClient[Document]:
        """A client of the store's URI, waiting ``server_selection_timeout`` for a server."""
        return AsyncMongoClient(
            self._uri, tz_aware=True, serverSelectionTimeoutMS=self._timeout_ms, appname="runsgate", **options
        )

    @asynccontextmanager
    async def _unbounded(self) -> AsyncIterator[AsyncDatabase[Document]]:
        """The database through a client of its own without the socket timeout, closed after: for
        the open's index builds and backfills, whose one command may wait for minutes."""
        client = self._new_client()
        try:
            yield client.get_default_database(default="runsgate")
        finally:
            await client.close()

    async def close(self) -> None:
        await self._behind.wait_all()
        self._ahead.clear()
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def ping(self) -> None:
        async with reachable():
            await self.database.command("ping")

    # -- histories -----------------------------------------------------------------------------
    async def _read_history(self, history_id: str) -> bytes | None:
        async with reachable():
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

    async def _write_history(self, history_id: str, run_id: str, history: bytes) -> None:
        compressed = zlib.compress(history, 6)
        async with reachable():
            if len(compressed) > self._inline_history_limit:
                await self._large_histories.upload_from_stream_with_id(history_id, run_id, compressed)
                await self._histories.insert_one({"_id": history_id, "runId": run_id, "gridfs": True})
            else:
                await self._histories.insert_one({"_id": history_id, "runId": run_id, "data": compressed})

    async def _delete_history(self, history_id: str) -> None:
        async with reachable():
            doc = await self._histories.find_one_and_delete({"_id": history_id})
            if doc is not None and doc.get("gridfs"):
                with suppress(NoFile):
                    await self._large_histories.delete(history_id)

    # -- conditional updates -------------------------------------------------------------------
    async def _update(
        self,
        run_id: str,
        query: Document,
        update: Document,
        derive: Derive | None = None,
        then_events: Callable[[Document], Sequence[EventDocument]] | None = None,
    ) -> SnapshotDocument | None:
        """One conditional update under the run's lease (where the server needs one). With
        ``derive``, the matching document is read first (still under the lease) and ``derive(doc)``
        adds to the update's ``$set`` (fields computed from the whole document, such as
        ``expiresAt``); the update is then conditioned on the ``version`` read too, and when another
        writer changed the run in between (no lease held there), the run is read again and the
        update derived anew, at most ``DERIVE_TRIES`` reads. ``then_events(doc)`` (with ``derive``
        only): events recorded inside the snapshot (``pendingEvents``) after those the update
        pushes already."""
        async with reachable(), self._lock(run_id):
            if derive is None:
                doc = await self._runs.find_one_and_update(query, update, return_document=ReturnDocument.AFTER)
                return read_snapshot(doc)
            for _ in range(DERIVE_TRIES):
                current = await self._runs.find_one(query)
                if current is None:
                    return None
                doc = await self._runs.find_one_and_update(
                    {**query, "version": current["version"]},
                    self._derived(update, current, derive, then_events),
                    return_document=ReturnDocument.AFTER,
                )
                if doc is not None:
                    return read_snapshot(doc)
        return None

    @staticmethod
    def _derived(
        update: Document,
        current: Document,
        derive: Derive,
        then_events: Callable[[Document], Sequence[EventDocument]] | None,
    ) -> Document:
        """``update`` with ``derive(current)`` in its ``$set`` and ``then_events(current)`` pushed
        after its own ``pendingEvents``."""
        update = {**update, "$set": {**update.get("$set", {}), **derive(current)}}
        later = [] if then_events is None else [encode(one, EVENT_FIELDS) for one in then_events(current)]
        if later:
            pushed = update.get("$push", {}).get("pendingEvents", {"$each": []})
            each = {"$each": [*pushed["$each"], *later]}
            update = {**update, "$push": {**update.get("$push", {}), "pendingEvents": each}}
        return update

    async def _update_then_append(
        self,
        event: EventDocument | Sequence[EventDocument] | None,
        run_id: str,
        query: Document,
        update: Document,
        derive: Derive | None = None,
        preceding_events: Sequence[EventDocument] = (),
        *,
        then_events: Callable[[Document], Sequence[EventDocument]] | None = None,
        keep_pending: bool = False,
        also: Callable[[], Awaitable[None]] | None = None,
    ) -> SnapshotDocument | None:
        """``_update`` with ``event`` (one or several, after ``preceding_events``, before those of
        ``then_events``) recorded inside the snapshot (``pendingEvents``) by the same
        single-document write, then appended to ``run_events`` (``_settle_pending_events``, with
        ``keep_pending``). ``also``: awaited once the update matched, beside the append. The
        snapshot is returned without the moves of its questions (``counts.QUEUE_MARKER``)."""
        events = [*preceding_events, *event_list(event)]
        if events:
            pushed = {"$each": [encode(one, EVENT_FIELDS) for one in events]}
            update = {**update, "$push": {**update.get("$push", {}), "pendingEvents": pushed}}
        doc = await self._update(run_id, query, update, derive, then_events)
        if doc is not None and (events or (then_events is not None and cast(Document, doc).get("pendingEvents"))):
            await self._settle_pending_events(cast(Document, doc), keep=keep_pending, also=also)
        elif doc is not None and also is not None:
            await also()
        if doc is not None:
            cast(Document, doc).pop(QUEUE_MARKER, None)
        return doc

    async def _settle_pending_events(
        self, doc: Document, *, keep: bool = False, also: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """Append every event pending in the snapshot ``doc`` (as just written) to ``run_events``,
        ignoring the ones already there (same ``_id``), with ``also()`` awaited beside it; write
        its count entries when it carries ``countsPending`` (an insert's, ``counts``), with the
        moves of its questions (``QUEUE_MARKER``); then clear those fields unless the run was
        written again since (that writer settles them; moves without an insert's marker are left
        to the sweeper, ``complete_pending_events``).

        ``keep``: a write that claimed the run, whose holder writes it again (ends or releases the
        claim, each settling the events pending then): the events are left in the snapshot,
        unless it carries an insert's marker, and appended with ``also()`` behind the call
        (``_behind``); once appended their ids are kept in this store (``_appended``) so that the
        next write of the run appends them no more. ``doc`` is returned without the fields.
        ``before_event`` runs first (tests inject a crash there)."""
        pending = doc.pop("pendingEvents", None) or []
        added = added_at(doc)
        if keep and added is None:
            doc.pop(MARKER, None)
            doc.pop(QUEUE_MARKER, None)
            if self.before_event is not None:
                await self.before_event(pending)
            self._behind.start(doc["_id"], self._append_kept(pending, doc["_id"], also))
            return
        cleared: Document = {"pendingEvents": ""}
        if added is not None:  # an insert's marker: the entries, then the markers (``removed`` stays)
            cleared[MARKER if removed_at(doc) is None else f"{MARKER}.added"] = ""
            cleared[QUEUE_MARKER] = ""
        if self.before_event is not None:
            await self.before_event(pending)
        if also is None:
            await self._append_each(pending, doc["_id"])
        else:
            await asyncio.gather(self._append_each(pending, doc["_id"]), also())
        if added is not None:
            async with reachable():
                await self._counts.record(doc, "i")
        doc.pop(MARKER, None)
        doc.pop(QUEUE_MARKER, None)
        async with reachable(), self._lock(doc["_id"]):
            await self._runs.update_one({"_id": doc["_id"], "version": doc["version"]}, {"$unset": cleared})

    async def _append_kept(
        self, pending: Sequence[Document], run_id: str, also: Callable[[], Awaitable[None]] | None
    ) -> None:
        """A claiming write's ``_settle_pending_events``, behind it: ``pending`` appended beside
        ``also()``, then their ids kept (``_appended``)."""
        known = self._appended.pop(run_id)
        await asyncio.gather(
            self._insert_events([event for event in pending if event["_id"] not in known]),
            *([] if also is None else [also()]),
        )
        self._appended.put(run_id, [event["_id"] for event in pending])

    async def _append_each(self, events: Sequence[Document], run_id: str | None = None) -> None:
        """Insert ``events`` into ``run_events`` by one unordered ``insert`` command, skipping
        those already there (appended before, by the writer or by an earlier recovery); with
        ``run_id``, after the run's writes in flight (``_behind``), first leaving out those this
        store appended for that run and kept pending (``_settle_pending_events``)."""
        if run_id is not None:
            await self._behind.wait(run_id)
            known = self._appended.pop(run_id)
            events = [event for event in events if event["_id"] not in known]
        await self._insert_events(events)

    async def _insert_events(self, events: Sequence[Document]) -> None:
        """``_append_each``'s insert: ``events`` by one unordered command, duplicates skipped."""
        if not events:
            return
        try:
            async with reachable():
                await self._events.insert_many([dict(event) for event in events], ordered=False)
        except BulkWriteError as exc:
            errors = exc.details.get("writeErrors", [])
            if not errors or exc.details.get("writeConcernErrors"):
                raise
            if any(error.get("code") != DUPLICATE_KEY for error in errors):
                raise

    async def _updates_after(self, run_id: str, updates: Sequence[RunUpdateBatchDocument]) -> None:
        """Insert run-update batches after the write they went with (``RunStore``'s ``updates``;
        no transactions here): one ordered ``insert`` command, a failure logged, never raised
        (progress only; the batches after a failed one are not stored); after the run's writes
        in flight (``_behind``)."""
        if not updates:
            return
        await self._behind.wait(run_id)
        await self._insert_updates(run_id, updates)

    async def _insert_updates(self, run_id: str, updates: Sequence[RunUpdateBatchDocument]) -> None:
        """``_updates_after``'s insert, a failure logged."""
        if not updates:
            return
        try:
            async with reachable():
                await self._updates.insert_many([dict(batch) for batch in updates], ordered=True)
        except Exception:
            logger.warning("run %s: an update batch could not be stored", run_id, exc_info=True)


__all__ = ["Derive", "MongoStoreBase"]
