"""The memory store's indexes over its runs, kept by one call per write (``RunIndexes``): the
listing's sorted keys (``storage._listing_index``), the deadlines (``DeadlineIndex``), the
reviewers' queue in queue order with its kept counts (``QueueIndex``), and the runs whose every
call is decided. What MongoDB's indexes on ``agent_runs`` are to ``storage.mongo``."""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, Final

from sortedcontainers import SortedList

from .._listing_index import ListingIndex
from ..documents import SnapshotDocument
from ..protocol import QueueFilter, QueueKey, ReviewCandidates, queue_key, review_marks
from ..protocol.review import Mark


class Unchanged:
    """The type of ``UNCHANGED``."""


UNCHANGED: Final = Unchanged()
"""``RunIndexes.written``'s ``expires_at`` when the write left the run's deadline as it was."""


class RunIndexes:
    """Every index of the stored runs, each reading the documents as they are stored: a new run is
    indexed by ``add``, a write's result by ``written``, a deletion by ``drop`` (each one call, in
    the write's step of the event loop)."""

    def __init__(self) -> None:
        self.listing = ListingIndex()
        self.deadlines = DeadlineIndex()
        self.queue = QueueIndex()
        self.decided: set[str] = set()
        """Ids of runs whose every call is decided (``pendingCount == 0``): what the sweeper reads
        (``list_stalled_runs``), so it never scans the waiting runs (MongoDB: index ``stalled``)."""

    def add(self, docs: Sequence[SnapshotDocument]) -> None:
        """Index new runs, each with the deadline its ``expiresAt`` holds (``rules.earliest_deadline``
        of its calls, set by the store)."""
        if len(docs) == 1:
            self.listing.add(docs[0])
        else:
            self.listing.add_many(list(docs))
        for doc in docs:
            self.deadlines.add(doc)
            self._refresh(doc)

    def written(self, doc: SnapshotDocument, expires_at: datetime | Unchanged | None = UNCHANGED) -> None:
        """Re-index ``doc`` after a write changed it; with ``expires_at`` (the earliest deadline of
        its pending calls, ``None``: none), set ``doc["expiresAt"]`` to it first."""
        if not isinstance(expires_at, Unchanged):
            self.deadlines.drop(doc)
            if expires_at is None:
                doc.pop("expiresAt", None)
            else:
                doc["expiresAt"] = expires_at
            self.deadlines.add(doc)
        self._refresh(doc)

    def _refresh(self, doc: SnapshotDocument) -> None:
        self.queue.refresh(doc)
        if doc["pendingCount"] == 0:
            self.decided.add(doc["_id"])
        else:
            self.decided.discard(doc["_id"])

    def drop(self, doc: SnapshotDocument) -> None:
        """Forget a deleted run."""
        self.decided.discard(doc["_id"])
        self.deadlines.drop(doc)
        self.queue.drop(doc["_id"])
        self.listing.remove(doc)


class DeadlineIndex:
    """Run ids by deadline (``expiresAt``); ``add`` and ``drop`` cost O(log n), a walk O(log n + found)."""

    def __init__(self) -> None:
        self._expiring = SortedList()
        """``(expiresAt, runId)`` of every run with a deadline: the sweeper's expiry pass reads
        only the expired front of it (``list_expired_runs``; SQLite and MongoDB: an index)."""
        self._expiring_by_agent: dict[str, SortedList] = {}
        """agentId -> ``(expiresAt, runId)`` of its runs with a deadline (the ``expiresBefore`` filter)."""

    def add(self, doc: SnapshotDocument) -> None:
        """Index ``doc``'s deadline (its ``expiresAt``); nothing when it has none."""
        deadline = doc.get("expiresAt")
        if deadline is None:
            return
        key = (deadline, doc["_id"])
        self._expiring.add(key)
        by_agent = self._expiring_by_agent.get(doc["agentId"])
        if by_agent is None:
            by_agent = self._expiring_by_agent[doc["agentId"]] = SortedList()
        by_agent.add(key)

    def drop(self, doc: SnapshotDocument) -> None:
        """Forget ``doc``'s deadline (its ``expiresAt`` as indexed); nothing when it has none."""
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

    def due(self, now: datetime) -> Iterator[str]:
        """Ids of the runs, of any agent, whose deadline is at or before ``now`` (UTC), earliest first."""
        for _, run_id in self._expiring.irange(maximum=(now, chr(0x10FFFF)), inclusive=(True, True)):
            yield run_id

    def of_agent_before(self, agent_id: str, bound: datetime) -> Iterator[str]:
        """Ids of ``agent_id``'s runs whose deadline is before ``bound`` (UTC), earliest first."""
        deadlines = self._expiring_by_agent.get(agent_id)
        if deadlines is None:
            return
        for _, run_id in deadlines.irange(maximum=(bound,), inclusive=(True, False)):
            yield run_id


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


