"""Sorted listing keys of the memory store: what MongoDB's listing indexes are to ``mongo.py``.

One ``SortedList`` of ``(createdAt, runId)`` per filter combination, as in ``LISTING_INDEXES``:
per agent, per (agent, thread), per (agent, resource) and per (agent, thread, resource). A
listing finds its range of positions by bisection (date bounds and keyset cursors), then reads
only the runs of the page, so a page costs O(log n + page) whatever the number of stored runs,
and so does a count (the width of the range). Inserting or deleting a run costs O(log n) per
list (``sortedcontainers``).
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sortedcontainers import SortedList

from .documents import SnapshotDocument
from .protocol import RunFilter, RunPage, SortKey

Key = tuple[datetime, str]
"""``(createdAt, runId)``; ascending order is listing order reversed."""

_TICK = timedelta(microseconds=1)
"""Smallest step of a ``datetime``: ``(d + _TICK,)`` sorts after every key created at ``d``."""


def _groups(doc: SnapshotDocument) -> list[Hashable]:
    agent, thread, resource = doc["agentId"], doc["threadId"], doc["resourceId"]
    groups: list[Hashable] = [("agent", agent)]
    if thread is not None:
        groups.append(("thread", agent, thread))
    if resource is not None:
        groups.append(("resource", agent, resource))
    if thread is not None and resource is not None:
        groups.append(("thread+resource", agent, thread, resource))
    return groups


def _group(agent_id: str, run_filter: RunFilter) -> Hashable:
    thread, resource = run_filter.thread_id, run_filter.resource_id
    if thread is None and resource is None:
        return ("agent", agent_id)
    if resource is None:
        return ("thread", agent_id, thread)
    if thread is None:
        return ("resource", agent_id, resource)
    return ("thread+resource", agent_id, thread, resource)


class ListingIndex:
    """The run keys of every filter combination, kept sorted."""

    def __init__(self) -> None:
        self._lists: dict[Hashable, Any] = {}

    def add(self, doc: SnapshotDocument) -> None:
        """Index a new run (its agent, thread, resource and ``createdAt`` never change)."""
        key = (doc["createdAt"], doc["_id"])
        for group in _groups(doc):
            keys = self._lists.get(group)
            if keys is None:
                keys = self._lists[group] = SortedList()
            keys.add(key)

    def add_many(self, docs: list[SnapshotDocument]) -> None:
        """Index many new runs; each touched list merges the batch at once (data generator: 1M runs)."""
        batches: dict[Hashable, list[Key]] = {}
        for doc in docs:
            key = (doc["createdAt"], doc["_id"])
            for group in _groups(doc):
                batches.setdefault(group, []).append(key)
        for group, keys in batches.items():
            existing = self._lists.get(group)
            if existing is None:
                self._lists[group] = SortedList(keys)
            else:
                existing.update(keys)

    def remove(self, doc: SnapshotDocument) -> None:
        """Forget a deleted run."""
        key = (doc["createdAt"], doc["_id"])
        for group in _groups(doc):
            keys = self._lists[group]
            keys.remove(key)
            if not keys:
                del self._lists[group]

    def _range(
        self, agent_id: str, run_filter: RunFilter, after: SortKey | None, before: SortKey | None
    ) -> tuple[Any, int, int]:
        """The group's sorted keys and the positions ``[lo, hi)`` of the matching ones.

        ``run_filter`` must already be at BSON precision (``normalized_filter``).
        """
        keys = self._lists.get(_group(agent_id, run_filter))
        if keys is None:
            return None, 0, 0
        lo, hi = 0, len(keys)
        if run_filter.from_date is not None:
            lo = max(lo, keys.bisect_left((run_filter.from_date,)))
        if before is not None:  # strictly after ``before`` in listing order: a greater key
            lo = max(lo, keys.bisect_right((before.created_at, before.run_id)))
        if run_filter.to_date is not None:
            hi = min(hi, keys.bisect_left((run_filter.to_date + _TICK,)))
        if after is not None:  # strictly after ``after`` in listing order: a smaller key
            hi = min(hi, keys.bisect_left((after.created_at, after.run_id)))
        return keys, lo, max(lo, hi)

    def page(self, agent_id: str, run_filter: RunFilter, window: RunPage) -> list[str]:
        """Run ids of one listing page, newest first (the arguments of ``SnapshotStore.list_runs``).

        ``run_filter`` must be ``normalized_filter``-ed. With ``resource_ids`` (a principal limited
        to k resources), the page of each allowed resource is read from its own list and the k
        pages are merged in listing order: O(k (log n + page)).
        """
        if run_filter.resource_ids is None:
            keys = self._page_keys(agent_id, run_filter, window)
        else:
            limit, skip = window.limit, window.skip
            wanted = replace(
                window, limit=None if limit is None else (limit if window.from_end else skip + limit), skip=0
            )
            pages = [
                self._page_keys(agent_id, replace(run_filter, resource_id=resource, resource_ids=None), wanted)
                for resource in sorted(run_filter.resource_ids)
            ]
            keys = _cut(list(heapq.merge(*pages, reverse=True)), window)
        return [run_id for _, run_id in keys]

    def _page_keys(self, agent_id: str, run_filter: RunFilter, window: RunPage) -> list[Key]:
        """The keys of one page of one filter combination, newest first."""
        limit, skip, from_end = window.limit, window.skip, window.from_end
        keys, lo, hi = self._range(agent_id, run_filter, window.after, window.before)
        if keys is None:
            return []
        if from_end:
            start, stop = lo, hi if limit is None else min(hi, lo + limit)
        else:
            stop = hi - skip
            start = lo if limit is None else max(lo, stop - limit)
        if stop <= start:
            return []
        return list(keys.islice(start, stop, reverse=True))

    def count(self, agent_id: str, run_filter: RunFilter) -> int:
        """Number of matching runs, by two bisections per list (O(log n), or O(k log n) with
        ``resource_ids``)."""
        if run_filter.resource_ids is None:
            _, lo, hi = self._range(agent_id, run_filter, None, None)
            return hi - lo
        return sum(
            self.count(agent_id, replace(run_filter, resource_id=resource, resource_ids=None))
            for resource in run_filter.resource_ids
        )


def _cut(keys: list[Key], window: RunPage) -> list[Key]:
    """The keys of ``window`` among ``keys`` (a whole range in listing order): its ``limit`` after
    ``skip``, or its last ``limit`` ``from_end``."""
    limit = window.limit
    if window.from_end:
        return keys if limit is None else keys[max(0, len(keys) - limit) :]
    return keys[window.skip :] if limit is None else keys[window.skip : window.skip + limit]


def expiring_page(docs: list[SnapshotDocument], window: RunPage) -> list[Key]:
    """One listing page, newest first, of the runs ``docs`` an ``expiresBefore`` filter matched
    (read from the deadlines, so not in listing order): sorted, then cut as ``ListingIndex.page``
    cuts a range. Costs O(m log m) for m matches, never more than the matching runs."""
    keys = sorted(((doc["createdAt"], doc["_id"]) for doc in docs), reverse=True)
    after, before = window.after, window.before
    if after is not None:
        keys = [k for k in keys if k < (after.created_at, after.run_id)]
    if before is not None:
        keys = [k for k in keys if k > (before.created_at, before.run_id)]
    return _cut(keys, window)


__all__ = ["ListingIndex", "expiring_page"]
