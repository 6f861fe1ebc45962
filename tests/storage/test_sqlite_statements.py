"""The statements of a SQLite store's claiming writes, counted by SQLite's trace on the writer's
connection (no timing): a write that claims a run (the last decision, ``claim``) reads the run's
history for the continuation in its ``UPDATE``'s ``RETURNING``, with no statement of its own."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from storage import DecisionClaim, SQLiteSnapshotStore
from storage.protocol import ClaimWrite, DecisionWrite

from ._contract import T0, decision, snapshot

AGENT = "refund-agent"
UNTIL = T0 + timedelta(seconds=60)


@pytest.fixture
async def traced(sqlite_path: Path) -> AsyncIterator[tuple[SQLiteSnapshotStore, list[str]]]:
    """A store and the statements its writer runs from now on (the SQL as SQLite traces it)."""
    store = SQLiteSnapshotStore(sqlite_path)
    await store.open()
    ran: list[str] = []
    writer = store._writer
    assert writer is not None
    await writer.call(lambda db: db.set_trace_callback(ran.append))
    try:
        yield store, ran
    finally:
        await store.close()


def _histories_read(ran: list[str]) -> list[str]:
    return [sql for sql in ran if sql.lstrip().upper().startswith("SELECT DATA FROM RUN_HISTORIES")]


async def test_the_last_decision_reads_the_history_it_keeps_in_its_update(
    traced: tuple[SQLiteSnapshotStore, list[str]],
) -> None:
    store, ran = traced
    await store.insert(snapshot("run"), b'[{"kind": "request"}]')
    ran.clear()

    written = await store.record_decision(
        DecisionWrite(
            agent_id=AGENT,
            run_id="run",
            index=0,
            tool_call_id="c1",
            decision=decision(),
            now=T0,
            claim=DecisionClaim(by="a", until=UNTIL, version=1),
        )
    )

    assert written is not None
    assert written["status"] == "resuming"
    assert _histories_read(ran) == []
    updates = [sql for sql in ran if sql.lstrip().upper().startswith("UPDATE RUN_SNAPSHOTS")]
    assert updates
    assert all("RETURNING" in sql for sql in updates)
    ran.clear()
    assert await store.load_history(AGENT, "run") == b'[{"kind": "request"}]'
    assert ran == []  # the kept history: not read again


async def test_a_claim_reads_the_history_it_keeps_in_its_update(
    traced: tuple[SQLiteSnapshotStore, list[str]],
) -> None:
    store, ran = traced
    done = snapshot("run")
    done["toolCalls"][0]["decision"] = decision()
    done["pendingCount"] = 0
    await store.insert(done, b"[1]")
    ran.clear()

    claimed = await store.claim(ClaimWrite(agent_id=AGENT, run_id="run", by="a", until=UNTIL, now=T0))

    assert claimed is not None
    assert claimed["status"] == "resuming"
    assert _histories_read(ran) == []
    assert await store.load_history(AGENT, "run") == b"[1]"


async def test_a_history_too_large_to_keep_is_read_after_the_claim(
    traced: tuple[SQLiteSnapshotStore, list[str]],
) -> None:
    store, _ = traced
    done = snapshot("run")
    done["toolCalls"][0]["decision"] = decision()
    done["pendingCount"] = 0
    large = random.Random(0).randbytes(512 * 1024)  # zlib keeps it above the 256 KiB kept
    await store.insert(done, large)

    assert await store.claim(ClaimWrite(agent_id=AGENT, run_id="run", by="a", until=UNTIL, now=T0)) is not None

    assert store._kept_history(AGENT, "run") is None
    assert await store.load_history(AGENT, "run") == large
