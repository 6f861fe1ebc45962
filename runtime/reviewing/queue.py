"""The reviewers' queue: the pending questions a principal may decide, across every agent.

Order: the earliest deadline first, then the oldest; questions without a deadline after, oldest
first. The store walks its runs in that order by their earliest pending deadline
(``list_review_runs``, an index on every store); each run's questions are ordered within it by
their own deadline, then their place in the run. A question is listed when the gate would let
the principal approve (or resume) it (``DecisionGate.may_decide``) and it passes the filters.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from datetime import datetime

from storage import (
    ApproverSeeingCount,
    DecisionKind,
    QueueFilter,
    QueueKey,
    ReviewCandidates,
    ReviewClaimDocument,
    SnapshotDocument,
    SnapshotStore,
    ToolCallDocument,
    queue_key,
    review_marks,
)

from ..access import Principal
from ..deciding.gate import DecisionGate
from ..deciding.refusals import active_review_claim, refusal_candidates
from ..errors import RunsgateError

BATCH = 50
"""Runs read at once while filling a page past its first read (more when the page is larger); the
first read asks for ``first + 1`` runs, as a listing page does: most runs hold a listed question."""
SCAN_RUNS = 2000
"""Runs one page reads at most: a page of selective question filters (tools, review claims,
escalation, scopes) ends early after it, with ``has_next`` and a cursor to continue from."""

COUNT_READ = 500
"""Runs a question-filtered ``ReviewQueue.count`` reads at once."""
YIELD_EVERY = 50
"""Runs a question-filtered count checks between two chances for other tasks to run."""


@dataclass(frozen=True, kw_only=True)
class QueueQuery:
    """The queue's filters (``None``: not filtered). ``claimed_by_me``/``unclaimed``/``escalated``
    ``True`` keep only such questions, ``False`` only the others."""

    agent_ids: frozenset[str] | None = None
    tool_names: frozenset[str] | None = None
    thread_id: str | None = None
    resource_id: str | None = None
    claimed_by_me: bool | None = None
    unclaimed: bool | None = None
    expires_before: datetime | None = None
    escalated: bool | None = None

    def store_filter(self, resource_ids: frozenset[str] | None) -> QueueFilter:
        """Its run filters, as the store applies them, for a principal of ``resource_ids``."""
        return QueueFilter(
            agent_ids=self.agent_ids,
            thread_id=self.thread_id,
            resource_id=self.resource_id,
            expires_before=self.expires_before,
            resource_ids=resource_ids,
        )

    def admits_run(self, agent_id: str, thread_id: str | None, resource_id: str | None) -> bool:
        """Whether a run of this agent, thread and resource passes the run filters (agents,
        thread, resource; ``QueueFilter.admits``, as the stores apply them)."""
        return self.store_filter(None).admits(agent_id, thread_id, resource_id)

    def admits_tool(self, tool_name: str) -> bool:
        """Whether a question of ``tool_name`` passes the tool filter."""
        return self.tool_names is None or tool_name in self.tool_names

    def admits_question(self, call: ToolCallDocument, claim: ReviewClaimDocument | None, me: str) -> bool:
        """Whether a pending ``call`` with its live review ``claim`` passes the question filters
        (tool, claimed by ``me``, unclaimed, escalated, its own deadline before ``expires_before``)."""
        deadline = call.get("expiresAt")
        return (
            self.admits_tool(call["toolName"])
            and (self.claimed_by_me is None or (claim is not None and claim["by"] == me) == self.claimed_by_me)
            and (self.unclaimed is None or (claim is None) == self.unclaimed)
            and (self.escalated is None or (call.get("escalated") is True) == self.escalated)
            and (self.expires_before is None or (deadline is not None and deadline < self.expires_before))
        )


@dataclass(frozen=True)
class QueuePosition:
    """A question's place in the queue: its run's ``QueueKey``, then its order within the run."""

    run: QueueKey
    within: tuple[bool, datetime, int]
    """``(no deadline, its deadline or the run's suspendedAt, its index in the run's calls)``."""


@dataclass(frozen=True, kw_only=True)
class QueueItem:
    """One pending question of the queue."""

    run: SnapshotDocument
    index: int
    """The call's index in ``run["toolCalls"]``."""
    claim: ReviewClaimDocument | None
    """Its live review claim."""
    position: QueuePosition


def _within(doc: SnapshotDocument, index: int) -> tuple[bool, datetime, int]:
    deadline = doc["toolCalls"][index].get("expiresAt")
    return (deadline is None, doc["suspendedAt"] if deadline is None else deadline, index)


