"""One pass of the sweeper's event retention step at 10k finished runs on SQLite.

``./dev run python -m bench.event_retention [runs] [expired]``.

A SQLite file gets ``runs`` (default 10,000) finished runs of five events each (started,
suspended, decision, resumed, completed), seeded in bulk through the store's own row layout;
``expired`` (default 200) of them finished 31 days ago, the rest an hour ago. Then one
``sweep_event_retention`` pass (retention 30 days) is timed: it lists at most 100 expired runs
through index ``events_retention``, reads their events and snapshots, and deletes 100 runs'
events. Printed: runs and events before, the pass's milliseconds, runs deleted, events after.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

from runtime.events.retention import sweep_event_retention
from storage import EventDocument, EventType, SQLiteSnapshotStore, rules, utcnow
from storage.sqlite.rows import _INSERT_EVENT, _event_row  # the store's own row layout, to seed quickly

RETENTION = 2_592_000.0
"""``RUNSGATE_EVENT_RETENTION``'s default, seconds."""
KINDS: tuple[EventType, ...] = ("started", "suspended", "decision", "resumed", "completed")


def _events(run_id: str, finished: datetime) -> list[EventDocument]:
    events: list[EventDocument] = []
    for number, kind in enumerate(KINDS):
        at = finished - timedelta(seconds=len(KINDS) - 1 - number)
        event: EventDocument = {
            "_id": f"{int(at.timestamp() * 1e9):020d}-{uuid.uuid4().hex[:12]}",
            "runId": run_id,
            "agentId": "refund-agent",
            "threadId": None,
            "resourceId": None,
            "type": kind,
            "at": at,
            "by": "key:bench",
            "data": {"toolCallId": "call-1", "reason": "r" * 100},
        }
        retention = rules.retention_from(kind, at)
        if retention is not None:
            event["retentionFrom"] = retention
        events.append(event)
    return events


def seed(path: Path, runs: int, expired: int, now: datetime) -> None:
    """``runs`` finished runs in ``path``, ``expired`` of them past the retention period."""

    async def create() -> None:
        store = SQLiteSnapshotStore(path)
        await store.open()
        await store.close()

    asyncio.run(create())
    rows = []
    for number in range(runs):
        age = timedelta(days=31) if number < expired else timedelta(hours=1)
        rows += [_event_row(e) for e in _events(f"run-{number:08d}", now - age)]
    with sqlite3.connect(path) as connection:
        connection.executemany(_INSERT_EVENT, rows)
    connection.close()


def _count(path: Path) -> tuple[int, int]:
    with sqlite3.connect(path) as connection:
        events, runs = connection.execute("SELECT count(*), count(DISTINCT run_id) FROM run_events").fetchone()
    connection.close()
    return int(runs), int(events)


async def measure(path: Path, now: datetime) -> tuple[float, int]:
    """One pass's milliseconds and runs deleted."""
    store = SQLiteSnapshotStore(path)
    await store.open()
    try:
        begin = time.perf_counter()
        deleted = await sweep_event_retention(store, now=now, retention=RETENTION)
        return (time.perf_counter() - begin) * 1000, deleted
    finally:
        await store.close()


def main(argv: list[str]) -> None:
    runs = int(argv[0]) if argv else 10_000
    expired = int(argv[1]) if len(argv) > 1 else 200
    now = utcnow()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.db"
        seed(path, runs, expired, now)
        before = _count(path)
        ms, deleted = asyncio.run(measure(path, now))
        after = _count(path)
    print(f"runs {before[0]} events {before[1]}: one pass {ms:.1f} ms, runs deleted {deleted}, events left {after[1]}")


if __name__ == "__main__":
    main(sys.argv[1:])
