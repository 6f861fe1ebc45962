"""The reviewers' queue: the pending questions a principal may decide, across every agent.

Order: the earliest deadline first, then the oldest; questions without a deadline after, oldest
first. The store walks its runs in that order by their earliest pending deadline
(``list_review_runs``, an index on every store); each run's questions are ordered within it by
their own deadline, then their place in the run. A question is listed when the gate would let
the principal approve (or resume) it (``DecisionGate.may_decide``) and it passes the filters.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime

from storage import QueueFilter, QueueKey, ReviewClaimDocument, SnapshotDocument, SnapshotStore, queue_key

from ..access import Principal
from ..deciding.gate import DecisionGate
from ..deciding.refusals import active_review_claim

BATCH = 50
"""Runs read at once while filling a page (more when the page is larger)."""
SCAN_RUNS = 2000
"""Runs one page reads at most: a page of selective question filters (tools, review claims,
escalation, scopes) ends early after it, with ``has_next`` and a cursor to continue from."""


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


def _store_filter(principal: Principal, query: QueueQuery) -> QueueFilter:
    return QueueFilter(
        agent_ids=query.agent_ids,
        thread_id=query.thread_id,
        resource_id=query.resource_id,
        expires_before=query.expires_before,
        resource_ids=principal.resources,
    )


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

    async def page(
        self, principal: Principal, query: QueueQuery, *, first: int, after: QueuePosition | None = None
    ) -> tuple[list[QueueItem], bool, QueuePosition | None]:
        """Up to ``first`` questions after ``after``, whether more follow, and the position a next
        page starts after (the last item's, or the last run read when ``SCAN_RUNS`` ended it)."""
        items: list[QueueItem] = []
        last: QueuePosition | None = after
        read = 0
        async for doc, scanned in self._runs(principal, query, after, batch=max(BATCH, first + 1)):
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
        """How many questions the queue holds for ``principal``: the store's count of the matching
        runs' pending calls (``count_review_questions``: kept counts on memory and SQLite) when only
        run filters apply and no rule bars the principal (``DecisionGate.bars_none``), else every
        matching run read and its questions checked (``expires_before`` included: a run's other
        calls may be due later)."""
        on_questions = (query.tool_names, query.claimed_by_me, query.unclaimed, query.escalated, query.expires_before)
        if all(value is None for value in on_questions) and self._gate.bars_none(principal):
            return await self._store.count_review_questions(_store_filter(principal, query))
        total = 0
        async for doc, _ in self._runs(principal, query, None, batch=500):
            total += len(await self._items(doc, principal, query, None))
        return total

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

    def may_decide_tool(self, principal: Principal, resource_id: str | None, tool_name: str) -> bool:
        """``DecisionGate.may_decide_tool``."""
        return self._gate.may_decide_tool(principal, resource_id, tool_name)

    async def _runs(
        self, principal: Principal, query: QueueQuery, after: QueuePosition | None, *, batch: int
    ) -> AsyncIterator[tuple[SnapshotDocument, int]]:
        """The runs from ``after``'s on (its own run first, when it is unchanged), in queue order."""
        store_filter = _store_filter(principal, query)
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
            key = queue_key(docs[-1])

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
            deadline = call.get("expiresAt")
            if (
                (query.tool_names is not None and call["toolName"] not in query.tool_names)
                or (
                    query.claimed_by_me is not None and (claim is not None and claim["by"] == me) != query.claimed_by_me
                )
                or (query.unclaimed is not None and (claim is None) != query.unclaimed)
                or (query.escalated is not None and (call.get("escalated") is True) != query.escalated)
                or (query.expires_before is not None and (deadline is None or deadline >= query.expires_before))
                or not await self._gate.may_decide(doc, index, principal)
            ):
                continue
            found.append(QueueItem(run=doc, index=index, claim=claim, position=position))
        found.sort(key=lambda item: item.position.within)
        return found


__all__ = ["BATCH", "SCAN_RUNS", "QueueItem", "QueuePosition", "QueueQuery", "ReviewQueue"]
