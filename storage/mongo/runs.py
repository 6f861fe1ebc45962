"""Runs of ``MongoSnapshotStore``: reading and listing snapshots, storing new ones with their
history, and finishing what a dead process left in ``pendingEvents`` (``RunStore``)."""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from contextlib import suppress
from datetime import datetime
from typing import Any

from pymongo import UpdateOne
from pymongo.errors import BulkWriteError, DuplicateKeyError

from .._query import utcnow
from ..documents import SCHEMA_VERSION, SnapshotDocument
from ..protocol import EVERY_RUN, DuplicateRunError, RunFilter, RunPage, event_list
from ..protocol.writes import Events
from ..stored_json import EVENT_FIELDS, encode
from .base import MongoStoreBase, deleted_one
from .counts import (
    EQUALITY_FIELDS,
    MARKER,
    QUEUE_MARKER,
    added_at,
    filter_keys,
    inserted_moves,
    removed_at,
    with_run_keys,
)
from .mapping import (
    NOT_FINISHED,
    STORE_FIELDS,
    bulk_write,
    hinted,
    hinted_count,
    keyset,
    listing_query,
    page,
    read_page,
    read_snapshot,
    read_snapshots,
    stored_snapshot,
)
from .reachability import reachable
from .schema import LISTING_ORDER, REVERSE_ORDER, listing_index
from .windows import filter_key

Document = dict[str, Any]


