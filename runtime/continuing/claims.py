"""Keeping leases alive: a claim while an instance continues a run (docs/architecture.md "Claims"),
an idempotency key while its request runs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime, timedelta

from storage import SnapshotStore
from storage.protocol import ClaimRenewal

from .._cancel import stop_if_cancelled

logger = logging.getLogger(__name__)


def claim_expiry(now: datetime, ttl: float) -> datetime:
    """``now + ttl`` seconds, at millisecond precision when ``now`` is (a manager's clock): ``ttl``
    truncated to whole milliseconds."""
    return now + whole_milliseconds(ttl)


def whole_milliseconds(seconds: float) -> timedelta:
    """``seconds`` truncated to whole milliseconds, so that a time at millisecond (BSON) precision
    plus it stays at that precision."""
    return timedelta(milliseconds=timedelta(seconds=seconds) // timedelta(milliseconds=1))


@asynccontextmanager
async def renewing(renew: Callable[[], Awaitable[bool]], *, every: float, lease: str) -> AsyncIterator[None]:
    """Keep a lease alive while the body runs: ``renew`` every ``every`` seconds, in a task of
    its own (a run's claim, an idempotency key's reservation).

    ``renew`` answering ``False`` (the lease was taken over) stops the renewals; the body's final
    compare-and-set then fails. A store error is logged and retried at the next period. ``lease``
    names the lease in the logs and the task's name.
    """

    async def loop() -> None:
        while True:
            await asyncio.sleep(every)
            try:
                held = await renew()
            except Exception:
                logger.warning("renewing %s failed", lease, exc_info=True)
                continue
            finally:
                stop_if_cancelled()  # the body's end awaits this task (runtime/_cancel.py)
            if not held:
                logger.warning("%s was taken over while held", lease)
                return

    task = asyncio.create_task(loop(), name=f"runsgate-renewing {lease}")
    try:
        yield
    finally:
        task.cancel()
        await asyncio.wait([task])


def renewing_claim(
    store: SnapshotStore,
    agent_id: str,
    run_id: str,
    *,
    by: str,
    ttl: float,
    clock: Callable[[], datetime],
) -> AbstractAsyncContextManager[None]:
    """Extend the claim ``by`` holds on the run every ``ttl / 3`` seconds while the body runs
    (``renewing``)."""
    return renewing(
        lambda: store.renew_claim(
            ClaimRenewal(agent_id=agent_id, run_id=run_id, by=by, until=claim_expiry(clock(), ttl))
        ),
        every=ttl / 3,
        lease=f"the claim of {by} on run {run_id}",
    )
