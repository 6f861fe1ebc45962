"""``ReviewQueueStore``: the runs the reviewers' queue lists, in queue order, and the review claims
written on their questions (docs/storage.md "The reviewers' queue")."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from ..documents import SnapshotDocument
from .writes import ReviewClaimWrite


@dataclass(frozen=True, kw_only=True)
class QueueFilter:
    """What the queue's runs are filtered by in the store; the filters on questions (tools, review
    claims, escalation, the caller's scopes) are the runtime's (``runtime.reviewing``)."""

    agent_ids: frozenset[str] | None = None
    """Only runs of these agents; ``None``: every agent."""
    thread_id: str | None = None
    resource_id: str | None = None
    expires_before: datetime | None = None
    """UTC; only runs whose earliest pending deadline is before it (no deadline never matches)."""
    resource_ids: frozenset[str] | None = None
    """Access restriction: only runs of these resources (``None``: no restriction)."""

    def admits(self, agent_id: str, thread_id: str | None, resource_id: str | None) -> bool:
        """Whether a run of this agent, thread and resource passes the filters on runs (agents,
        thread, resource, the access restriction; ``expires_before`` is not read): the rule each
        store states in its own terms, and ``reviewQueueEvents`` applies to an event's run."""
        return (
            (self.agent_ids is None or agent_id in self.agent_ids)
            and (self.thread_id is None or thread_id == self.thread_id)
            and (self.resource_id is None or resource_id == self.resource_id)
            and (self.resource_ids is None or resource_id in self.resource_ids)
        )


@dataclass(frozen=True)
class QueueKey:
    """A run's place in queue order: runs with a pending deadline first, earliest first, then
    those without one; each by ``suspendedAt``, then ``runId``. ``expires_at`` ``None``: none."""

    expires_at: datetime | None
    suspended_at: datetime
    run_id: str

    def order(self) -> tuple[int, datetime, datetime, str]:
        """A tuple that sorts in queue order (``None`` deadlines last)."""
        deadline = self.suspended_at if self.expires_at is None else self.expires_at
        return (self.expires_at is None, deadline, self.suspended_at, self.run_id)


@dataclass(frozen=True, kw_only=True)
class ReviewCandidates:
    """The runs that may hold a question the gate refuses one principal (``list_review_candidates``):
    the union of the runs with a pending call ``approver`` gave an approval of, the runs
    ``starter`` started, with ``unknown_starter`` those that record no starter (``startedBy``
    absent), the runs with a pending call of one of ``tool_names``, with ``claimed`` those with a
    pending call holding a review claim (lapsed or not), with ``escalated`` those with an escalated
    pending call (the queue's question filters read these two). ``None``/``False``/empty: that
    part is left out."""

    approver: str | None = None
    starter: str | None = None
    unknown_starter: bool = False
    tool_names: frozenset[str] = frozenset()
    claimed: bool = False
    escalated: bool = False

    def parts(self) -> list[Mark]:
        """Its parts, each ``(kind, value)``: ``("tool", name)`` per tool in name order, then
        ``("approver", identity)``, ``("starter", identity)``, ``("unknown starter", None)``,
        ``("claimed", None)``, ``("escalated", None)``."""
        parts: list[Mark] = [("tool", name) for name in sorted(self.tool_names)]
        parts += [
            (kind, value)
            for kind, value in (("approver", self.approver), ("starter", self.starter))
            if value is not None
        ]
        flags = (("unknown starter", self.unknown_starter), ("claimed", self.claimed), ("escalated", self.escalated))
        return parts + [(kind, None) for kind, given in flags if given]


Mark = tuple[str, str | None]
"""A part of ``ReviewCandidates`` (``ReviewCandidates.parts``) a counted run belongs to."""


