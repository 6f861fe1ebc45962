"""Write tests/data/sqlite-before-space/runs.db with the runsgate that made files without
``auto_vacuum`` (``NONE``), to check that today's converts such a file once when it opens it.

Pinned: run with the code of commit f1a086e (the last before ``auto_vacuum``) first on the path::

    mkdir /tmp/f1a086e && git archive f1a086e | tar -x -C /tmp/f1a086e
    PYTHONPATH=/tmp/f1a086e ./dev run python tests/data/sqlite-before-space/make.py tests/data/sqlite-before-space

It writes ``OUT_DIR/runs.db`` holding ``KEPT`` suspended runs (ids ``kept-0``...) with their
histories, and free pages left by ``GONE`` runs of ``GONE_BYTES`` of history each, stored then
deleted (finished), so the file holds free pages.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from storage import SCHEMA_VERSION, SnapshotDocument, SQLiteSnapshotStore
from storage.protocol import ClaimedDeletion, ClaimWrite

KEPT = 3
GONE = 20
GONE_BYTES = 8 * 1024
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def history(name: str, size: int) -> bytes:
    """``size`` bytes that zlib cannot shrink, the same for the same ``name``."""
    out = b""
    while len(out) < size:
        out += hashlib.sha256(name.encode() + len(out).to_bytes(8, "big")).digest()
    return out[:size]


def snapshot(run_id: str, *, pending: int) -> SnapshotDocument:
    calls = [
        {
            "toolCallId": f"c{i}",
            "toolName": "issue_refund",
            "args": {"order_id": 1042, "amount": 25.5},
            "requiresApproval": True,
            "suspendPayload": None,
            "resumeSchema": None,
            "decision": None,
        }
        for i in range(pending)
    ]
    return {
        "_id": run_id,
        "agentId": "refund-agent",
        "threadId": "t1",
        "resourceId": "r1",
        "parentRunId": None,
        "status": "suspended",
        "createdAt": T0,
        "suspendedAt": T0,
        "updatedAt": T0,
        "toolCalls": calls,  # type: ignore[typeddict-item]
        "pendingCount": pending,
        "version": 1,
        "claim": None,
        "lastError": None,
        "schemaVersion": SCHEMA_VERSION,
        "historyId": f"h-{run_id}",
    }


async def write(path: Path) -> None:
    store = SQLiteSnapshotStore(path)
    await store.open()
    for i in range(KEPT):
        await store.insert(snapshot(f"kept-{i}", pending=1), history(f"kept-{i}", 4096))
    for i in range(GONE):
        await store.insert(snapshot(f"gone-{i}", pending=0), history(f"gone-{i}", GONE_BYTES))
    for i in range(GONE):
        until = T0 + timedelta(minutes=1)
        assert await store.claim(
            ClaimWrite(agent_id="refund-agent", run_id=f"gone-{i}", by="make", until=until, now=T0)
        )
        assert await store.delete_claimed(ClaimedDeletion(agent_id="refund-agent", run_id=f"gone-{i}", by="make"))
    await store.close()


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name in ("runs.db", "runs.db-wal", "runs.db-shm"):
        (out / name).unlink(missing_ok=True)
    asyncio.run(write(out / "runs.db"))
    with sqlite3.connect(out / "runs.db") as conn:  # the pinned code, not today's, wrote it
        assert conn.execute("PRAGMA auto_vacuum").fetchone() == (0,)
        assert conn.execute("PRAGMA freelist_count").fetchone()[0] > 0


if __name__ == "__main__":
    main(Path(sys.argv[1]))
