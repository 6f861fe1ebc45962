"""The memory store's ``RunStore``: runs and histories by id, listed through sorted indexes
(``indexes``: each write re-indexes its run in one call), every condition of a write and of the
sweeper's reads applied as ``storage.rules`` defines it (``rules.matches``)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import datetime

from .. import rules
from .._listing_index import expiring_page
from .._query import normalized_filter
from ..documents import EventDocument, RunUpdateBatchDocument, SnapshotDocument
from ..protocol import EVERY_RUN, DuplicateRunError, IdempotencyKeyTakenError, RunFilter, RunPage, event_list, writes
from ..rules import matches
from .copying import copied, kept
from .events import MemoryEventLog
from .indexes import UNCHANGED, RunIndexes, Unchanged
from .keys import MemoryIdempotencyKeys
from .review import MemoryReviewQueue
from .run_updates import MemoryRunUpdateLog


class MemoryRunStore(MemoryReviewQueue, MemoryEventLog, MemoryIdempotencyKeys, MemoryRunUpdateLog):
    """``RunStore`` in process, with the ``EventLog`` and ``RunUpdateLog`` its writes append to in
    the same step."""

    def __init__(self) -> None:
        super().__init__()
        self._runs: dict[str, SnapshotDocument] = {}
        self._histories: dict[str, bytes] = {}
        self._indexes = RunIndexes()

    # -- reading -------------------------------------------------------------------------------
    def _owned(self, agent_id: str, run_id: str) -> SnapshotDocument | None:
        doc = self._runs.get(run_id)
        return doc if doc is not None and matches(rules.owned(agent_id, run_id), doc) else None

    async def get(self, agent_id: str, run_id: str) -> SnapshotDocument | None:
        doc = self._owned(agent_id, run_id)
        return copied(doc) if doc is not None else None

    async def get_many(self, run_ids: Sequence[str]) -> list[SnapshotDocument]:
        return [copied(self._runs[i]) for i in dict.fromkeys(run_ids) if i in self._runs]

    async def list_runs(
        self, agent_id: str, run_filter: RunFilter, window: RunPage = EVERY_RUN
    ) -> list[SnapshotDocument]:
        normalized = normalized_filter(run_filter)
        if normalized.expires_before is not None:
            keys = expiring_page(self._expiring_matches(agent_id, normalized), window)
            return [copied(self._runs[run_id]) for _, run_id in keys]
        return [copied(self._runs[run_id]) for run_id in self._indexes.listing.page(agent_id, normalized, window)]

    async def count_runs(self, agent_id: str, run_filter: RunFilter) -> int:
        normalized = normalized_filter(run_filter)
        if normalized.expires_before is not None:
            return len(self._expiring_matches(agent_id, normalized))
        return self._indexes.listing.count(agent_id, normalized)

    def _expiring_matches(self, agent_id: str, run_filter: RunFilter) -> list[SnapshotDocument]:
        """The agent's runs expiring before ``run_filter.expires_before`` that pass its other
        fields: a walk of the agent's deadlines up to the bound, so it costs O(log n + matches)."""
        f = run_filter
        if f.expires_before is None:
            return []
        found = []
        for run_id in self._indexes.deadlines.of_agent_before(agent_id, f.expires_before):
            doc = self._runs[run_id]
            if (
                (f.thread_id is None or doc["threadId"] == f.thread_id)
                and (f.resource_id is None or doc["resourceId"] == f.resource_id)
                and (f.resource_ids is None or doc["resourceId"] in f.resource_ids)
                and (f.from_date is None or doc["createdAt"] >= f.from_date)
                and (f.to_date is None or doc["createdAt"] <= f.to_date)
            ):
                found.append(doc)
        return found

    async def load_history(self, agent_id: str, run_id: str, *, history_id: str | None = None) -> bytes | None:
        if history_id is not None and history_id in self._histories:  # never rewritten under its id
            return self._histories[history_id]
        doc = self._owned(agent_id, run_id)
        return self._histories.get(doc["historyId"]) if doc is not None else None

    # -- writing -------------------------------------------------------------------------------
    async def insert(self, snapshot: SnapshotDocument, history: bytes, *, event: writes.Events = None) -> None:
        events, _, _ = kept(event_list(event))
        await self.insert_many([(snapshot, history)])
        self._append(events)  # insert_many never awaits: the same step of the event loop

    async def insert_many(self, snapshots: Sequence[tuple[SnapshotDocument, bytes]]) -> None:
        self._refuse_duplicates(snapshots)
        docs = [copied(snapshot) for snapshot, _ in snapshots]
        for doc, (_, history) in zip(docs, snapshots, strict=True):
            self._store(doc, bytes(history))
        self._indexes.add(docs)

    def adopt_many(self, snapshots: Sequence[tuple[SnapshotDocument, bytes]]) -> None:
        """``insert_many`` without copying: the store takes the documents over (data generator).

        For loading a million generated runs at start (``RUNSGATE_SEED_RUNS``): copying would
        double the time. The caller must not touch the documents afterwards; nested values
        (``args``, ``suspendPayload``, ``resumeSchema``) may be shared between documents, since the
        store never changes them in place. Raises ``DuplicateRunError`` (nothing inserted).
        """
        self._refuse_duplicates(snapshots)
        for doc, history in snapshots:
            self._store(doc, history)
        self._indexes.add([doc for doc, _ in snapshots])

    def _refuse_duplicates(self, snapshots: Sequence[tuple[SnapshotDocument, bytes]]) -> None:
        ids = [s["_id"] for s, _ in snapshots]
        if len(set(ids)) != len(ids) or any(i in self._runs for i in ids):
            raise DuplicateRunError(f"a run with one of these ids is already stored: {ids[:5]}")

    def _store(self, doc: SnapshotDocument, history: bytes) -> None:
        """Keep ``doc`` and its ``history``, its ``expiresAt`` the earliest deadline of its pending
        calls (not indexed yet)."""
        self._runs[doc["_id"]] = doc
        self._histories[doc["historyId"]] = history
        deadline = rules.earliest_deadline(doc["toolCalls"])
        if deadline is None:
            doc.pop("expiresAt", None)
        else:
            doc["expiresAt"] = deadline

    async def record_decision(self, write: writes.DecisionWrite) -> SnapshotDocument | None:
        doc = self._runs.get(write.run_id)
        decided = None if doc is None else rules.deciding(doc, write.condition, write.index, write.claiming)
        if doc is None or decided is None:
            return None
        claim = write.claim if decided.claimed else None
        events, updates, kept_decision = kept(
            [*write.events, *(claim.events if claim else ())], claim.updates if claim else (), write.decision
        )
        if write.key is not None:  # in the same step as the decision
            taken = await self.reserve_idempotency_key(write.key)
            if taken is not None:
                raise IdempotencyKeyTakenError(taken)
        if claim is not None:
            doc["status"] = "resuming"
            doc["claim"] = claim.document.copy()
        call = doc["toolCalls"][write.index]
        call["decision"] = kept_decision
        call.pop("reviewClaim", None)
        doc["pendingCount"] = decided.pending_count
        return self._written(doc, write.now, events, updates, expires_at=decided.expires_at)

    async def record_approval(self, write: writes.ApprovalWrite) -> SnapshotDocument | None:
        doc = self._meeting(write.run_id, write.condition)
        if doc is None:
            return None
        events, _, (kept_approval, kept_decision) = kept(event_list(write.event), (), [write.approval, write.decision])
        call = doc["toolCalls"][write.index]
        call["approvals"] = [*(call.get("approvals") or []), kept_approval]
        if write.ends_review_claim():
            call.pop("reviewClaim", None)
        if write.decision is None:
            return self._written(doc, write.now, events)
        call["decision"] = kept_decision
        return self._record_decided(doc, write.now, events)

    async def record_notice(self, write: writes.NoticeWrite) -> SnapshotDocument | None:
        doc = self._meeting(write.run_id, write.condition)
        if doc is None:
            return None
        events, _, _ = kept([write.event])
        doc["toolCalls"][write.index][write.notice] = True
        return self._written(doc, write.now, events)

    def _record_decided(
        self,
        doc: SnapshotDocument,
        now: datetime,
        events: Sequence[EventDocument],
        updates: Sequence[RunUpdateBatchDocument] = (),
    ) -> SnapshotDocument:
        """One more call of ``doc`` decided: its count and deadline (``rules.derived``), its
        ``events`` and ``updates``."""
        derived = rules.derived(doc)
        doc["pendingCount"] = derived["pendingCount"]
        return self._written(doc, now, events, updates, expires_at=derived["expiresAt"])

    async def claim(self, write: writes.ClaimWrite) -> SnapshotDocument | None:
        doc = self._meeting(write.run_id, write.condition)
        if doc is None:
            return None
        events, updates, _ = kept(write.events, write.updates)
        doc["status"] = "resuming"
        doc["claim"] = write.document.copy()
        return self._written(doc, write.now, events, updates)

    def _meeting(self, run_id: str, condition: rules.Condition) -> SnapshotDocument | None:
        """The run, when it meets ``condition`` (a write's), else ``None``."""
        doc = self._runs.get(run_id)
        return doc if doc is not None and matches(condition, doc) else None

    async def renew_claim(self, write: writes.ClaimRenewal) -> bool:
        doc = self._meeting(write.run_id, write.condition)
        if doc is None or doc["claim"] is None:
            return False
        doc["claim"]["until"] = write.until
        return True

    async def replace_claimed(self, write: writes.ClaimedReplacement) -> SnapshotDocument | None:
        doc = self._meeting(write.run_id, write.condition)
        if doc is None:
            return None
        events, updates, kept_calls = kept(event_list(write.event), write.updates, write.tool_calls)
        self._swap_history(doc, write.history, write.history_id)
        doc["toolCalls"] = kept_calls
        doc["pendingCount"] = write.pending_count
        doc["status"] = "suspended"
        doc["claim"] = None
        doc["lastError"] = None
        doc["suspendedAt"] = write.now
        return self._written(doc, write.now, events, updates, expires_at=write.expires_at)

    async def delete_claimed(self, write: writes.ClaimedDeletion) -> bool:
        doc = self._meeting(write.run_id, write.condition)
        if doc is None:
            return False
        events, updates, result = kept(write.events, write.updates, None if write.key is None else write.key.result)
        del self._runs[write.run_id]
        self._indexes.drop(doc)
        self._histories.pop(doc["historyId"], None)
        self._append(events)
        self._add_run_updates(updates)
        if write.key is not None:
            self._complete_key(write.key, result)
        return True

    async def release_claim(self, write: writes.ClaimRelease) -> SnapshotDocument | None:
        doc = self._meeting(write.run_id, write.condition)
        if doc is None:
            return None
        events, updates, kept_error = kept(event_list(write.event), write.updates, write.error)
        if write.history is not None and write.history_id is not None:
            self._swap_history(doc, write.history, write.history_id)
        doc["status"] = "suspended"
        doc["claim"] = None
        doc["lastError"] = kept_error
        return self._written(doc, write.now, events, updates)

    async def list_stalled_runs(self, *, now: datetime, idle_before: datetime, limit: int) -> list[SnapshotDocument]:
        condition = rules.stalled(now, idle_before)
        stalled = [doc for doc in (self._runs[run_id] for run_id in self._indexes.decided) if matches(condition, doc)]
        stalled.sort(key=lambda doc: (doc["updatedAt"], doc["_id"]))
        return [copied(doc) for doc in stalled[:limit]]

    async def list_expired_runs(self, *, now: datetime, limit: int) -> list[SnapshotDocument]:
        condition = rules.expired(now)
        due = map(self._runs.__getitem__, self._indexes.deadlines.due(now))
        found = (doc for doc in due if matches(condition, doc))
        return [copied(doc) for doc in itertools.islice(found, limit)]

    def _swap_history(self, doc: SnapshotDocument, history: bytes, history_id: str) -> None:
        """Point ``doc`` to ``history`` stored under the new ``history_id``; forget the old one."""
        self._histories.pop(doc["historyId"], None)
        self._histories[history_id] = bytes(history)
        doc["historyId"] = history_id

    def _written(
        self,
        doc: SnapshotDocument,
        now: datetime,
        events: Sequence[EventDocument],
        updates: Sequence[RunUpdateBatchDocument] = (),
        *,
        expires_at: datetime | Unchanged | None = UNCHANGED,
    ) -> SnapshotDocument:
        """The end of a write that changed ``doc`` at ``now``: its time and version, its indexes
        (``RunIndexes.written``, with its new deadline ``expires_at`` when the write moved it), then
        its ``events`` and run-update batches kept; a copy of ``doc`` as written."""
        doc["updatedAt"] = now
        doc["version"] += 1
        self._indexes.written(doc, expires_at)
        self._append(events)
        if updates:
            self._add_run_updates(updates)
        return copied(doc)


__all__ = ["MemoryRunStore"]
