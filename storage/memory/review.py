"""The memory store's reviewers' queue: the runs with a pending question, read in queue order
(``QueueKey``) from ``indexes.QueueIndex``, and the review claims written on their calls
(``ReviewQueueStore``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..documents import EventDocument, ReviewClaimDocument, SnapshotDocument
from ..protocol import QueueFilter, QueueKey, ReviewCandidates, ReviewClaimWrite
from ..rules import matches
from .copying import copied
from .indexes import RunIndexes


def in_queue_filter(f: QueueFilter, doc: SnapshotDocument) -> bool:
    """Whether ``doc`` passes the store's part of the queue's filter (``QueueFilter``)."""
    deadline = doc.get("expiresAt")
    return f.admits(doc["agentId"], doc["threadId"], doc["resourceId"]) and (
        f.expires_before is None or (deadline is not None and deadline < f.expires_before)
    )


class MemoryReviewQueue:
    """``ReviewQueueStore`` of ``MemoryRunStore`` (which keeps ``_indexes`` current on every write)."""

    _runs: dict[str, SnapshotDocument]
    _indexes: RunIndexes

    if TYPE_CHECKING:  # MemoryRunStore's

        def _written(
            self, doc: SnapshotDocument, now: datetime, events: Sequence[EventDocument]
        ) -> SnapshotDocument: ...

    async def list_review_runs(
        self, queue_filter: QueueFilter, *, limit: int, after: QueueKey | None = None
    ) -> list[SnapshotDocument]:
        return self._first(self._indexes.queue.after(after, queue_filter), queue_filter, limit)

    async def count_review_questions(self, queue_filter: QueueFilter) -> int:
        if queue_filter.expires_before is None:
            return self._indexes.queue.count(queue_filter)
        total = 0  # a walk of the runs due before the bound, in queue order: O(matches)
        for run_id in self._indexes.queue.due_before(queue_filter.expires_before, queue_filter):
            doc = self._runs[run_id]
            if doc["parentRunId"] is None and in_queue_filter(queue_filter, doc):
                total += doc["pendingCount"]
        return total

    async def list_review_candidates(
        self, queue_filter: QueueFilter, candidates: ReviewCandidates, *, limit: int, after: str | None = None
    ) -> list[SnapshotDocument]:
        return self._first(self._indexes.queue.candidates(candidates, after), queue_filter, limit)

    def _first(self, run_ids: Iterable[str], queue_filter: QueueFilter, limit: int) -> list[SnapshotDocument]:
        """Copies of the first ``limit`` runs of ``run_ids`` that ``queue_filter`` admits."""
        found: list[SnapshotDocument] = []
        if limit <= 0:
            return found
        for run_id in run_ids:
            doc = self._runs[run_id]
            if in_queue_filter(queue_filter, doc):
                found.append(copied(doc))
                if len(found) >= limit:
                    break
        return found

    async def record_review_claim(self, write: ReviewClaimWrite) -> SnapshotDocument | None:
        doc = self._runs.get(write.run_id)
        if doc is None or not matches(write.condition, doc):
            return None
        kept: list[Any] = copied([write.claim, write.event])  # before changing anything
        kept_claim: ReviewClaimDocument | None = kept[0]
        kept_event: EventDocument = kept[1]
        call = doc["toolCalls"][write.index]
        if kept_claim is None:
            call.pop("reviewClaim", None)
        else:
            call["reviewClaim"] = kept_claim
        return self._written(doc, write.now, [kept_event])


__all__ = ["MemoryReviewQueue", "in_queue_filter"]