class QueueIndex:
    """Queue-order keys of the runs with a pending call, all and per thread and per resource, and
    the queue's kept counts: per filter combination and agent, the pending calls of those runs
    that are not sub-runs. ``refresh`` costs O(log n), a page walks only from its cursor on and
    only the runs of its thread or resource, ``count`` is O(agents) a key."""

    def __init__(self) -> None:
        self._keys = SortedList()
        """The queue-order keys (``QueueKey.order()``) of every listed run."""
        self._by_thread: dict[str, Any] = {}
        """Thread id -> the sorted queue-order keys of its listed runs; an empty one is deleted."""
        self._by_resource: dict[str, Any] = {}
        """Resource id -> the sorted queue-order keys of its listed runs; an empty one is deleted."""
        self._by_run: dict[str, tuple[tuple[Any, ...], str | None, str | None]] = {}
        """Run id -> (its key, its thread, its resource) of every listed run."""
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
            thread, resource = doc["threadId"], doc["resourceId"]
            self._keys.add(key)
            self._by_run[doc["_id"]] = (key, thread, resource)
            if thread is not None:
                self._by_thread.setdefault(thread, SortedList()).add(key)
            if resource is not None:
                self._by_resource.setdefault(resource, SortedList()).add(key)
            if doc["parentRunId"] is None:
                counted = (doc["agentId"], _groups(doc), doc["pendingCount"])
                self._counted[doc["_id"]] = counted
                self._add(*counted)
                self._marked[doc["_id"]] = marks = review_marks(doc)
                for mark in marks:
                    self._by_mark.setdefault(mark, SortedList()).add(doc["_id"])

    def drop(self, run_id: str) -> None:
        """Forget the run (deleted, or no longer waiting)."""
        listed = self._by_run.pop(run_id, None)
        if listed is not None:
            key, thread, resource = listed
            self._keys.remove(key)
            for by, value in ((self._by_thread, thread), (self._by_resource, resource)):
                if value is not None:
                    keys = by[value]
                    keys.remove(key)
                    if not keys:
                        del by[value]
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

    def _orders(self, f: QueueFilter) -> list[Any]:
        """The sorted keys holding every run ``f`` may admit: its thread's or its resource's (the
        shorter when both are set), else those of each resource of ``resource_ids``, else all."""
        if f.thread_id is not None or f.resource_id is not None:
            orders = [
                by.get(value, ())
                for by, value in ((self._by_thread, f.thread_id), (self._by_resource, f.resource_id))
                if value is not None
            ]
            return [min(orders, key=len)]
        if f.resource_ids is not None:
            return [self._by_resource[r] for r in sorted(f.resource_ids) if r in self._by_resource]
        return [self._keys]

    def _ordered(self, f: QueueFilter, after: QueueKey | None) -> Iterator[tuple[Any, ...]]:
        """The keys of ``_orders(f)`` strictly after ``after``, merged in queue order."""
        parts = [
            keys if after is None or not keys else keys.irange(minimum=after.order(), inclusive=(False, True))
            for keys in self._orders(f)
        ]
        return iter(parts[0]) if len(parts) == 1 else heapq.merge(*parts)

    def due_before(self, bound: datetime, f: QueueFilter) -> Iterator[str]:
        """Ids in queue order of the runs whose earliest pending deadline is before ``bound``, of
        ``f``'s thread or resource (or ``resource_ids``) when it names one: ``f`` is not applied
        otherwise."""
        for key in self._ordered(f, None):
            if key[0] or key[1] >= bound:
                return
            yield key[-1]

    def after(self, after: QueueKey | None, f: QueueFilter) -> Iterator[str]:
        """Ids in queue order strictly after ``after`` of the runs of ``f``'s thread or resource
        (or ``resource_ids``) when it names one: ``f`` is not applied otherwise. A walk reads
        O(log n) to start, then only runs of that thread or resource."""
        return (key[-1] for key in self._ordered(f, after))


__all__ = ["UNCHANGED", "DeadlineIndex", "QueueIndex", "RunIndexes", "Unchanged"]
