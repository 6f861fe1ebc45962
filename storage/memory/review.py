"""The memory store's reviewers' queue: runs with a pending question, kept sorted in queue order
(``QueueKey``), and the review claims written on their calls (``ReviewQueueStore``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sortedcontainers import SortedList

from ..documents import EventDocument, ReviewClaimDocument, SnapshotDocument
from ..protocol import QueueFilter, QueueKey, ReviewClaimWrite, queue_key
from ..rules import matches
from .copying import copied


class QueueIndex:
    """Queue-order keys of the runs with a pending call; ``refresh`` costs O(log n), a page walks
    only from its cursor on."""

    def __init__(self) -> None:
        self._keys = SortedList()
        self._by_run: dict[str, tuple[Any, ...]] = {}

    def refresh(self, doc: SnapshotDocument) -> None:
        """Re-index ``doc`` after a write (listed while it is suspended with a pending call)."""
        self.drop(doc["_id"])
        if doc["status"] == "suspended" and doc["pendingCount"] > 0:
            key = queue_key(doc).order()
            self._keys.add(key)
            self._by_run[doc["_id"]] = key

    def drop(self, run_id: str) -> None:
        """Forget the run (deleted, or no longer waiting)."""
        key = self._by_run.pop(run_id, None)
        if key is not None:
            self._keys.remove(key)

    def after(self, after: QueueKey | None) -> Any:
        """Run ids in queue order, strictly after ``after``."""
        keys = self._keys if after is None else self._keys.irange(minimum=after.order(), inclusive=(False, True))
        return (key[-1] for key in keys)


def in_queue_filter(f: QueueFilter, doc: SnapshotDocument) -> bool:
    """Whether ``doc`` passes the store's part of the queue's filter (``QueueFilter``)."""
    deadline = doc.get("expiresAt")
    return (
        (f.agent_ids is None or doc["agentId"] in f.agent_ids)
        and (f.thread_id is None or doc["threadId"] == f.thread_id)
        and (f.resource_id is None or doc["resourceId"] == f.resource_id)
        and (f.resource_ids is None or doc["resourceId"] in f.resource_ids)
        and (f.expires_before is None or (deadline is not None and deadline < f.expires_before))
    )


class MemoryReviewQueue:
    """``ReviewQueueStore`` of ``MemoryRunStore`` (which keeps ``_queue`` current on every write)."""

    _runs: dict[str, SnapshotDocument]
    _queue: QueueIndex

    if TYPE_CHECKING:  # MemoryRunStore's and MemoryEventLog's

        def _touch(self, doc: SnapshotDocument, now: datetime) -> None: ...

        def _append(self, event: EventDocument | Sequence[EventDocument] | None) -> None: ...

    async def list_review_runs(
        self, queue_filter: QueueFilter, *, limit: int, after: QueueKey | None = None
    ) -> list[SnapshotDocument]:
        found: list[SnapshotDocument] = []
        if limit <= 0:
            return found
        for run_id in self._queue.after(after):
            doc = self._runs[run_id]
            if in_queue_filter(queue_filter, doc):
                found.append(copied(doc))
                if len(found) >= limit:
                    break
        return found

    async def count_review_questions(self, queue_filter: QueueFilter) -> int:
        total = 0
        for run_id in self._queue.after(None):
            doc = self._runs[run_id]
            if doc["parentRunId"] is None and in_queue_filter(queue_filter, doc):
                total += doc["pendingCount"]
        return total

    async def record_review_claim(self, write: ReviewClaimWrite) -> SnapshotDocument | None:
        doc = self._runs.get(write.run_id)
        if doc is None or not matches(write.condition(), doc):
            return None
        kept: list[Any] = copied([write.claim, write.event])  # before changing anything
        kept_claim: ReviewClaimDocument | None = kept[0]
        kept_event: EventDocument = kept[1]
        call = doc["toolCalls"][write.index]
        if kept_claim is None:
            call.pop("reviewClaim", None)
        else:
            call["reviewClaim"] = kept_claim
        self._touch(doc, write.now)
        self._append([kept_event])
        return copied(doc)


__all__ = ["MemoryReviewQueue", "QueueIndex", "in_queue_filter"]
