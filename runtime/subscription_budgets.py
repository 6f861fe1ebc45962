"""What one principal's subscriptions may hold and send on this process (``SubscriptionBudgets``,
one ``OwnerBudget`` per principal, shared by its ``suspendedRunEvents`` and ``runUpdates`` streams):
- replay pages of at most ``REPLAY_PAGE_BYTES``, held until sent, and ``replay_bytes`` for all of
  the owner's replays (past it, pages of one item; no replay waits for another);
- ``queued_bytes`` of live items waiting for the owner's subscribers (the one past it is dropped);
- at most ``rate`` items a second sent (``pace``, a burst of a tenth of a second's worth).
One owner never uses another's budget. Sizes: ``storage.event_size``, a stored update's JSON length.
Why: SECURITY.md "Bounds on what a client or a receiver controls".
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

REPLAY_PAGE_BYTES = 256 * 1024
"""Bytes of one replay page at most (a page holds one item at least, whatever its size)."""


@dataclass(eq=False)
class OwnerBudget:
    """The bytes one owner's subscriptions hold on this process (module docstring); ``None``
    limits do not bound."""

    replay_bytes: int | None
    queued_bytes: int | None
    rate: float | None = None
    """Items a second the owner's streams send at most (``None``: unpaced)."""
    replaying: int = 0
    """Bytes of replay pages read and not yet all taken by the clients."""
    queued: int = 0
    """Bytes of live events and updates waiting for the owner's subscribers."""
    holders: int = 0
    _credit: float = 0.0
    """Items the owner may send now without waiting; below 0, the turns already given out."""
    _credited_at: float | None = field(default=None, repr=False)

    @property
    def held(self) -> int:
        """Bytes held now: replay pages and live queues."""
        return self.replaying + self.queued

    @property
    def page_bytes(self) -> int:
        """Bytes of one replay page of this owner: ``REPLAY_PAGE_BYTES``, or less when its
        ``replay_bytes`` is less."""
        return REPLAY_PAGE_BYTES if self.replay_bytes is None else min(REPLAY_PAGE_BYTES, self.replay_bytes)

    def start_page(self) -> int:
        """Reserve the bytes of one replay page: ``page_bytes``, or what is left of the owner's
        ``replay_bytes`` when less, and 1 (a page of one item) when nothing is; give back what
        the page did not use with ``settle_page``, and each item's once taken with ``release``."""
        page = self.page_bytes
        if self.replay_bytes is not None:
            page = max(1, min(page, self.replay_bytes - self.replaying))
        self.replaying += page
        return page

    def settle_page(self, reserved: int, used: int) -> None:
        """A page reserved with ``reserved`` bytes holds ``used`` bytes (more only when its one
        item is larger)."""
        self.release(reserved - used)

    def release(self, size: int) -> None:
        """``size`` bytes of replay pages were taken by the clients (or never used)."""
        self.replaying -= size

    async def pace(self) -> None:
        """Wait for the owner's turn to send one more item (``rate``), and give the event loop a
        turn in any case. Turns are given in the order asked, one every ``1 / rate`` seconds once
        the burst is spent; a waiter that is cancelled does not give its turn back."""
        if self.rate is None:
            await asyncio.sleep(0)
            return
        now = asyncio.get_running_loop().time()
        burst = max(1.0, self.rate / 10)
        if self._credited_at is None:
            self._credit = burst
        else:
            self._credit = min(burst, self._credit + (now - self._credited_at) * self.rate)
        self._credited_at = now
        self._credit -= 1
        await asyncio.sleep(0 if self._credit >= 0 else -self._credit / self.rate)

    def try_queue(self, size: int) -> bool:
        """Queue ``size`` bytes of live items for a subscriber; ``False`` (nothing queued) when
        they would make the owner's queues pass ``queued_bytes`` (one item is always let in
        when nothing of the owner waits)."""
        if self.queued_bytes is not None and self.queued and self.queued + size > self.queued_bytes:
            return False
        self.queued += size
        return True

    def dequeue(self, size: int) -> None:
        """``size`` bytes of live items left the queues (taken, or their subscriber left)."""
        self.queued -= size


class SubscriptionBudgets:
    """The process's budgets, one per owner while it has subscriptions (module docstring).

    Args:
        replay_bytes: Bytes of replay pages one owner may have in flight (``None``: unbounded;
            each page is at most ``REPLAY_PAGE_BYTES`` still).
        queued_bytes: Bytes of live items that may wait for one owner's subscribers (``None``:
            only each subscriber's own bound).
        rate: Items a second one owner's streams send at most (``None``: unpaced).

    Raises:
        ValueError: A limit below 1 (a rate not above 0).
    """

    def __init__(
        self, replay_bytes: int | None = None, queued_bytes: int | None = None, rate: float | None = None
    ) -> None:
        if (replay_bytes is not None and replay_bytes < 1) or (queued_bytes is not None and queued_bytes < 1):
            raise ValueError("replay_bytes and queued_bytes must be >= 1 (or None)")
        if rate is not None and not rate > 0:
            raise ValueError("rate must be > 0 (or None)")
        self.replay_bytes = replay_bytes
        self.queued_bytes = queued_bytes
        self.rate = rate
        self._owners: dict[str, OwnerBudget] = {}
        self._unowned: set[OwnerBudget] = set()

    def hold(self, owner: str | None) -> OwnerBudget:
        """The budget of ``owner``, for one more of its subscriptions (``release`` it when that
        ends); ``None`` (trusted in-process code): a budget of its own, with the same limits."""
        if owner is None:
            budget = OwnerBudget(self.replay_bytes, self.queued_bytes, self.rate)
            self._unowned.add(budget)
        else:
            budget = self._owners.get(owner) or self._owners.setdefault(
                owner, OwnerBudget(self.replay_bytes, self.queued_bytes, self.rate)
            )
        budget.holders += 1
        return budget

    def release(self, owner: str | None, budget: OwnerBudget) -> None:
        """One subscription of ``owner`` ended (``hold``); its budget is forgotten with its last."""
        budget.holders -= 1
        if budget.holders:
            return
        if owner is None:
            self._unowned.discard(budget)
        elif self._owners.get(owner) is budget:
            del self._owners[owner]

    def held(self, owner: str) -> int:
        """Bytes held for ``owner``'s subscriptions now (0 when it has none)."""
        budget = self._owners.get(owner)
        return 0 if budget is None else budget.held

    @property
    def total_held(self) -> int:
        """Bytes held for every subscription of this process now."""
        return sum(b.held for b in self._owners.values()) + sum(b.held for b in self._unowned)


__all__ = ["REPLAY_PAGE_BYTES", "OwnerBudget", "SubscriptionBudgets"]
