"""SQLite specifics of deadlines (issue 18 part 2; docs/storage.md "SQLite"): the expiry pass and the
``expiresBefore`` filter use their indexes, and a file written before ``expires_at`` gets the column."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from storage import RunFilter, SQLiteSnapshotStore

from ._contract import T0, snapshot
from .test_deadlines import deadline_call


@pytest.fixture
async def sqlite(sqlite_path: Path) -> AsyncIterator[SQLiteSnapshotStore]:
    store = SQLiteSnapshotStore(sqlite_path)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def test_the_expiry_pass_is_one_search_of_the_deadline_index(sqlite: SQLiteSnapshotStore) -> None:
    plan = await sqlite.explain_expired_runs(now=T0, limit=50)

    assert len(plan) == 1, plan  # one index search, in deadline order: no temporary B-tree
    assert "USING INDEX runs_expiring (expires_at<?)" in plan[0], plan


async def test_the_expires_before_filter_searches_the_agents_deadlines(sqlite: SQLiteSnapshotStore) -> None:
    plan = await sqlite.explain_listing("refund-agent", RunFilter(expires_before=T0), 20)

    assert any("USING INDEX runs_agent_expiring (agent_id=? AND expires_at<?)" in step for step in plan), plan


async def test_a_file_written_before_deadlines_gets_the_column_and_its_runs_have_none(sqlite_path: Path) -> None:
    # given a file whose run_snapshots table has no expires_at column, holding one run
    store = SQLiteSnapshotStore(sqlite_path)
    await store.open()
    old = snapshot("old")
    await store.insert(old, b"[]")
    await store.close()
    with sqlite3.connect(sqlite_path) as conn:
        deadline_indexes = ("runs_expiring", "runs_agent_expiring", "runs_review_queue")
        for index in (*deadline_indexes, "runs_review_queue_thread", "runs_review_queue_resource"):
            conn.execute(f"DROP INDEX {index}")
        conn.execute("ALTER TABLE run_snapshots DROP COLUMN expires_at")

    # when this runsgate opens it
    store = SQLiteSnapshotStore(sqlite_path)
    await store.open()
    try:
        # then the old run reads without a deadline, and new runs get theirs
        got = await store.get("refund-agent", "old")
        assert got == old
        new = snapshot("new", calls=[deadline_call("c", 5)])
        await store.insert(new, b"[]")
        found = await store.list_expired_runs(now=T0 + timedelta(minutes=5), limit=10)
        assert [d["_id"] for d in found] == ["new"]
    finally:
        await store.close()
