"""``SQLiteSnapshotStore``: the SQLite store's parts, one per protocol part (runs, decisions, the
reviewers' queue, claims, events, idempotency keys, webhook deliveries, run updates), composed
into one class."""

from __future__ import annotations

import sqlite3

from .claims import _Claims
from .decisions import _Decisions
from .events import _Events
from .file.schema import _DATA_TABLES
from .idempotency import _IdempotencyKeys
from .review import _Review
from .run_updates import _RunUpdates
from .runs import _Runs
from .webhooks import _WebhookDeliveries


class SQLiteSnapshotStore(
    _Runs, _Decisions, _Review, _Claims, _Events, _IdempotencyKeys, _WebhookDeliveries, _RunUpdates
):
    """``SnapshotStore`` in one SQLite file (created if missing).

    Args:
        path: The database file; its directory must exist and be writable (SQLite creates the
            ``-wal`` and ``-shm`` files next to it).
        busy_timeout: Seconds a write waits for the write lock held by another process, and
            before that for this process's writer connection; then ``StoreUnavailableError``.
            Keep it below half ``RUNSGATE_SUBSCRIPTION_LOOKBACK`` (docs/storage.md "SQLite").
        synchronous: ``FULL`` (every commit fsynced) or ``NORMAL`` (a power loss may lose the
            last commits); see docs/storage.md "SQLite".
    """

    async def drop_all(self) -> None:
        """Delete every run, history, event, idempotency key, webhook delivery and run update (tests and
        ``runsgate seed --reset``); the tables and the schema version stay."""

        def write(db: sqlite3.Connection) -> None:
            for table in _DATA_TABLES:
                db.execute(f"DELETE FROM {table}")

        self._kept_histories.clear()
        await self._write(write)


__all__ = ["SQLiteSnapshotStore"]
