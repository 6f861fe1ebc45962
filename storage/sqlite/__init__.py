"""``SQLiteSnapshotStore``: suspended runs in one SQLite file, through ``aiosqlite``.

Several processes of one host may share the file: every conditional write is one ``BEGIN
IMMEDIATE`` transaction, and writes that queue share a commit (``connection``). WAL journal,
``synchronous=FULL`` by default; ``busy_timeout`` (seconds) bounds each wait for the lock, after
which a write fails with ``StoreUnavailableError``. By part: ``file`` (tables, opening, backup),
``rows`` (mapping), ``conditions`` (``storage.rules`` as SQL), one module per protocol part,
composed here into one class. Tables, indexes, durability, the bound on ``busy_timeout``:
docs/storage.md "SQLite".
"""

from __future__ import annotations

import sqlite3

from .claims import _Claims
from .connection import DEFAULT_BUSY_TIMEOUT, LARGE_HISTORY_BYTES
from .decisions import _Decisions
from .events import _Events
from .file.schema import _DATA_TABLES, LISTING_INDEXES
from .idempotency import _IdempotencyKeys
from .review import _Review
from .run_updates import _RunUpdates
from .runs import _Runs, listing_where
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


__all__ = ["DEFAULT_BUSY_TIMEOUT", "LARGE_HISTORY_BYTES", "LISTING_INDEXES", "SQLiteSnapshotStore", "listing_where"]
