"""``Listener``: what one subscriber on this process receives about one run's live updates from
``UpdateHub`` (``publishing``), bounded in bytes per listener and per owner (``OwnerBudget``),
and ``RunUpdatesOverflowError`` once it fell too far behind (``feed`` then reads from the store)."""

from __future__ import annotations

import asyncio

from ..subscription_budgets import OwnerBudget
from .run_updates import RunUpdate


class RunUpdatesOverflowError(Exception):
    """A listener fell more than its buffer (bytes) behind: it receives no more live updates (its
    stream reads the rest from the store)."""


class Listener:
    """What one subscriber on this process receives about one run: the run's live updates, at most
    ``max_bytes`` of them waiting (``RunUpdate.size``), and at most its owner's ``queued_bytes``
    with the owner's other queues (``budget``; past either it is dropped, and
    ``RunUpdatesOverflowError`` comes once what it holds was read), and the signals of its
    stream (events, errors) given to ``signal``. ``close`` gives its bytes back to the budget."""

    def __init__(self, max_bytes: int, budget: OwnerBudget | None = None) -> None:
        self.max_bytes = max_bytes
        self.budget = budget
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._bytes = 0
        self.overflowed = False

    def offer(self, update: RunUpdate) -> None:
        """Queue ``update``, unless that would hold more than ``max_bytes``, or pass its owner's
        budget (then overflow)."""
        if self.overflowed:
            return
        size = update.size
        if self._bytes + size > self.max_bytes or (self.budget is not None and not self.budget.try_queue(size)):
            self.overflowed = True
            self._queue.put_nowait(_OVERFLOW)
            return
        self._bytes += size
        self._queue.put_nowait(update)

    def close(self) -> None:
        """Give the bytes of the updates still waiting back to the owner's budget."""
        if self.budget is not None:
            self.budget.dequeue(self._bytes)
        self._bytes = 0

    @property
    def held_bytes(self) -> int:
        """Bytes of the updates waiting in it now."""
        return self._bytes

    def signal(self, item: object) -> None:
        """Queue something else for the stream (not counted against ``max_bytes``)."""
        self._queue.put_nowait(item)

    async def get_item(self) -> object:
        """The next update or signal. Raises ``RunUpdatesOverflowError`` once the updates
        buffered before the overflow were read."""
        item = await self._queue.get()
        if item is _OVERFLOW:
            raise RunUpdatesOverflowError(f"more than {self.max_bytes} bytes of updates waited for this listener")
        if isinstance(item, RunUpdate):
            self._bytes -= item.size
            if self.budget is not None:
                self.budget.dequeue(item.size)
        return item


_OVERFLOW = object()


__all__ = ["Listener", "RunUpdatesOverflowError"]
