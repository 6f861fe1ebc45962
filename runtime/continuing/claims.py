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
    loop = asyncio.get_running_loop()
    renewal: asyncio.Task[None] | None = None
    timer: asyncio.TimerHandle

    async def once() -> None:
        nonlocal timer
        try:
            held = await renew()
        except Exception:
            logger.warning("renewing %s failed", lease, exc_info=True)
            held = True
        finally:
            stop_if_cancelled()  # the body's end awaits this task (runtime/_cancel.py)
        if not held:
            logger.warning("%s was taken over while held", lease)
            return
        timer = loop.call_later(every, due)

    def due() -> None:
        nonlocal renewal
        renewal = loop.create_task(once(), name=f"runsgate-renewing {lease}")

    timer = loop.call_later(every, due)
    try:
        yield
    finally:
        timer.cancel()
        if renewal is not None and not renewal.done():
            renewal.cancel()
            await asyncio.wait([renewal])
