"""What ``MongoSnapshotStore`` keeps of its own writes and reads in flight, per process: the ids
of events it appended and left pending in their run (``Appended``), the writes it sent behind a
store call (``Behind``), and histories read ahead of their load (``ReadAhead``)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Sequence

logger = logging.getLogger(__name__)


class Appended:
    """Ids of events this store appended to ``run_events`` and left pending in their run's
    snapshot, by run, for at most ``limit`` runs (the oldest forgotten first: an event forgotten is
    appended again, and skipped there as a duplicate)."""

    def __init__(self, limit: int = 4096) -> None:
        self._limit = limit
        self._ids: dict[str, frozenset[str]] = {}

    def put(self, run_id: str, event_ids: Sequence[str]) -> None:
        self._ids.pop(run_id, None)
        self._ids[run_id] = frozenset(event_ids)
        while len(self._ids) > self._limit:
            del self._ids[next(iter(self._ids))]

    def pop(self, run_id: str) -> frozenset[str]:
        """The ids kept for ``run_id`` (none: empty), forgotten: the run is being written again."""
        return self._ids.pop(run_id, frozenset())


class Behind:
    """Writes of a run still in flight after the store call that sent them returned (a claiming
    decision's appends, a finished run's deletion), by run: the run's next write of events or
    run updates from this store awaits them first (``wait``), so a run's events and batches are
    stored in the order they were written. A failed one is logged: what it wrote is kept
    elsewhere (the events pending in the snapshot, a finished run for the sweeper)."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, run_id: str, write: Awaitable[None]) -> None:
        """Send ``write`` for ``run_id`` without awaiting it (after the run's earlier ones)."""
        earlier = self._tasks.get(run_id)

        async def in_order() -> None:
            if earlier is not None:
                await asyncio.wait([earlier])
            await write

        task = asyncio.ensure_future(in_order())
        self._tasks[run_id] = task
        task.add_done_callback(functools.partial(self._done, run_id))

    def _done(self, run_id: str, task: asyncio.Task[None]) -> None:
        if self._tasks.get(run_id) is task:
            del self._tasks[run_id]
        if not task.cancelled() and (error := task.exception()) is not None:
            logger.warning("run %s: a write sent behind failed", run_id, exc_info=error)

    async def wait(self, run_id: str) -> None:
        """Until ``run_id``'s writes in flight are done (their errors are not raised here)."""
        task = self._tasks.get(run_id)
        if task is not None:
            await asyncio.wait([task])

    async def wait_all(self) -> None:
        """Until every write in flight is done."""
        if self._tasks:
            await asyncio.wait(list(self._tasks.values()))


class ReadAhead:
    """Message histories read ahead of ``load_history``, by history id (a history is never
    rewritten under its id), at most ``limit`` (the oldest dropped first); and the history id of
    each run ``get`` read last, with its version, for at most ``limit`` runs."""

    def __init__(self, limit: int = 64) -> None:
        self._limit = limit
        self._seen: dict[str, tuple[int, str]] = {}
        self._reads: dict[str, asyncio.Task[bytes | None]] = {}

    def saw(self, run_id: str, version: int, history_id: str) -> None:
        """``get`` read ``run_id`` at ``version``, pointing to ``history_id``."""
        self._seen.pop(run_id, None)
        self._seen[run_id] = (version, history_id)
        while len(self._seen) > self._limit:
            del self._seen[next(iter(self._seen))]

    def history_at(self, run_id: str, version: int) -> str | None:
        """The history id ``get`` read for ``run_id`` at ``version`` (forgotten), else ``None``."""
        seen = self._seen.pop(run_id, None)
        return seen[1] if seen is not None and seen[0] == version else None

    def start(self, history_id: str, read: Awaitable[bytes | None]) -> None:
        """Send ``read`` of ``history_id`` now; ``take`` gives its result."""
        self.drop(history_id)
        self._reads[history_id] = asyncio.ensure_future(read)
        while len(self._reads) > self._limit:
            self.drop(next(iter(self._reads)))

    def drop(self, history_id: str) -> None:
        """Forget the read of ``history_id`` (cancelled if still in flight)."""
        task = self._reads.pop(history_id, None)
        if task is not None:
            task.cancel()
            task.add_done_callback(_quiet)

    def clear(self) -> None:
        """Forget every read (``drop``): the store is closing."""
        for history_id in list(self._reads):
            self.drop(history_id)
        self._seen.clear()

    def take(self, history_id: str) -> asyncio.Task[bytes | None] | None:
        """The read of ``history_id`` started, forgotten here, else ``None``."""
        return self._reads.pop(history_id, None)


def _quiet(task: asyncio.Task[bytes | None]) -> None:
    """Retrieve a dropped read's outcome, so that its error is not reported as never retrieved."""
    if not task.cancelled():
        task.exception()


__all__ = ["Appended", "Behind", "ReadAhead"]
