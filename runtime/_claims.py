"""Keeping a claim alive while an instance continues a run (docs/architecture.md "Claims")."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timedelta

from storage import SnapshotStore, to_bson_precision

from ._cancel import stop_if_cancelled

logger = logging.getLogger(__name__)


def claim_expiry(now: datetime, ttl: float) -> datetime:
    """``now + ttl`` seconds, UTC, at millisecond precision."""
    return to_bson_precision(now + timedelta(seconds=ttl))


@asynccontextmanager
async def renewing_claim(
    store: SnapshotStore,
    agent_id: str,
    run_id: str,
    *,
    by: str,
    ttl: float,
    clock: Callable[[], datetime],
) -> AsyncIterator[None]:
    """Extend the claim ``by`` holds on the run every ``ttl / 3`` seconds while the body runs.

    A lost claim (another instance took the run over) stops the renewal; the final write of
    the body then fails its compare-and-set. Store errors are logged and retried next period.
    """

    async def renew() -> None:
        while True:
            await asyncio.sleep(ttl / 3)
            try:
                held = await store.renew_claim(agent_id, run_id, by=by, until=claim_expiry(clock(), ttl))
            except Exception:
                logger.warning("renewing the claim on run %s failed", run_id, exc_info=True)
                continue
            finally:
                stop_if_cancelled()  # the body's end awaits this task (runtime._cancel)
            if not held:
                logger.warning("instance %s lost its claim on run %s", by, run_id)
                return

    task = asyncio.create_task(renew(), name=f"runsgate-claim-{run_id}")
    try:
        yield
    finally:
        task.cancel()
        await asyncio.wait([task])
