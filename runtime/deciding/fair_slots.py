"""A bound on concurrent work shared fairly among its owners (``decideToolCalls``' bulk slots).

``asyncio.Semaphore`` wakes its waiters in arrival order, so one client's batch of a hundred runs
queued first holds every slot in turn, and another client's batch of one waits for all hundred.
``FairSlots`` hands a freed slot to the waiting owner that holds the fewest slots (the longest
waiting among those), so each owner with work waiting gets a turn every time a slot frees.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter, deque
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager


class FairSlots:
    """At most ``total`` holders at once, granted fairly among owners (module docstring).

    Args:
        total: Slots, >= 1.
    """

    def __init__(self, total: int) -> None:
        if total < 1:
            raise ValueError("total must be >= 1")
        self._free = total
        self._held: Counter[Hashable] = Counter()
        self._waiting: dict[Hashable, deque[tuple[int, asyncio.Future[None]]]] = {}
        self._arrivals = itertools.count()

    @asynccontextmanager
    async def slot(self, owner: Hashable) -> AsyncIterator[None]:
        """Hold one slot for ``owner`` during the block, waiting for one if none is free."""
        if self._free > 0 and not self._waiting:
            self._free -= 1
            self._held[owner] += 1
        else:
            granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.setdefault(owner, deque()).append((next(self._arrivals), granted))
            try:
                await granted
            except asyncio.CancelledError:
                if granted.done() and not granted.cancelled():
                    self._release(owner)  # granted as the wait was cancelled: pass it on
                else:
                    self._forget(owner, granted)
                raise
        try:
            yield
        finally:
            self._release(owner)

    def _forget(self, owner: Hashable, granted: asyncio.Future[None]) -> None:
        queue = self._waiting.get(owner)
        if queue is None:
            return
        for entry in list(queue):
            if entry[1] is granted:
                queue.remove(entry)
        if not queue:
            del self._waiting[owner]

    def _release(self, owner: Hashable) -> None:
        self._held[owner] -= 1
        if self._held[owner] <= 0:
            del self._held[owner]
        if not self._waiting:
            self._free += 1
            return
        chosen = min(self._waiting, key=lambda o: (self._held[o], self._waiting[o][0][0]))
        queue = self._waiting[chosen]
        _, granted = queue.popleft()
        if not queue:
            del self._waiting[chosen]
        self._held[chosen] += 1
        granted.set_result(None)


__all__ = ["FairSlots"]
