"""Continuations queued by decisions that do not wait for them (``wait_for="recorded"``).

A decision that leaves no call of its run waiting answers once it is recorded; the run's
continuation then runs in a task of this process, at most ``limit`` of them at once (the others
wait for a slot). The queue itself is the store: the run is ``suspended`` with every call decided,
which the sweeper of any instance continues if this process dies before claiming it, as it takes
over a claim this process stopped renewing (docs/guarantees.md).
"""

from __future__ import annotations

import asyncio
import logging

from storage import SnapshotDocument

from .continuation import Continuation

logger = logging.getLogger(__name__)


class QueuedContinuations:
    """Continuations run in the background of this process (module docstring)."""

    def __init__(self, continuation: Continuation, *, limit: int) -> None:
        self._continuation = continuation
        self._slots = asyncio.Semaphore(limit)
        self._tasks: set[asyncio.Task[None]] = set()

    def queue(self, doc: SnapshotDocument, principal: str | None) -> None:
        """Continue ``doc``'s run (every call decided) in a task of its own, on behalf of ``principal``."""
        task = asyncio.get_running_loop().create_task(self._run(doc, principal), name=f"runsgate-continue-{doc['_id']}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, doc: SnapshotDocument, principal: str | None) -> None:
        async with self._slots:
            try:
                outcome = await self._continuation.run(doc, principal)
            except Exception:  # its claim (if it got one) expires; the sweeper takes the run over
                logger.exception("continuing run %s failed", doc["_id"])
                return
        logger.info("run %s of agent %s continued: %s", doc["_id"], doc["agentId"], outcome.status)

    @property
    def running(self) -> int:
        """Continuations queued or running now."""
        return len(self._tasks)

    async def close(self) -> None:
        """Cancel every queued continuation and wait for them: their runs are left to the sweeper
        (a claimed one once its claim expired, an unclaimed one after the idle grace)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)


__all__ = ["QueuedContinuations"]
