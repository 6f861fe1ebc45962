"""A run's state changes in ``MongoSnapshotStore``: decisions, approvals, notices, claims and their end,
and the sweeper's reads of stalled and expired runs (``RunStore``). Every condition is a
``storage.rules`` rule, ``compiled`` to a filter; every write is one conditional update."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from pymongo import ASCENDING

from .. import rules
from .._query import utcnow
from ..documents import EventDocument, SnapshotDocument
from ..protocol import event_list, writes
from ..stored_json import DECISION_FIELDS, EVENT_FIELDS, encode, encode_tool_call
from .base import Derive, deleted_one
from .conditions import compiled, merged
from .counts import EVENT_MARKER, MARKER, added_at, moved, with_run_keys
from .idempotency import MongoIdempotencyKeys
from .mapping import NOT_FINISHED, page, queue_at, read_page, read_snapshots
from .reachability import reachable
from .schema import EXPIRY_ORDER

Document = dict[str, Any]


def _deadline_once_decided(index: int) -> Derive:
    """The ``derive`` of a write deciding call ``index``: the run's ``expiresAt`` becomes
    ``rules.earliest_deadline`` with that call decided (``None``: no other pending call has one),
    and its ``queueAt`` follows (``mapping.queue_at``)."""

    def derive(current: Document) -> Document:
        calls = current["toolCalls"]
        deadline = rules.earliest_deadline(calls, deciding=index)
        pending = rules.pending_count(c for i, c in enumerate(calls) if i != index)
        return {"expiresAt": deadline, "queueAt": queue_at(deadline, current["suspendedAt"], pending)}

    return derive


def _claimed_once_decided(deadline: Derive, write: writes.DecisionWrite) -> Derive:
    """``deadline``, and the run claimed as ``write.claim`` says when the write claims it
    (``writes.DecisionWrite.claimed``)."""

    def derive(current: Document) -> Document:
        fields = deadline(current)
        claim = write.claimed(current)
        if claim is not None:
            fields.update({"status": "resuming", "claim": claim.document})
        return fields

    return derive


def _claim_events(write: writes.DecisionWrite) -> Callable[[Document], Sequence[EventDocument]]:
    """The events written after the decision's: ``write.claim.events`` when the write claimed the run."""

    def events(current: Document) -> Sequence[EventDocument]:
        claim = write.claimed(current)
        return () if claim is None else claim.events

    return events


