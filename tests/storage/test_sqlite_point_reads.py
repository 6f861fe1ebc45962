"""A SQLite store's read of one run (``get``): run on the event loop that opened the store, with no
hand-off to the reader's thread, never waiting for another process's write, and through the
reader's thread from another thread. Real files, and a second real connection for the lock."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from storage import SQLiteSnapshotStore
from storage.protocol import DecisionWrite

from ._contract import T0, decision, snapshot

AGENT = "refund-agent"


@pytest.fixture
async def sqlite(sqlite_path: Path) -> AsyncIterator[SQLiteSnapshotStore]:
    store = SQLiteSnapshotStore(sqlite_path, busy_timeout=0.2)
    await store.open()
    await store.insert(snapshot("r1"), b"history")
    try:
        yield store
    finally:
        await store.close()


async def test_a_runs_read_on_the_opening_loop_wakes_it_from_no_other_thread(
    sqlite: SQLiteSnapshotStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = asyncio.get_running_loop()
    wake = loop.call_soon_threadsafe
    woken: list[str] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        woken.append(threading.current_thread().name)
        return wake(*args, **kwargs)

    monkeypatch.setattr(loop, "call_soon_threadsafe", counted)
    found = await sqlite.get(AGENT, "r1")
    assert found is not None
    assert found["_id"] == "r1"
    assert await sqlite.get(AGENT, "missing") is None
    assert woken == []


async def test_a_runs_read_answers_the_committed_run_while_another_process_writes_it(
    sqlite: SQLiteSnapshotStore, sqlite_path: Path
) -> None:
    other = sqlite3.connect(sqlite_path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # holds the file's write lock, its change not committed
        other.execute("UPDATE run_snapshots SET pending_count = 7 WHERE run_id = 'r1'")
        found = await asyncio.wait_for(sqlite.get(AGENT, "r1"), 10)
        assert found is not None
        assert found["pendingCount"] == 1
        assert await sqlite.get(AGENT, "r1") == found
        other.execute("COMMIT")
        found = await sqlite.get(AGENT, "r1")
        assert found is not None
        assert found["pendingCount"] == 7
    finally:
        other.close()


async def test_a_runs_read_from_another_threads_loop_reads_the_same_run(sqlite: SQLiteSnapshotStore) -> None:
    written = await sqlite.record_decision(
        DecisionWrite(agent_id=AGENT, run_id="r1", index=0, tool_call_id="c1", decision=decision(), now=T0)
    )
    assert written is not None
    found: list[Any] = []
    thread = threading.Thread(target=lambda: found.append(asyncio.run(sqlite.get(AGENT, "r1"))))
    thread.start()
    await asyncio.to_thread(thread.join)
    assert found[0] == written == await sqlite.get(AGENT, "r1")
