"""The memory store's reviewers' queue: runs with a pending question, kept sorted in queue order
(``QueueKey``), and the review claims written on their calls (``ReviewQueueStore``)."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sortedcontainers import SortedList

from ..documents import EventDocument, ReviewClaimDocument, SnapshotDocument
from ..protocol import QueueFilter, QueueKey, ReviewCandidates, ReviewClaimWrite, queue_key
from ..rules import matches
from .copying import copied

Group = tuple[str | None, str | None, bool, bool]
"""A count's filter combination: ``(thread, resource, by thread, by resource)``."""


def _groups(doc: SnapshotDocument) -> list[Group]:
    """The filter combinations whose counts a run adds to (as ``run_counts`` keys the listing's)."""
    thread, resource = doc["threadId"], doc["resourceId"]
    groups: list[Group] = [(None, None, False, False)]
    if thread is not None:
        groups.append((thread, None, True, False))
    if resource is not None:
        groups.append((None, resource, False, True))
    if thread is not None and resource is not None:
        groups.append((thread, resource, True, True))
    return groups


Mark = tuple[str, str | None]
"""A candidate part a counted run belongs to: ``("approver", identity)``, ``("starter", identity)``
(``None``: in-process code), ``("unknown starter", None)``, ``("tool", name)``."""


def _marks(doc: SnapshotDocument) -> set[Mark]:
    """The candidate parts (``ReviewCandidates``) of a counted run: its pending calls' tools and
    approvers, and its starter."""
    pending = [call for call in doc["toolCalls"] if call["decision"] is None]
    marks: set[Mark] = {("tool", call["toolName"]) for call in pending}
    marks.update(("approver", a["decidedBy"]) for call in pending for a in call.get("approvals") or ())
    marks.add(("starter", doc["startedBy"]) if "startedBy" in doc else ("unknown starter", None))
    return marks


class QueueIndex:
    """Queue-order keys of the runs with a pending call, and the queue's kept counts: per filter
    combination and agent, the pending calls of those runs that are not sub-runs. ``refresh``
    costs O(log n), a page walks only from its cursor on, ``count`` is O(agents) a key."""

    def __init__(self) -> None:
        self._keys = SortedList()
        self._by_run: dict[str, tuple[Any, ...]] = {}
        self._counted: dict[str, tuple[str, list[Group], int]] = {}
        """Run id -> (its agent, its groups, its pending calls) of every run counted."""
        self._counts: dict[Group, dict[str, int]] = {}
        """Group -> agent -> pending calls; an entry that reaches 0 is deleted."""
        self._marked: dict[str, set[Mark]] = {}
        """Run id -> its candidate parts, for every run counted."""
        self._by_mark: dict[Mark, Any] = {}
        """Candidate part -> the sorted ids of its runs; an empty one is deleted."""

    def refresh(self, doc: SnapshotDocument) -> None:
        """Re-index ``doc`` after a write (listed while it is suspended with a pending call)."""
        self.drop(doc["_id"])
        if doc["status"] == "suspended" and doc["pendingCount"] > 0:
            key = queue_key(doc).order()
            self._keys.add(key)
            self._by_run[doc["_id"]] = key
            if doc["parentRunId"] is None:
                counted = (doc["agentId"], _groups(doc), doc["pendingCount"])
                self._counted[doc["_id"]] = counted
                self._add(*counted)
                self._marked[doc["_id"]] = marks = _marks(doc)
                for mark in marks:
                    self._by_mark.setdefault(mark, SortedList()).add(doc["_id"])

    def drop(self, run_id: str) -> None:
        """Forget the run (deleted, or no longer waiting)."""
        key = self._by_run.pop(run_id, None)
        if key is not None:
            self._keys.remove(key)
        counted = self._counted.pop(run_id, None)
        if counted is not None:
            agent, groups, questions = counted
            self._add(agent, groups, -questions)
        for mark in self._marked.pop(run_id, ()):
            ids = self._by_mark[mark]
            ids.remove(run_id)
            if not ids:
                del self._by_mark[mark]

    def _add(self, agent: str, groups: list[Group], questions: int) -> None:
        for group in groups:
            by_agent = self._counts.setdefault(group, {})
            total = by_agent.get(agent, 0) + questions
            if total:
                by_agent[agent] = total
            else:
                del by_agent[agent]
                if not by_agent:
                    del self._counts[group]

    def count(self, f: QueueFilter) -> int:
        """The pending calls of the waiting runs (sub-runs left out) ``f`` matches, from the kept
        counts: O(agents) per resource of ``resource_ids``. ``f.expires_before`` is not read."""
        allowed = f.resource_ids
        if allowed is not None and f.resource_id is not None:
            allowed = None if f.resource_id in allowed else frozenset()
        resources = [f.resource_id] if allowed is None else sorted(allowed)
        total = 0
        for resource in resources:
            by_agent = self._counts.get((f.thread_id, resource, f.thread_id is not None, resource is not None), {})
            if f.agent_ids is None:
                total += sum(by_agent.values())
            else:
                total += sum(by_agent.get(agent, 0) for agent in f.agent_ids)
        return total

    def candidates(self, c: ReviewCandidates, after: str | None) -> Iterator[str]:
        """The ids of the counted runs in any part of ``c``, each once, in order, after ``after``:
        a merge of each part's sorted ids from ``after`` on."""
        parts = [
            ids.irange(minimum=after, inclusive=(False, True)) if after is not None else iter(ids)
            for mark in c.parts()
            if (ids := self._by_mark.get(mark)) is not None
        ]
        last = None
        for run_id in heapq.merge(*parts):
            if run_id != last:
                yield run_id
            last = run_id

    def due_before(self, bound: datetime) -> Any:
        """Run ids in queue order whose earliest pending deadline is before ``bound``."""
        for key in self._keys:
            if key[0] or key[1] >= bound:
                return
            yield key[-1]

    def after(self, after: QueueKey | None) -> Any:
        """Run ids in queue order, strictly after ``after``."""
        keys = self._keys if after is None else self._keys.irange(minimum=after.order(), inclusive=(False, True))
        return (key[-1] for key in keys)


def in_queue_filter(f: QueueFilter, doc: SnapshotDocument) -> bool:
    """Whether ``doc`` passes the store's part of the queue's filter (``QueueFilter``)."""
    deadline = doc.get("expiresAt")
    return f.admits(doc["agentId"], doc["threadId"], doc["resourceId"]) and (
        f.expires_before is None or (deadline is not None and deadline < f.expires_before)
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
        return self._first(self._queue.after(after), queue_filter, limit)

    async def count_review_questions(self, queue_filter: QueueFilter) -> int:
        if queue_filter.expires_before is None:
            return self._queue.count(queue_filter)
        total = 0  # a walk of the runs due before the bound, in queue order: O(matches)
        for run_id in self._queue.due_before(queue_filter.expires_before):
            doc = self._runs[run_id]
            if doc["parentRunId"] is None and in_queue_filter(queue_filter, doc):
                total += doc["pendingCount"]
        return total

    async def list_review_candidates(
        self, queue_filter: QueueFilter, candidates: ReviewCandidates, *, limit: int, after: str | None = None
    ) -> list[SnapshotDocument]:
        return self._first(self._queue.candidates(candidates, after), queue_filter, limit)

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
        self._touch(doc, write.now)
        self._append([kept_event])
        return copied(doc)


__all__ = ["MemoryReviewQueue", "QueueIndex", "in_queue_filter"]