class ReviewQueue:
    """Reads the queue (module docstring) for one principal at a time.

    Args:
        store: Where the runs live.
        gate: Tells which questions a principal may decide (one rule in one place).
        now: Aware UTC now (review claims lapse).
    """

    def __init__(self, store: SnapshotStore, gate: DecisionGate, now: Callable[[], datetime]) -> None:
        self._store = store
        self._gate = gate
        self._now = now
        self._seeing = store if isinstance(store, ApproverSeeingCount) else None
        """The store, when its count also tells whether an approver's candidates exist (checked once:
        a runtime protocol's ``isinstance`` inspects the object each time)."""

    async def page(
        self, principal: Principal, query: QueueQuery, *, first: int, after: QueuePosition | None = None
    ) -> tuple[list[QueueItem], bool, QueuePosition | None]:
        """Up to ``first`` questions after ``after``, whether more follow, and the position a next
        page starts after (the last item's, or the last run read when ``SCAN_RUNS`` ended it)."""
        items: list[QueueItem] = []
        last: QueuePosition | None = after
        read = 0
        runs = self._runs(principal, query, after, batch=first + 1, then=max(BATCH, first + 1))
        async for doc, scanned in runs:
            read += scanned
            for item in await self._items(doc, principal, query, after):
                if len(items) == first:
                    return items, True, last
                items.append(item)
                last = item.position
            if read >= SCAN_RUNS and len(items) < first:
                end = QueuePosition(
                    queue_key(doc), (True, datetime.max.replace(tzinfo=doc["suspendedAt"].tzinfo), 1 << 30)
                )
                return items, True, end
        return items, False, last

    async def count(self, principal: Principal, query: QueueQuery) -> int:
        """How many questions the queue holds for ``principal``, exactly. With run filters only: the
        store's kept count of the matching runs' pending calls (``count_review_questions``), less
        those the gate refuses it (``DecisionGate.may_decide``) among the candidate runs that may
        hold one (``refusal_candidates``, read through the store's indexes:
        ``list_review_candidates``), so O(candidates), not O(matches). With question filters, the
        questions of the candidate runs that may hold a match are checked (``_items``): with tools,
        the runs holding a pending call of one; with ``claimed_by_me``/``escalated`` true or
        ``unclaimed`` false, the runs holding a review claim (lapsed too) or an escalation; with
        only their opposites, the kept count corrected by the runs holding a claim or escalation
        and the refusal candidates; with ``expires_before`` alone, every matching run (a run's
        other calls may be due later). Where the candidates are only the runs ``principal``
        approved in, a store that can (``ApproverSeeingCount``) tells within the count's reads
        whether there is one to read."""
        on_questions = (query.tool_names, query.claimed_by_me, query.unclaimed, query.escalated, query.expires_before)
        if all(value is None for value in on_questions):
            store_filter = query.store_filter(principal.resources)
            candidates = refusal_candidates(self._gate.rules, principal)
            if self._seeing is not None and candidates.parts() == [("approver", principal.identity)]:
                # the approver part alone: the count's own reads tell whether it holds a run
                total, seen = await self._seeing.count_review_questions_seeing(store_filter, principal.identity)
                if not seen:
                    return total
            else:
                total = await self._store.count_review_questions(store_filter)
            # after the count, not beside it: the page is read beside the count already, and a
            # third command at once cost a loaded DocumentDB more than this read's round trip
            async for doc in self._walk(principal, query, candidates):
                for index, call in enumerate(doc["toolCalls"]):
                    if call["decision"] is None and not await self._gate.may_decide(doc, index, principal):
                        total -= 1
            return total
        store_filter = query.store_filter(principal.resources)
        marked = ReviewCandidates(
            claimed=query.claimed_by_me is True or query.unclaimed is False, escalated=query.escalated is True
        )
        total = 0
        if query.tool_names is not None or query.expires_before is not None or marked.parts():
            # only runs holding a named tool, a claim or an escalation may hold a matching question
            walked: ReviewCandidates | None = marked if marked.parts() else None  # None: every run
            if query.tool_names is not None:
                walked = ReviewCandidates(tool_names=query.tool_names)
            refusable = refusal_candidates(self._gate.rules, principal)
            async for doc in self._walk(principal, query, walked):
                total += await self._listed_count(doc, principal, query, refusable)
            return total
        # only "not claimed", "not mine", "not escalated": the kept count, each exception corrected
        exceptions = replace(
            refusal_candidates(self._gate.rules, principal),
            claimed=query.claimed_by_me is not None or query.unclaimed is not None,
            escalated=query.escalated is not None,
        )
        total = await self._store.count_review_questions(store_filter)
        async for doc in self._walk(principal, query, exceptions):
            if doc["parentRunId"] is None:
                total += len(await self._items(doc, principal, query, None)) - doc["pendingCount"]
        return total

    async def _listed_count(
        self, doc: SnapshotDocument, principal: Principal, query: QueueQuery, refusable: ReviewCandidates
    ) -> int:
        """How many questions of ``doc`` the queue lists for ``principal``: ``len(_items(...))``,
        without asking the gate when ``doc`` is in no part of ``refusable`` (its
        ``refusal_candidates``, outside which the gate refuses none)."""
        if doc["parentRunId"] is not None:
            return 0
        if not review_marks(doc).isdisjoint(refusable.parts()):
            return len(await self._items(doc, principal, query, None))
        now, me = self._now(), principal.identity
        return sum(
            1
            for call in doc["toolCalls"]
            if call["decision"] is None and query.admits_question(call, active_review_claim(call, now), me)
        )

    async def _walk(
        self, principal: Principal, query: QueueQuery, candidates: ReviewCandidates | None
    ) -> AsyncIterator[SnapshotDocument]:
        """The counted runs of ``query``'s run filters that are ``candidates`` (``None``: every run
        the queue lists), ``COUNT_READ`` a read, in no set order. Lets other tasks run after each
        ``YIELD_EVERY`` runs (the walk is CPU-bound between its reads)."""
        number = 0
        if candidates is None:
            async for doc, _ in self._runs(principal, query, None, batch=COUNT_READ):
                yield doc
                number += 1
                if number % YIELD_EVERY == 0:
                    await asyncio.sleep(0)
            return
        store_filter, after = query.store_filter(principal.resources), None
        while candidates.parts():
            docs = await self._store.list_review_candidates(store_filter, candidates, limit=COUNT_READ, after=after)
            for doc in docs:
                yield doc
                number += 1
                if number % YIELD_EVERY == 0:
                    await asyncio.sleep(0)
            if len(docs) < COUNT_READ:
                return
            after = docs[-1]["_id"]

    async def run(self, run_id: str) -> SnapshotDocument | None:
        """The stored run ``run_id``, or ``None`` (finished and deleted, or never stored)."""
        found = await self._store.get_many([run_id])
        return found[0] if found else None

    async def listed(self, doc: SnapshotDocument, principal: Principal, query: QueueQuery) -> list[QueueItem]:
        """The questions of ``doc`` the queue lists for ``principal`` now, in order (none unless
        the run is suspended)."""
        if doc["status"] != "suspended":
            return []
        return await self._items(doc, principal, query, None)

    async def may_decide(self, doc: SnapshotDocument, index: int, principal: Principal) -> bool:
        """``DecisionGate.may_decide``, decided or not."""
        return await self._gate.may_decide(doc, index, principal)

    async def refusal_of(
        self, doc: SnapshotDocument, index: int, principal: Principal, kind: DecisionKind | None = None
    ) -> RunsgateError | None:
        """``DecisionGate.refusal_of``: why ``principal`` may not approve (or ``kind``) call ``index`` of ``doc``."""
        return await self._gate.refusal_of(doc, index, principal, kind)

    def may_decide_tool(self, principal: Principal, resource_id: str | None, tool_name: str) -> bool:
        """``DecisionGate.may_decide_tool``."""
        return self._gate.may_decide_tool(principal, resource_id, tool_name)

    async def _runs(
        self, principal: Principal, query: QueueQuery, after: QueuePosition | None, *, batch: int, then: int = 0
    ) -> AsyncIterator[tuple[SnapshotDocument, int]]:
        """The runs from ``after``'s on (its own run first, when it is unchanged), in queue order:
        ``batch`` runs a read, ``max(batch, then)`` after the first."""
        store_filter = query.store_filter(principal.resources)
        key = None if after is None else after.run
        if key is not None:
            for doc in await self._store.get_many([key.run_id]):
                if queue_key(doc) == key and doc["pendingCount"] > 0 and doc["status"] == "suspended":
                    yield doc, 1
        while True:
            docs = await self._store.list_review_runs(store_filter, limit=batch, after=key)
            for doc in docs:
                yield doc, 1
            if len(docs) < batch:
                return
            key, batch = queue_key(docs[-1]), max(batch, then)

    async def _items(
        self, doc: SnapshotDocument, principal: Principal, query: QueueQuery, after: QueuePosition | None
    ) -> list[QueueItem]:
        """The questions of ``doc`` the queue lists, in order, after ``after``."""
        if doc["parentRunId"] is not None:
            return []  # a sub-run's questions are decided through its supervisor's card
        key, now, me = queue_key(doc), self._now(), principal.identity
        found = []
        for index, call in enumerate(doc["toolCalls"]):
            if call["decision"] is not None:
                continue
            position = QueuePosition(key, _within(doc, index))
            if after is not None and after.run == key and position.within <= after.within:
                continue
            claim = active_review_claim(call, now)
            if not query.admits_question(call, claim, me) or not await self._gate.may_decide(doc, index, principal):
                continue
            found.append(QueueItem(run=doc, index=index, claim=claim, position=position))
        found.sort(key=lambda item: item.position.within)
        return found


__all__ = ["BATCH", "SCAN_RUNS", "QueueItem", "QueuePosition", "QueueQuery", "ReviewQueue"]
