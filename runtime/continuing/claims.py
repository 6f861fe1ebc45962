"""Keeping leases alive: renewed in a task while a body runs (a run's claim while an instance
continues it, docs/architecture.md "Claims"; an idempotency key while its request runs)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta

from .._cancel import stop_if_cancelled

logger = logging.getLogger(__name__)


def whole_milliseconds(seconds: float) -> timedelta:
    """``seconds`` truncated to whole milliseconds, so that a time at millisecond (BSON) precision
    plus it stays at that precision."""
    return timedelta(milliseconds=timedelta(seconds=seconds) // timedelta(milliseconds=1))


@asynccontextmanager
async def renewing(renew: Callable[[], Awaitable[bool]], *, every: float, lease: str) -> AsyncIterator[None]:
    """Keep a lease alive while the body runs: ``renew`` every ``every`` seconds, each renewal in a
    task of its own started by a timer when it is due (a run's claim, an idempotency key's
    reservation), so a body shorter than ``every`` starts no task.

    ``renew`` answering ``False`` (the lease was taken over) stops the renewals; the body's final
    compare-and-set then fails. A store error is logged and retried at the next period. ``lease``
    names the lease in the logs and the renewals' task name. The body's end cancels the next
    renewal, and one in flight, which it awaits.
    """
    renewals = _Renewals(renew, every, lease)
    try:
        yield
    finally:  # here, not in a method: the approval's walk does not come back into this module
        renewals.timer.cancel()
        renewal, renewals.renewal = renewals.renewal, None
        if renewal is not None and not renewal.done():
            renewal.cancel()
            await asyncio.wait([renewal])


class _Renewals:
    """``renewing``'s timer and renewal task: no closure referring to another, so that the body's
    end leaves no reference cycle (the timer, cancelled, lets go of its callback)."""

    __slots__ = ("_every", "_lease", "_loop", "_renew", "renewal", "timer")

    def __init__(self, renew: Callable[[], Awaitable[bool]], every: float, lease: str) -> None:
        self._renew = renew
        self._every = every
        self._lease = lease
        self._loop = asyncio.get_running_loop()
        self.renewal: asyncio.Task[None] | None = None
        self.timer = self._loop.call_later(every, self._due)

    def _due(self) -> None:
        self.renewal = self._loop.create_task(self._once(), name=f"runsgate-renewing {self._lease}")

    async def _once(self) -> None:
        try:
            held = await self._renew()
        except Exception:
            logger.warning("renewing %s failed", self._lease, exc_info=True)
            held = True
        finally:
            stop_if_cancelled()  # the body's end awaits this task (runtime/_cancel.py)
        if not held:
            logger.warning("%s was taken over while held", self._lease)
            return
        self.timer = self._loop.call_later(self._every, self._due)