class MongoRuns(MongoStoreBase):
    """Reads, inserts and pending-event recovery of ``MongoSnapshotStore``."""

    async def get(self, agent_id: str, run_id: str) -> SnapshotDocument | None:
        async with reachable():
            doc = await self._runs.find_one({"_id": run_id, "agentId": agent_id, **NOT_FINISHED}, STORE_FIELDS)
        if doc is not None:  # a decision claiming it at this version reads its history ahead
            self._ahead.saw(run_id, doc["version"], doc["historyId"])
        return read_snapshot(doc)

    async def get_many(self, run_ids: Sequence[str]) -> list[SnapshotDocument]:
        if not run_ids:
            return []
        async with reachable():
            ids = list(dict.fromkeys(run_ids))
            docs = await read_page(self._runs.find({"_id": {"$in": ids}, **NOT_FINISHED}, STORE_FIELDS), len(ids))
        return read_snapshots(docs)

    async def list_runs(
        self, agent_id: str, run_filter: RunFilter, window: RunPage = EVERY_RUN
    ) -> list[SnapshotDocument]:
        limit, skip, after, before, from_end = window.limit, window.skip, window.after, window.before, window.from_end
        query = listing_query(agent_id, run_filter)
        bounds = []
        if after is not None:
            bounds.append(keyset(after, "$lt"))
        if before is not None:
            bounds.append(keyset(before, "$gt"))

        index = listing_index(run_filter) if self._composite_listing else None

        async def read(extra: Document | None) -> list[Document]:
            conditions = [*bounds, extra] if extra else bounds
            found = {**query, "$and": conditions} if conditions else query
            cursor = self._runs.find(found, STORE_FIELDS).sort(REVERSE_ORDER if from_end else LISTING_ORDER)
            offset = skip if skip and not from_end else 0
            async with reachable():
                if index is not None:
                    return await hinted(cursor, index, limit, skip=offset, whole=extra is None)
                if limit is not None:  # a windowed read short of the page is read wider (``Windows``)
                    return await read_page(cursor, limit, skip=offset, whole=extra is None)
                return await cursor.skip(offset).to_list()

        if limit is not None and not (skip and not from_end) and self._windowed_pages:
            cursor_key = before if from_end else after
            docs = await self._windows.page(
                filter_key(agent_id, run_filter),
                limit,
                cursor=None if cursor_key is None else cursor_key.created_at,
                older=not from_end,
                read=read,
                learn=(after if from_end else before) is None,
            )
        else:
            docs = await read(None)
        if from_end:
            docs.reverse()
        return read_snapshots(docs)

    async def count_runs(self, agent_id: str, run_filter: RunFilter) -> int:
        keys = filter_keys(agent_id, run_filter)
        async with reachable():
            if keys is not None:  # the kept counts (``counts``)
                matching = {k: v for k, v in listing_query(agent_id, run_filter).items() if k in EQUALITY_FIELDS}
                return await self._counts.total(keys, matching)
            query = listing_query(agent_id, run_filter)
            index = listing_index(run_filter) if self._composite_listing else None
            if index is not None:  # the filter's composite-term index: a range of its dates' terms
                return await hinted_count(self._runs, query, index)
            return await self._runs.count_documents(query)

    async def explain_listing(self, agent_id: str, run_filter: RunFilter, limit: int) -> Mapping[str, Any]:
        """The server's query plan for a listing page (index checks, ``bench/``), hinted as a page is."""
        cursor = self._runs.find(listing_query(agent_id, run_filter)).sort(LISTING_ORDER)
        index = listing_index(run_filter) if self._composite_listing else None
        async with reachable():
            return await page(cursor if index is None else cursor.hint(index), limit).explain()

    async def load_history(self, agent_id: str, run_id: str, *, history_id: str | None = None) -> bytes | None:
        """One read by ``history_id`` when given and still stored (the one a claiming decision
        sent ahead, if any: ``record_decision``), else the run's then its history's."""
        if history_id is not None:
            ahead = self._ahead.take(history_id)
            found = await (self._read_history(history_id) if ahead is None else ahead)
            if found is not None:
                return found
        snapshot = await self.get(agent_id, run_id)
        if snapshot is None:
            return None
        return await self._read_history(snapshot["historyId"])

    async def insert(self, snapshot: SnapshotDocument, history: bytes, *, event: Events = None) -> None:
        events = event_list(event)
        if snapshot["schemaVersion"] > SCHEMA_VERSION:  # an older runsgate's next open() must refuse the store
            async with reachable():
                await self._raise_schema_version(snapshot["schemaVersion"])
        await self._write_history(snapshot["historyId"], snapshot["_id"], history)
        stored = stored_snapshot(snapshot)
        if events:  # recorded inside the snapshot first, then appended (_settle_pending_events)
            stored["pendingEvents"] = [encode(one, EVENT_FIELDS) for one in events]
        inserted = utcnow()
        stored[MARKER] = {"since": inserted, "added": inserted}  # counted after the insert, then cleared (counts)
        if (questions := inserted_moves(stored, inserted)) is not None:
            stored[QUEUE_MARKER] = questions  # the queue's too, by the same write
        try:
            async with reachable():
                await self._runs.insert_one(stored)
        except DuplicateKeyError as exc:
            await self._delete_history(snapshot["historyId"])
            raise DuplicateRunError(f"run {snapshot['_id']!r} is already stored") from exc
        except Exception:  # refused (e.g. DocumentTooLarge): leave no history behind
            with suppress(Exception):
                await self._delete_history(snapshot["historyId"])
            raise
        await self._settle_pending_events(stored)

    async def insert_many(self, snapshots: Sequence[tuple[SnapshotDocument, bytes]]) -> None:
        """Bulk insert (data generator): all histories (inline size only), then all snapshots."""
        if not snapshots:
            return
        histories = [{"_id": s["historyId"], "runId": s["_id"], "data": zlib.compress(h, 6)} for s, h in snapshots]
        newest = max(s["schemaVersion"] for s, _ in snapshots)
        try:
            async with reachable():
                if newest > SCHEMA_VERSION:  # first, so an older runsgate refuses the store even if this fails
                    await self._raise_schema_version(newest)
                await self._histories.insert_many(histories, ordered=False)
                await self._runs.insert_many([stored_snapshot(s) for s, _ in snapshots], ordered=False)
        except BulkWriteError as exc:
            raise DuplicateRunError(f"bulk insert failed: {exc.details.get('writeErrors', [])[:1]}") from exc
        async with reachable():
            await self._counts.add_many(dict(s) for s, _ in snapshots)

    async def complete_pending_events(self, *, before: datetime, limit: int) -> int:
        """Append the events left inside snapshots by a process that died between a write and its
        append (``pendingEvents`` older than ``before``), write the ``i`` entries it left
        unwritten (``countsPending`` older than ``before``), and finish what they record: a run
        whose ``completed`` event was pending is deleted with its history. Then write the moves of
        the runs' questions (``_record_moves``), the ``d`` entries of runs finished before
        ``before`` (``KeptCounts.record_removals``), and fold the entries written before ``before``
        into their counts (``KeptCounts.settle``). Returns how many snapshots were completed
        (``pending_events`` and ``counts_pending`` indexes)."""
        await self._behind.wait_all()  # this store's deletions of finished runs in flight first
        left = {"$or": [{"pendingEvents.at": {"$lt": before}}, {f"{MARKER}.since": {"$lt": before}}]}
        async with reachable():
            fields = {"pendingEvents": 1, "historyId": 1, "version": 1, MARKER: 1, QUEUE_MARKER: 1, "agentId": 1}
            fields |= {"threadId": 1, "resourceId": 1, "parentRunId": 1}
            docs = await read_page(self._runs.find(left, fields), limit)
        for doc in docs:
            events = with_run_keys(doc.get("pendingEvents") or [], doc)
            await self._append_each(events)
            completed = [e["_id"] for e in events if e["type"] == "completed"]
            removed = removed_at(doc)
            added = added_at(doc) is not None
            if added:  # its ``d`` entry comes from its event (``record_removals``), with its moves
                async with reachable():
                    await self._counts.record(doc, "i")
            async with reachable(), self._lock(doc["_id"]):
                if completed:
                    gone = await deleted_one(self._runs, {"_id": doc["_id"], "pendingEvents._id": completed[0]})
                else:
                    gone = None
                    cleared = {"pendingEvents": "", MARKER if removed is None else f"{MARKER}.added": ""}
                    if added:  # its moves were written too
                        cleared[QUEUE_MARKER] = ""
                    await self._runs.update_one({"_id": doc["_id"], "version": doc["version"]}, {"$unset": cleared})
            if gone is not None:
                await self._delete_history(gone["historyId"])
        await self._record_moves(MOVES_BATCH)
        async with reachable():
            await self._counts.record_removals(before=before, limit=limit)
            await self._counts.settle(before=before, limit=limit)
        return len(docs)

    async def _record_moves(self, limit: int) -> None:
        """Write the ``m`` entries of the moves runs carry (``QUEUE_MARKER``, whatever their age: a
        decision leaves them to this pass), at most ``limit`` runs, then clear each run's marker:
        all of it while the run is at the version read, else the moves written (a write since
        added its own)."""
        async with reachable():
            docs = await self._counts.moved_runs(limit)
            if not docs:
                return
            await self._counts.record_many([(doc, None) for doc in docs])
        per_run = [  # the whole marker at the version read, else the moves written (harmless after)
            [
                UpdateOne({"_id": doc["_id"], "version": doc["version"]}, {"$unset": {QUEUE_MARKER: ""}}),
                UpdateOne({"_id": doc["_id"]}, {"$unset": {f"{QUEUE_MARKER}.moves.{m}": "" for m in moves}}),
            ]
            if (moves := doc[QUEUE_MARKER].get("moves") or {})
            else [UpdateOne({"_id": doc["_id"], "version": doc["version"]}, {"$unset": {QUEUE_MARKER: ""}})]
            for doc in docs
        ]
        if not self._write_leases:  # each update atomic on its own: one ordered command for the batch
            async with reachable():
                await bulk_write(self._runs, [op for ops in per_run for op in ops], ordered=True)
            return
        for doc, ops in zip(docs, per_run, strict=True):
            async with reachable(), self._lock(doc["_id"]):
                await bulk_write(self._runs, ops, ordered=True)


MOVES_BATCH = 1000
"""Runs one sweep writes the moves of at most (``_record_moves``)."""


__all__ = ["MongoRuns"]
