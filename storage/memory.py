"""``MemorySnapshotStore``: the embedded default store, lost when the process ends
(docs/storage.md "Stores").

Same semantics and contract tests as the other stores; each method runs without awaiting in
between, so every write is atomic within the event loop. Listing reads sorted per-filter indexes
(``_listing_index``): O(log n + page) per page.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

from sortedcontainers import SortedKeyList, SortedList

from ._listing_index import ListingIndex, expiring_page
from ._query import normalized_filter
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
from .protocol import DuplicateRunError, NewerSchemaError, RunFilter, SortKey, event_list
from .rules import earliest_deadline
from .strict_json import NotStrictJsonError

_T = TypeVar("_T")
_IMMUTABLE = (str, int, float, bool, bytes, datetime, type(None))


def _event_id(event: EventDocument) -> str:
    return event["_id"]


def _copy(value: _T) -> _T:
    """A deep copy of a stored document or value: dicts and lists are copied, immutable scalars
    (str, numbers, datetimes, None) shared, which costs less than ``copy.deepcopy`` on these
    shapes; anything else falls back to it.

    Raises:
        storage.strict_json.NotStrictJsonError: A float that is not finite, which the other stores
            cannot hold either (RFC 8259 JSON).
    """
    return cast(_T, _copy_any(value))


def _copy_any(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {k: _copy_any(v) for k, v in value.items()}
    if kind is list:
        return [_copy_any(v) for v in value]
    if kind is float and not math.isfinite(value):
        raise NotStrictJsonError("a float that is not finite (NaN, Infinity) has no JSON form")
    if isinstance(value, _IMMUTABLE):
        return value
    return copy.deepcopy(value)


class MemorySnapshotStore:
    """In-process ``SnapshotStore``; documents are deep-copied in and out."""

    def __init__(self) -> None:
        self._runs: dict[str, SnapshotDocument] = {}
        self._histories: dict[str, bytes] = {}
        self._listing = ListingIndex()
        self._events: dict[tuple[str, str], list[EventDocument]] = {}
        """(agentId, runId) -> the run's events, in append order."""
        self._agent_events: dict[str, SortedKeyList] = {}
        """agentId -> its events sorted by ``_id`` (creation order), for ``list_events_after``."""
        self._keys: dict[str, IdempotencyDocument] = {}
        self._webhook_cursors: dict[str, str] = {}
        self._deliveries: dict[str, WebhookDeliveryDocument] = {}
        self._decided: set[str] = set()
        """Ids of runs whose every call is decided (``pendingCount == 0``): what the sweeper reads
        (``list_stalled_runs``), so it never scans the waiting runs (MongoDB: index ``stalled``)."""
        self._expiring = SortedList()
        """``(expiresAt, runId)`` of every run with a deadline: the sweeper's expiry pass reads
        only the expired front of it (``list_expired_runs``; SQLite and MongoDB: an index)."""
        self._expiring_by_agent: dict[str, SortedList] = {}
        """agentId -> ``(expiresAt, runId)`` of its runs with a deadline (the ``expiresBefore`` filter)."""
        self._updates: dict[tuple[str, str], SortedKeyList] = {}
        """(agentId, runId) -> the run's update batches sorted by ``_id``."""
        self._updates_written = SortedList()
        """``(at, agentId, runId, _id)`` of every update batch: what pruning reads, oldest first."""

    async def open(self) -> None:
        """Nothing to connect; refuses snapshots of a newer schema (``NewerSchemaError``)."""
        newest = max((doc["schemaVersion"] for doc in self._runs.values()), default=SCHEMA_VERSION)
        if newest > SCHEMA_VERSION:
            raise NewerSchemaError(newest, SCHEMA_VERSION)

    async def close(self) -> None:
        """Nothing to release."""

    async def ping(self) -> None:
        """Always reachable."""

    # -- reading -------------------------------------------------------------------------------
    def _owned(self, agent_id: str, run_id: str) -> SnapshotDocument | None:
        doc = self._runs.get(run_id)
        return doc if doc is not None and doc["agentId"] == agent_id else None

    async def get(self, agent_id: str, run_id: str) -> SnapshotDocument | None:
        doc = self._owned(agent_id, run_id)
        return _copy(doc) if doc is not None else None

    async def get_many(self, run_ids: Sequence[str]) -> list[SnapshotDocument]:
        return [_copy(self._runs[i]) for i in dict.fromkeys(run_ids) if i in self._runs]

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
        normalized = normalized_filter(run_filter)
        if normalized.expires_before is not None:
            keys = expiring_page(
                self._expiring_matches(agent_id, normalized),
                limit=limit,
                skip=skip,
                after=after,
                before=before,
                from_end=from_end,
            )
            return [_copy(self._runs[run_id]) for _, run_id in keys]
        run_ids = self._listing.page(
            agent_id,
            normalized,
            limit=limit,
            skip=skip,
            after=after,
            before=before,
            from_end=from_end,
        )
        return [_copy(self._runs[run_id]) for run_id in run_ids]

    async def count_runs(self, agent_id: str, run_filter: RunFilter) -> int:
        normalized = normalized_filter(run_filter)
        if normalized.expires_before is not None:
            return len(self._expiring_matches(agent_id, normalized))
        return self._listing.count(agent_id, normalized)

    def _expiring_matches(self, agent_id: str, run_filter: RunFilter) -> list[SnapshotDocument]:
        """The agent's runs expiring before ``run_filter.expires_before`` that pass its other
        fields: a walk of the agent's deadlines up to the bound, so it costs O(log n + matches)."""
        deadlines = self._expiring_by_agent.get(agent_id)
        if deadlines is None or run_filter.expires_before is None:
            return []
        f = run_filter
        found = []
        for _, run_id in deadlines.irange(maximum=(f.expires_before,), inclusive=(True, False)):
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

    async def load_history(self, agent_id: str, run_id: str) -> bytes | None:
        doc = self._owned(agent_id, run_id)
        return self._histories.get(doc["historyId"]) if doc is not None else None

    # -- writing -------------------------------------------------------------------------------
    async def insert(
        self,
        snapshot: SnapshotDocument,
        history: bytes,
        *,
        event: EventDocument | Sequence[EventDocument] | None = None,
    ) -> None:
        await self.insert_many([(snapshot, history)])
        self._append(event)  # insert_many never awaits: the same step of the event loop

    async def insert_many(self, snapshots: Sequence[tuple[SnapshotDocument, bytes]]) -> None:
        ids = [s["_id"] for s, _ in snapshots]
        if len(set(ids)) != len(ids) or any(i in self._runs for i in ids):
            raise DuplicateRunError(f"a run with one of these ids is already stored: {ids[:5]}")
        docs = [_copy(snapshot) for snapshot, _ in snapshots]
        for doc, (_, history) in zip(docs, snapshots, strict=True):
            self._runs[doc["_id"]] = doc
            self._histories[doc["historyId"]] = bytes(history)
            if doc["pendingCount"] == 0:
                self._decided.add(doc["_id"])
            self._set_deadline(doc)
        if len(docs) == 1:
            self._listing.add(docs[0])
        else:
            self._listing.add_many(docs)

    def adopt_many(self, snapshots: Sequence[tuple[SnapshotDocument, bytes]]) -> None:
        """``insert_many`` without copying: the store takes the documents over (data generator).

        For loading a million generated runs at start (``RUNSGATE_SEED_RUNS``): copying would
        double the time. The caller must not touch the documents afterwards; nested values
        (``args``, ``suspendPayload``, ``resumeSchema``) may be shared between documents, since the
        store never changes them in place. Raises ``DuplicateRunError`` (nothing inserted).
        """
        ids = [s["_id"] for s, _ in snapshots]
        if len(set(ids)) != len(ids) or any(i in self._runs for i in ids):
            raise DuplicateRunError(f"a run with one of these ids is already stored: {ids[:5]}")
        for doc, history in snapshots:
            self._runs[doc["_id"]] = doc
            self._histories[doc["historyId"]] = history
            if doc["pendingCount"] == 0:
                self._decided.add(doc["_id"])
            self._set_deadline(doc)
        self._listing.add_many([doc for doc, _ in snapshots])

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
        found = self._pending_call(agent_id, run_id, index, tool_call_id, question_id)
        if found is None:
            return None
        doc, call = found
        call["decision"] = _copy(decision)
        return self._record_decided(doc, now, [*preceding_events, *event_list(event)])

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
        found = self._pending_call(agent_id, run_id, index, tool_call_id, question_id)
        if found is None or len(found[1].get("approvals") or []) != approvals_before:
            return None
        doc, call = found
        call["approvals"] = [*(call.get("approvals") or []), _copy(approval)]
        if decision is None:
            self._touch(doc, now)
            self._append(event)
            return _copy(doc)
        call["decision"] = _copy(decision)
        return self._record_decided(doc, now, event_list(event))

    def _pending_call(
        self, agent_id: str, run_id: str, index: int, tool_call_id: str, question_id: str | None
    ) -> tuple[SnapshotDocument, ToolCallDocument] | None:
        """The suspended run and its call ``index``, when that call is still the undecided
        ``tool_call_id`` waiting on ``question_id`` (the conditions of every decision's write)."""
        doc = self._owned(agent_id, run_id)
        if doc is None or doc["status"] != "suspended" or not 0 <= index < len(doc["toolCalls"]):
            return None
        call = doc["toolCalls"][index]
        if call["toolCallId"] != tool_call_id or call.get("questionId") != question_id or call["decision"] is not None:
            return None
        return doc, call

    def _record_decided(
        self, doc: SnapshotDocument, now: datetime, events: Sequence[EventDocument]
    ) -> SnapshotDocument:
        """One more call of ``doc`` decided: its count, its deadline and ``events``."""
        doc["pendingCount"] -= 1
        self._set_deadline(doc)
        self._touch(doc, now)
        self._append(events)
        return _copy(doc)

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
        doc = self._owned(agent_id, run_id)
        if doc is None:
            return None
        ready = doc["status"] == "suspended" and doc["pendingCount"] == 0
        expired = doc["status"] == "resuming" and doc["claim"] is not None and doc["claim"]["until"] < now
        if not (ready or expired) or (version is not None and doc["version"] != version):
            return None
        doc["status"] = "resuming"
        doc["claim"] = {"by": by, "until": until}
        self._touch(doc, now)
        self._append(events)
        return _copy(doc)

    def _held(self, agent_id: str, run_id: str, by: str) -> SnapshotDocument | None:
        doc = self._owned(agent_id, run_id)
        if doc is None or doc["status"] != "resuming" or doc["claim"] is None or doc["claim"]["by"] != by:
            return None
        return doc

    async def renew_claim(self, agent_id: str, run_id: str, *, by: str, until: datetime) -> bool:
        doc = self._held(agent_id, run_id, by)
        if doc is None or doc["claim"] is None:
            return False
        doc["claim"]["until"] = until
        return True

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
        doc = self._held(agent_id, run_id, by)
        if doc is None:
            return None
        self._swap_history(doc, history, history_id)
        doc["toolCalls"] = _copy(tool_calls)
        doc["pendingCount"] = sum(1 for c in tool_calls if c["decision"] is None)
        self._set_deadline(doc)
        doc["status"] = "suspended"
        doc["claim"] = None
        doc["lastError"] = None
        doc["suspendedAt"] = now
        self._touch(doc, now)
        self._append(event)
        return _copy(doc)

    async def delete_claimed(self, agent_id: str, run_id: str, *, by: str, event: EventDocument | None = None) -> bool:
        doc = self._held(agent_id, run_id, by)
        if doc is None:
            return False
        del self._runs[run_id]
        self._decided.discard(run_id)
        self._drop_deadline(doc)
        self._listing.remove(doc)
        self._histories.pop(doc["historyId"], None)
        self._append(event)
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
        doc = self._held(agent_id, run_id, by)
        if doc is None:
            return None
        if history is not None:
            if history_id is None:
                raise ValueError("a new history needs a new history_id")
            self._swap_history(doc, history, history_id)
        doc["status"] = "suspended"
        doc["claim"] = None
        doc["lastError"] = _copy(error)
        self._touch(doc, now)
        self._append(event)
        return _copy(doc)

    async def list_stalled_runs(self, *, now: datetime, idle_before: datetime, limit: int) -> list[SnapshotDocument]:
        stalled = [
            doc
            for doc in (self._runs[run_id] for run_id in self._decided)
            if doc["pendingCount"] == 0
            and (
                (doc["status"] == "resuming" and doc["claim"] is not None and doc["claim"]["until"] < now)
                or (doc["status"] == "suspended" and doc["lastError"] is None and doc["updatedAt"] < idle_before)
            )
        ]
        stalled.sort(key=lambda doc: (doc["updatedAt"], doc["_id"]))
        return [_copy(doc) for doc in stalled[:limit]]

    async def list_expired_runs(self, *, now: datetime, limit: int) -> list[SnapshotDocument]:
        found = self._expiring.irange(maximum=(now, chr(0x10FFFF)), inclusive=(True, True))
        return [_copy(self._runs[run_id]) for _, run_id in itertools.islice(found, limit)]

    def _set_deadline(self, doc: SnapshotDocument) -> None:
        """Set ``doc["expiresAt"]`` from its pending calls and re-index it (O(log n))."""
        self._drop_deadline(doc)
        deadline = earliest_deadline(doc["toolCalls"])
        doc.pop("expiresAt", None)
        if deadline is not None:
            doc["expiresAt"] = deadline
            key = (deadline, doc["_id"])
            self._expiring.add(key)
            by_agent = self._expiring_by_agent.get(doc["agentId"])
            if by_agent is None:
                by_agent = self._expiring_by_agent[doc["agentId"]] = SortedList()
            by_agent.add(key)

    def _drop_deadline(self, doc: SnapshotDocument) -> None:
        deadline = doc.get("expiresAt")
        if deadline is None:
            return
        key = (deadline, doc["_id"])
        self._expiring.discard(key)
        by_agent = self._expiring_by_agent.get(doc["agentId"])
        if by_agent is not None:
            by_agent.discard(key)
            if not by_agent:
                del self._expiring_by_agent[doc["agentId"]]

    def _swap_history(self, doc: SnapshotDocument, history: bytes, history_id: str) -> None:
        """Point ``doc`` to ``history`` stored under the new ``history_id``; forget the old one."""
        self._histories.pop(doc["historyId"], None)
        self._histories[history_id] = bytes(history)
        doc["historyId"] = history_id

    def _touch(self, doc: SnapshotDocument, now: datetime) -> None:
        doc["updatedAt"] = now
        doc["version"] += 1
        if doc["pendingCount"] == 0:
            self._decided.add(doc["_id"])
        else:
            self._decided.discard(doc["_id"])

    # -- audit log -----------------------------------------------------------------------------
    async def append_event(self, event: EventDocument) -> None:
        self._append(event)

    def _append(self, event: EventDocument | Sequence[EventDocument] | None) -> None:
        """Append ``event`` (one, several in order, or nothing for ``None``) without awaiting:
        after a state change, in the same step of the event loop, so the two form one unit of work."""
        for one in event_list(event):
            stored = _copy(one)
            self._events.setdefault((one["agentId"], one["runId"]), []).append(stored)
            by_agent = self._agent_events.get(one["agentId"])
            if by_agent is None:
                by_agent = self._agent_events[one["agentId"]] = SortedKeyList(key=_event_id)
            by_agent.add(stored)

    async def complete_pending_events(self, *, before: datetime, limit: int) -> int:
        """Nothing is ever pending: a change and its event are written at once."""
        return 0

    async def list_events(self, agent_id: str, run_id: str) -> list[EventDocument]:
        return await self.list_events_of_runs(agent_id, [run_id])

    async def list_events_of_runs(
        self, agent_id: str, run_ids: Sequence[str], *, resource_ids: frozenset[str] | None = None
    ) -> list[EventDocument]:
        events = [
            e
            for run_id in dict.fromkeys(run_ids)
            for e in self._events.get((agent_id, run_id), [])
            if resource_ids is None or e.get("resourceId") in resource_ids
        ]
        return _copy(sorted(events, key=lambda e: (e["at"], e["_id"])))

    async def list_events_after(
        self, agent_id: str, after_event_id: str | None, limit: int, *, resource_ids: frozenset[str] | None = None
    ) -> list[EventDocument]:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        events = self._agent_events.get(agent_id)
        if events is None:
            return []
        found = events.irange_key(min_key=after_event_id, inclusive=(False, True)) if after_event_id else iter(events)
        if resource_ids is not None:
            found = (e for e in found if e.get("resourceId") in resource_ids)
        return [_copy(e) for e in itertools.islice(found, limit)]

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
        existing = self._keys.get(key_id)
        if existing is not None and not _lapsed(existing, fingerprint, now):
            return _copy(existing)
        self._keys[key_id] = {
            "_id": key_id,
            "fingerprint": fingerprint,
            "result": None,
            "createdAt": now if existing is None else existing["createdAt"],
            "reservedBy": by,
            "reservedUntil": until,
        }
        return None

    def _reserved(self, key_id: str, by: str | None) -> IdempotencyDocument | None:
        doc = self._keys.get(key_id)
        if doc is None or doc["result"] is not None or (by is not None and doc.get("reservedBy") != by):
            return None
        return doc

    async def renew_idempotency_key(self, key_id: str, *, by: str, until: datetime) -> bool:
        doc = self._reserved(key_id, by)
        if doc is None:
            return False
        doc["reservedUntil"] = until
        return True

    async def complete_idempotency_key(self, key_id: str, result: dict[str, Any], *, by: str | None = None) -> None:
        doc = self._reserved(key_id, by)
        if doc is not None:
            doc["result"] = _copy(result)

    async def release_idempotency_key(self, key_id: str, *, by: str | None = None) -> None:
        if self._reserved(key_id, by) is not None:
            del self._keys[key_id]

    # -- webhook deliveries --------------------------------------------------------------------
    async def webhook_cursor(self, cursor_id: str) -> str | None:
        return self._webhook_cursors.get(cursor_id)

    async def advance_webhook_cursor(self, cursor_id: str, event_id: str) -> None:
        current = self._webhook_cursors.get(cursor_id)
        if current is None or event_id > current:
            self._webhook_cursors[cursor_id] = event_id

    async def add_webhook_deliveries(self, deliveries: Sequence[WebhookDeliveryDocument]) -> int:
        added = 0
        for delivery in deliveries:
            if delivery["_id"] not in self._deliveries:
                self._deliveries[delivery["_id"]] = _copy(delivery)
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
        due = sorted(
            (
                d
                for d in self._deliveries.values()
                if d["status"] == "pending"
                and d["nextAttemptAt"] <= now
                and (d["lease"] is None or d["lease"]["until"] < now)
                and (endpoint_id is None or d["endpointId"] == endpoint_id)
                and d["endpointId"] not in other_than
            ),
            key=lambda d: (d["nextAttemptAt"], d["_id"]),
        )[:limit]
        for delivery in due:
            delivery["lease"] = {"by": by, "until": until}
        return [_copy(d) for d in due]

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
        delivery = self._deliveries.get(delivery_id)
        if delivery is None or delivery["status"] != "pending":
            return False
        lease = delivery["lease"]
        if lease is None or lease["by"] != by:
            return False
        delivery["status"] = status
        delivery["attempts"] += 1
        delivery["lastAttemptAt"] = at
        delivery["nextAttemptAt"] = next_attempt_at
        delivery["lastStatusCode"] = status_code
        delivery["lastError"] = error
        delivery["finishedAt"] = None if status == "pending" else at
        delivery["lease"] = None
        return True

    async def list_webhook_deliveries(
        self,
        *,
        status: WebhookDeliveryStatus | None,
        resource_ids: frozenset[str] | None,
        limit: int,
        after: str | None = None,
    ) -> list[WebhookDeliveryDocument]:
        found = (
            d
            for _, d in sorted(self._deliveries.items(), reverse=True)
            if (after is None or d["_id"] < after)
            and (status is None or d["status"] == status)
            and (resource_ids is None or d["resourceId"] in resource_ids)
        )
        return [_copy(d) for d in itertools.islice(found, limit)]

    # -- run updates ---------------------------------------------------------------------------
    async def append_run_updates(self, batch: RunUpdateBatchDocument) -> None:
        key = (batch["agentId"], batch["runId"])
        batches = self._updates.get(key)
        if batches is None:
            batches = self._updates[key] = SortedKeyList(key=_batch_id)
        batches.add(_copy(batch))
        self._updates_written.add((batch["at"], batch["agentId"], batch["runId"], batch["_id"]))

    async def list_run_updates(
        self, agent_id: str, run_id: str, *, after: str | None, limit: int
    ) -> list[RunUpdateBatchDocument]:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        batches = self._updates.get((agent_id, run_id))
        if batches is None:
            return []
        found = batches.irange_key(min_key=after, inclusive=(False, True)) if after is not None else iter(batches)
        return [_copy(b) for b in itertools.islice(found, limit)]

    async def prune_run_updates(self, *, before: datetime, limit: int) -> int:
        pruned = 0
        while self._updates_written and pruned < limit and self._updates_written[0][0] < before:
            _, agent_id, run_id, batch_id = self._updates_written.pop(0)
            batches = self._updates[(agent_id, run_id)]
            batches.remove(next(batches.irange_key(batch_id, batch_id)))
            if not batches:
                del self._updates[(agent_id, run_id)]
            pruned += 1
        return pruned


def _batch_id(batch: RunUpdateBatchDocument) -> str:
    return batch["_id"]


def _lapsed(doc: IdempotencyDocument, fingerprint: str, now: datetime) -> bool:
    """A reservation without a result whose lease lapsed before ``now``, for the same arguments."""
    until = doc.get("reservedUntil")
    return doc["result"] is None and doc["fingerprint"] == fingerprint and until is not None and until < now


__all__ = ["MemorySnapshotStore"]