class MongoRunTransitions(MongoIdempotencyKeys):
    """Decisions, approvals, claims and the sweeper's reads of ``MongoSnapshotStore``."""

    async def record_decision(self, write: writes.DecisionWrite) -> SnapshotDocument | None:
        if write.key is not None:
            raise ValueError(
                "MongoSnapshotStore reserves idempotency keys by their own write (reserves_with_decisions)"
            )
        claim, deadline = write.claim, _deadline_once_decided(write.index)
        decided = encode(write.decision, DECISION_FIELDS)
        update: Document = {
            "$set": {f"toolCalls.{write.index}.decision": decided, "updatedAt": write.now},
            "$unset": {f"toolCalls.{write.index}.reviewClaim": ""},
            "$inc": {"pendingCount": -1, "version": 1},
        }
        update = moved(update, -1, utcnow())  # suspended (``pending_call``): one question fewer
        claiming = write.claiming
        if claim is not None and claiming is not None:
            # the run as its claim's events were made (the last pending call, at ``claim.version``):
            # its deadline is then none, so the write needs no read first; otherwise, read and derive.
            # Its history, as ``get`` read it at that version, is read beside it for ``load_history``
            history_id = self._ahead.history_at(write.run_id, claim.version)
            if history_id is not None:
                self._ahead.start(history_id, self._read_history(history_id))
            doc = None
            try:
                doc = await self._update_then_append(
                    [*event_list(write.event), *claim.events],
                    write.run_id,
                    merged(compiled(write.condition), compiled(claiming)),
                    {
                        **update,
                        # no call left pending: no deadline, no place in the queue
                        "$set": {**update["$set"], "expiresAt": None, "queueAt": None, "status": "resuming"}
                        | {"claim": claim.document},
                    },
                    preceding_events=write.preceding_events,
                    keep_pending=True,
                    also=lambda: self._insert_updates(write.run_id, claim.updates),  # behind the call, in order
                )
            finally:
                if doc is None and history_id is not None:  # not claimed here: no load follows
                    self._ahead.drop(history_id)
            if doc is not None:
                return doc
        doc = await self._update_then_append(
            write.event,
            write.run_id,
            compiled(write.condition),
            update,
            deadline if claim is None else _claimed_once_decided(deadline, write),
            write.preceding_events,
            then_events=None if claim is None else _claim_events(write),
        )
        if claim is not None and doc is not None and doc["status"] == "resuming":  # this write claimed it
            await self._updates_after(write.run_id, claim.updates)
        return doc

    async def record_approval(self, write: writes.ApprovalWrite) -> SnapshotDocument | None:
        path, decision = f"toolCalls.{write.index}", write.decision
        changes: Document = {"updatedAt": write.now}
        ended: Document = {"$unset": {f"{path}.reviewClaim": ""}} if write.ends_review_claim() else {}
        if decision is not None:
            changes[f"{path}.decision"] = encode(decision, DECISION_FIELDS)
        update: Document = {
            **ended,
            "$set": changes,
            "$push": {f"{path}.approvals": dict(write.approval)},
            "$inc": {"pendingCount": 0 if decision is None else -1, "version": 1},
        }
        return await self._update_then_append(
            write.event,
            write.run_id,
            compiled(write.condition),
            moved(update, 0 if decision is None else -1, utcnow()),  # suspended (``pending_call``)
            None if decision is None else _deadline_once_decided(write.index),
        )

    async def record_notice(self, write: writes.NoticeWrite) -> SnapshotDocument | None:
        return await self._update_then_append(
            write.event,
            write.run_id,
            compiled(write.condition),
            {"$set": {f"toolCalls.{write.index}.{write.notice}": True, "updatedAt": write.now}, "$inc": {"version": 1}},
        )

    async def claim(self, write: writes.ClaimWrite) -> SnapshotDocument | None:
        doc = await self._update_then_append(
            write.events,
            write.run_id,
            merged(compiled(write.condition), NOT_FINISHED),
            {"$set": {"status": "resuming", "claim": write.document, "updatedAt": write.now}, "$inc": {"version": 1}},
        )
        if doc is not None:
            await self._updates_after(write.run_id, write.updates)
        return doc

    async def renew_claim(self, write: writes.ClaimRenewal) -> bool:
        async with reachable(), self._lock(write.run_id):
            result = await self._runs.update_one(compiled(write.condition), {"$set": {"claim.until": write.until}})
        return result.matched_count == 1

    async def replace_claimed(self, write: writes.ClaimedReplacement) -> SnapshotDocument | None:
        changes: Document = {
            "toolCalls": [encode_tool_call(c) for c in write.tool_calls],
            "pendingCount": write.pending_count,
            "status": "suspended",
            "claim": None,
            "lastError": None,
            "suspendedAt": write.now,
            "updatedAt": write.now,
            "expiresAt": write.expires_at,
            "queueAt": queue_at(write.expires_at, write.now, write.pending_count),
        }
        # held (resuming, so no question counted: a run is claimed with every call decided), now
        # suspended with ``pending_count`` questions
        changes = moved({"$set": changes}, write.pending_count, utcnow())["$set"]
        doc = await self._update_claimed_with_history(write, changes, write.history, write.history_id)
        if doc is not None:
            await self._updates_after(write.run_id, write.updates)
        return doc

    async def _update_claimed_with_history(
        self, write: writes.ClaimedReplacement | writes.ClaimRelease, changes: Document, history: bytes, history_id: str
    ) -> SnapshotDocument | None:
        """Set ``changes`` and point the snapshot to a new history, only while ``write.by`` holds
        the claim, with ``write.event``.

        The history is written under its new id first, so a lost claim never overwrites the one
        another instance relies on; then whichever history the snapshot no longer points to is
        deleted (never the live one).
        """
        held = compiled(write.condition)
        async with reachable():
            current = await self._runs.find_one(held, {"historyId": 1})
        if current is None:
            return None
        await self._write_history(history_id, write.run_id, history)
        doc = await self._update_then_append(
            write.event, write.run_id, held, {"$set": {**changes, "historyId": history_id}, "$inc": {"version": 1}}
        )
        await self._delete_history(current["historyId"] if doc is not None else history_id)
        return doc

    async def delete_claimed(self, write: writes.ClaimedDeletion) -> bool:
        """With ``event``: recorded inside the snapshot first (still under the claim), appended,
        then the snapshot deleted. A process dying in between leaves a snapshot that is never
        claimed or listed as stalled again, and that ``complete_pending_events`` deletes after
        appending the event. Once it is recorded the run is finished and its history read by no
        one, so the history's deletion and ``updates`` are sent beside the append; without
        ``key``, the snapshot's deletion is then sent behind the call (``_behind``: the run
        already reads as gone, and a failed deletion is the sweeper's, as above). ``key``'s
        answer is written after the snapshot's deletion, a write of its own."""
        run_id, event, held = write.run_id, write.event, compiled(write.condition)
        marked: Document | None = None
        if event is not None:  # recorded first, with the run's removal from its counts (``_leaving``)
            marked = cast(Document | None, await self._update(run_id, held, _leaving(encode(event, EVENT_FIELDS))))
            if marked is None:
                return False
            pending = with_run_keys(marked.get("pendingEvents") or [], marked)
            if self.before_event is not None:
                await self.before_event(pending)
            # finished from here: what is left of the run besides its events are independent writes
            await asyncio.gather(
                self._append_each(pending, run_id),
                self._delete_history(marked["historyId"]),
                self._updates_after(run_id, write.updates),
            )
            await self._count_added(marked)
            if write.key is None:
                self._behind.start(run_id, self._delete_finished(run_id, held))
                return True
        async with reachable(), self._lock(run_id):
            doc = await deleted_one(self._runs, held)
        if doc is None:
            return False
        if marked is None:  # not on the runtime's path: counted after the deletion (docs/storage.md)
            await self._count_added(doc)
            async with reachable():
                await self._counts.record(doc, "d")
            await asyncio.gather(self._delete_history(doc["historyId"]), self._updates_after(run_id, write.updates))
        if write.key is not None:
            await self.complete_idempotency_key(write.key)
        return True

    async def _delete_finished(self, run_id: str, held: Document) -> None:
        """``delete_claimed``'s deletion of a snapshot whose ``completed`` event is recorded and
        appended (behind the call)."""
        async with reachable(), self._lock(run_id):
            await deleted_one(self._runs, held)

    async def _count_added(self, doc: Document) -> None:
        """Write run ``doc``'s ``i`` entries before its deletion if its insert left them unwritten
        (``counts``); its ``d`` entries come from its ``completed`` event (``record_removals``)."""
        if added_at(doc) is not None:
            async with reachable():
                await self._counts.record(doc, "i")

    async def release_claim(self, write: writes.ClaimRelease) -> SnapshotDocument | None:
        changes: Document = {"status": "suspended", "claim": None, "lastError": dict(write.error)}
        changes["updatedAt"] = write.now
        if write.history is None or write.history_id is None:
            doc = await self._update_then_append(
                write.event, write.run_id, compiled(write.condition), {"$set": changes, "$inc": {"version": 1}}
            )
        else:
            doc = await self._update_claimed_with_history(write, changes, write.history, write.history_id)
        if doc is not None:
            await self._updates_after(write.run_id, write.updates)
        return doc

    async def list_stalled_runs(self, *, now: datetime, idle_before: datetime, limit: int) -> list[SnapshotDocument]:
        query = merged(compiled(rules.stalled(now, idle_before)), NOT_FINISHED)
        order = [("updatedAt", ASCENDING), ("_id", ASCENDING)]
        async with reachable():
            docs = await read_page(self._runs.find(query).sort(order), limit)
        return read_snapshots(docs)

    async def list_expired_runs(self, *, now: datetime, limit: int) -> list[SnapshotDocument]:
        async with reachable():
            docs = await read_page(self._expired_cursor(now), limit)
        return read_snapshots(docs)

    def _expired_cursor(self, now: datetime) -> Any:
        return self._runs.find(compiled(rules.expired(now))).sort(EXPIRY_ORDER)

    async def explain_expired_runs(self, *, now: datetime, limit: int) -> Mapping[str, Any]:
        """The server's query plan of ``list_expired_runs`` (index checks)."""
        async with reachable():
            return cast(Mapping[str, Any], await page(self._expired_cursor(now), limit).explain())


def _leaving(event: Document) -> Document:
    """The update recording ``event`` (stored form) inside a run about to be deleted, with the
    run's removal from its counts: ``countsPending.removed`` on the run and on the event (whose
    ``d`` entries the sweeper writes once the run is gone: ``KeptCounts.record_removals``), so the
    approval's path writes no count."""
    now = utcnow()
    return {
        "$push": {"pendingEvents": {**event, EVENT_MARKER: now}},
        "$set": {f"{MARKER}.removed": now},
        "$min": {f"{MARKER}.since": now},
    }


__all__ = ["MongoRunTransitions"]
