"""The SQLite store's backfills: columns a newer runsgate derives for rows an older one wrote,
filled once per file at ``open()`` and recorded as the ``backfill`` row of ``runsgate_meta``
(docs/storage.md "Schema versions")."""

from __future__ import annotations

from datetime import datetime

import aiosqlite

from .rows import _ms

BACKFILL_VERSION = 1
"""The backfills this runsgate applies: 1 = ``idempotency_keys.finished_at`` of answered keys."""


async def backfill(conn: aiosqlite.Connection, now: datetime) -> None:
    """Inside ``open()``'s transaction, after the tables exist: add ``finished_at`` to an older
    ``idempotency_keys`` and its index ``keys_finished``; then, once per file, give every
    answered key without one ``finished_at`` = ``now`` (UTC), so it expires a retention period
    after this open (never earlier than its answer allows), and record ``BACKFILL_VERSION``."""
    columns = {row[1] for row in await conn.execute_fetchall("PRAGMA table_info(idempotency_keys)")}
    if "finished_at" not in columns:
        await conn.execute("ALTER TABLE idempotency_keys ADD COLUMN finished_at INTEGER")
    await conn.execute(
        "CREATE INDEX IF NOT EXISTS keys_finished ON idempotency_keys (finished_at) WHERE finished_at IS NOT NULL"
    )
    rows = list(await conn.execute_fetchall("SELECT value FROM runsgate_meta WHERE key = 'backfill'"))
    if rows and int(rows[0][0]) >= BACKFILL_VERSION:
        return
    await conn.execute(
        "UPDATE idempotency_keys SET finished_at = ? WHERE result IS NOT NULL AND finished_at IS NULL", (_ms(now),)
    )
    await conn.execute(
        "INSERT INTO runsgate_meta (key, value) VALUES ('backfill', ?) ON CONFLICT (key) DO UPDATE "
        "SET value = excluded.value WHERE CAST(value AS INTEGER) < CAST(excluded.value AS INTEGER)",
        (str(BACKFILL_VERSION),),
    )