def review_marks(doc: SnapshotDocument) -> set[Mark]:
    """The ``ReviewCandidates`` parts a counted run belongs to, the rule every store's candidate
    index keeps: a ``("tool", name)`` and an ``("approver", identity)`` per pending call's tool
    and approval, its ``("starter", identity)`` (``("unknown starter", None)`` without
    ``startedBy``), ``("claimed", None)`` when a pending call holds a review claim (lapsed or
    not), ``("escalated", None)`` when one was escalated."""
    pending = [call for call in doc["toolCalls"] if call["decision"] is None]
    marks: set[Mark] = {("tool", call["toolName"]) for call in pending}
    if any(call.get("reviewClaim") is not None for call in pending):
        marks.add(("claimed", None))
    if any(call.get("escalated") is True for call in pending):
        marks.add(("escalated", None))
    marks.update(("approver", a["decidedBy"]) for call in pending for a in call.get("approvals") or ())
    marks.add(("starter", doc["startedBy"]) if "startedBy" in doc else ("unknown starter", None))
    return marks


def queue_key(doc: SnapshotDocument) -> QueueKey:
    """The queue-order key of a stored run (``expiresAt``: its earliest pending deadline)."""
    return QueueKey(doc.get("expiresAt"), doc["suspendedAt"], doc["_id"])


class ReviewQueueStore(Protocol):
    """The queue's reads and the review claims' writes."""

    async def list_review_runs(
        self, queue_filter: QueueFilter, *, limit: int, after: QueueKey | None = None
    ) -> list[SnapshotDocument]:
        """Suspended runs with a pending call (``pendingCount`` above 0), of any agent, matching
        ``queue_filter``, in queue order (``QueueKey``), strictly after ``after``; at most
        ``limit``. Read through an index in that order, so a page never reads the runs before
        it; a filter the index does not lead with is applied while walking it."""
        ...

    async def count_review_questions(self, queue_filter: QueueFilter) -> int:
        """The pending calls (``pendingCount``) of the runs ``list_review_runs`` would list for
        ``queue_filter``, sub-runs (``parentRunId`` set) left out. Memory and SQLite read kept
        counts (per filter combination and agent) unless ``expires_before`` is set: O(agents) per
        resource of ``resource_ids``, at any number of runs; otherwise (MongoDB, and every store
        with ``expires_before``) one pass over the matching runs of an index, never decoding their
        calls."""
        ...

    async def list_review_candidates(
        self, queue_filter: QueueFilter, candidates: ReviewCandidates, *, limit: int, after: str | None = None
    ) -> list[SnapshotDocument]:
        """The runs ``count_review_questions`` counts for ``queue_filter`` that are ``candidates``
        (any of its parts), each once, in ``runId`` order, strictly after run id ``after``; at most
        ``limit``. Each part is read through an index of its own (memory: sorted run ids per part;
        SQLite: ``review_marks``; MongoDB: one index per part, none on FerretDB 1.24), so a page
        costs O(parts x limit) reads, and a walk O(candidates), whatever the number of runs."""
        ...

    async def record_review_claim(self, write: ReviewClaimWrite) -> SnapshotDocument | None:
        """Set (``claim``) or clear (``None``) ``toolCalls[index].reviewClaim``, with ``event``, as
        one unit of work, on the condition ``write.condition`` (``rules.review_claim_write``): the call still waits on
        the question and the run is still at ``version`` (so a claim read as free is never taken
        over another's written since). Returns the updated run, or ``None`` (nothing written)."""
        ...


@runtime_checkable
class ApproverSeeingCount(Protocol):
    """A store whose queue total also tells, in the same commands, whether a principal may hold
    a candidate run of the approver part (``ReviewCandidates.approver``): the queue's total then
    reads its candidates only when there may be one (MongoDB: one round trip less; SQLite: one
    hand-off to its reader thread less)."""

    async def count_review_questions_seeing(self, queue_filter: QueueFilter, approver: str) -> tuple[int, bool]:
        """``count_review_questions(queue_filter)``, and ``False`` when no suspended run holds an
        approval given by ``approver`` (``list_review_candidates`` of that part alone then returns
        nothing, whatever the filter); ``True`` when one may (read them to know)."""
        ...


__all__ = ["ApproverSeeingCount", "QueueFilter", "QueueKey", "ReviewCandidates", "ReviewQueueStore", "queue_key"]
