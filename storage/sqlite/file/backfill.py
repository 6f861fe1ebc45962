"""The SQLite store's backfills: columns a newer runsgate derives for rows an older one wrote,
filled once per file at ``open()`` and recorded as the ``backfill`` row of ``runsgate_meta``
(docs/storage.md "Schema versions")."""

from __future__ import annotations

from datetime import datetime

import aiosqlite

from ...rules import FINISHING_EVENTS
from .. import counts, queue_counts
from ..rows import _marks, _ms

BACKFILL_VERSION = 6
"""The backfills this runsgate applies: 1 = ``idempotency_keys.finished_at`` of answered keys,
2 = ``run_events.retention_from`` of finishing events (the time of the open), 3 = the kept
counts of ``run_counts`` (``counts.rebuild``), 4 = the queue's kept counts of ``review_counts``
(``queue_counts.rebuild``), 5 = the queue's candidate marks of ``review_marks``
(``queue_counts.rebuild_marks``), 6 = those marks with the runs' review claims and escalations."""


async def backfill(conn: aiosqlite.Connection, now: datetime) -> None:
    """Inside ``open()``'s transaction, after the tables exist: add ``finished_at`` to an older
    ``idempotency_keys`` and its index ``keys_finished``; then, once per file, give every
    answered key without one ``finished_at`` = ``now`` (UTC), so it expires a retention period
    after this open (never earlier than its answer allows), every finishing event without one
    ``retention_from`` = ``now`` too (a run that finished long before keeps its events a retention
    period after the upgrade), set the kept counts, the queue's and its marks from the runs stored
    (``counts.rebuild``, ``queue_counts.rebuild``, ``rebuild_marks``: the triggers keep them from
    then on), and record
    ``BACKFILL_VERSION``."""
    columns = {row[1] for row in await conn.execute_fetchall("PRAGMA table_info(idempotency_keys)")}
    if "finished_at" not in columns:
        await conn.execute("ALTER TABLE idempotency_keys ADD COLUMN finished_at INTEGER")
    await conn.execute(
        "CREATE INDEX IF NOT EXISTS keys_finished ON idempotency_keys (finished_at) WHERE finished_at IS NOT NULL"
    )
    rows = list(await conn.execute_fetchall("SELECT value FROM runsgate_meta WHERE key = 'backfill'"))
    done = int(rows[0][0]) if rows else 0
    if done >= BACKFILL_VERSION:
        return
    if done < 1:
        await conn.execute(
            "UPDATE idempotency_keys SET finished_at = ? WHERE result IS NOT NULL AND finished_at IS NULL",
            (_ms(now),),
        )
    if done < 2:
        finishing = sorted(FINISHING_EVENTS)
        finished = f"retention_from IS NULL AND type IN ({_marks(len(finishing))})"
        await conn.execute(f"UPDATE run_events SET retention_from = ? WHERE {finished}", (_ms(now), *finishing))
    if done < 3:
        await counts.rebuild(conn)
    if done < 4:
        await queue_counts.rebuild(conn)
    if done < 6:
        await queue_counts.renew_mark_triggers(conn)
    await queue_counts.rebuild_marks(conn)
    await conn.execute(
        "INSERT INTO runsgate_meta (key, value) VALUES ('backfill', ?) ON CONFLICT (key) DO UPDATE "
        "SET value = excluded.value WHERE CAST(value AS INTEGER) < CAST(excluded.value AS INTEGER)",
        (str(BACKFILL_VERSION),),
    )
