"""What only the SQLite store has to show: its files, its locks, its faults (``storage/sqlite/``).

Every test works on a real SQLite file in its own ``tmp_path``; the lock and disk-full cases are
made with a second real connection and SQLite's own page limit, not with mocks.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiosqlite
import pytest

from runtime import EventFeed
from runtime.events.journal import event_id
from storage import (
    SCHEMA_VERSION,
    EventDocument,
    KeyAnswer,
    KeyReservation,
    NewerSchemaError,
    RunFilter,
    SQLiteSnapshotStore,
    StoreUnavailableError,
)
from storage.protocol import DecisionWrite, RunPage
from storage.sqlite import LISTING_INDEXES
from storage.sqlite.file.backfill import BACKFILL_VERSION
from storage.sqlite.file.schema import switch_to_wal

from ._contract import T0, decision, snapshot, tool_call

AGENT = "refund-agent"
HUGE = 2**70 + 1
"""An integer beyond 64 bits (BSON and orjson refuse it; JSON does not)."""


@pytest.fixture
async def sqlite(sqlite_path: Path) -> AsyncIterator[SQLiteSnapshotStore]:
    store = SQLiteSnapshotStore(sqlite_path)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


def odd_json() -> dict[str, Any]:
    """Keys MongoDB treats as operators or paths, deep nesting, big integers, unicode."""
    return {
        "$x": HUGE,
        "a.b": {"$gt": [-HUGE, 1.5, None, True, "ünï"]},
        "nested": {"deeper": {"deepest": [[{"$ref": "x", "id.": -(2**64)}]]}},
        "": "empty key",
    }


async def test_any_key_nesting_and_integers_beyond_64_bits_round_trip(
    sqlite: SQLiteSnapshotStore, sqlite_path: Path
) -> None:
    call = tool_call("c1", approval=False)
    call["args"] = odd_json()
    call["suspendPayload"] = odd_json()
    call["resumeSchema"] = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}
    run = snapshot("odd", calls=[call])
    await sqlite.insert(run, b"[]")
    resumed = {**decision("resumed"), "resumeData": odd_json(), "idempotencyKey": "k.$1"}
    event: EventDocument = {
        "_id": event_id(),
        "runId": "odd",
        "agentId": AGENT,
        "type": "decision",
        "at": T0,
        "by": "alice",
        "data": odd_json(),
    }

    # when a decision with such resume data is recorded, an event and an idempotent answer stored
    decided = await sqlite.record_decision(
        DecisionWrite(agent_id=AGENT, run_id="odd", index=0, tool_call_id="c1", decision=resumed, now=T0)
    )
    await sqlite.append_event(event)
    assert await sqlite.reserve_idempotency_key(KeyReservation(key_id="key", fingerprint="fp", now=T0)) is None
    await sqlite.complete_idempotency_key(KeyAnswer(key_id="key", result={"outcome": odd_json()}, now=T0))

    # then everything comes back unchanged, also through a new connection to the file
    assert decided is not None
    assert decided["toolCalls"][0]["args"] == odd_json()
    assert decided["toolCalls"][0]["args"]["$x"] == HUGE
    reopened = SQLiteSnapshotStore(sqlite_path)
    await reopened.open()
    try:
        for store in (sqlite, reopened):
            stored = await store.get(AGENT, "odd")
            assert stored is not None
            assert stored["toolCalls"][0]["args"] == odd_json()
            assert stored["toolCalls"][0]["suspendPayload"] == odd_json()
            assert stored["toolCalls"][0]["resumeSchema"] == call["resumeSchema"]
            assert stored["toolCalls"][0]["decision"] == resumed
            assert (await store.list_runs(AGENT, RunFilter(), RunPage(limit=5))) == [stored]
            assert await store.list_events(AGENT, "odd") == [event]
            kept = await store.reserve_idempotency_key(KeyReservation(key_id="key", fingerprint="fp", now=T0))
            assert kept is not None
            assert kept["result"] == {"outcome": odd_json()}
    finally:
        await reopened.close()


async def test_listing_walks_one_index_in_listing_order_for_each_filter(sqlite: SQLiteSnapshotStore) -> None:
    filters = {
        "runs_agent_created": RunFilter(),
        "runs_agent_thread_created": RunFilter(thread_id="t1"),
        "runs_agent_resource_created": RunFilter(resource_id="r1"),
        "runs_agent_thread_resource_created": RunFilter(thread_id="t1", resource_id="r1"),
    }
    assert set(filters) == set(LISTING_INDEXES)

    for index, run_filter in filters.items():
        plan = await sqlite.explain_listing(AGENT, run_filter, 20)

        assert len(plan) == 1, plan  # one index search, no temporary B-tree to sort
        assert f"USING INDEX {index} " in plan[0], plan


async def test_a_total_without_dates_reads_kept_counts_never_the_runs(sqlite: SQLiteSnapshotStore) -> None:
    allowed = frozenset({"r1", "r2", "r3"})
    filters = [
        RunFilter(),
        RunFilter(thread_id="t1"),
        RunFilter(resource_id="r1"),
        RunFilter(thread_id="t1", resource_id="r1"),
        RunFilter(resource_ids=allowed),
        RunFilter(thread_id="t1", resource_ids=allowed),
    ]

    for run_filter in filters:
        plan = await sqlite.explain_count(AGENT, run_filter)

        assert len(plan) == 1, plan  # one search of the kept counts, by their key
        assert plan[0].startswith("SEARCH run_counts USING PRIMARY KEY (agent_id=? AND scope=? AND "), plan


async def test_a_total_with_dates_counts_the_runs_of_its_index_range(sqlite: SQLiteSnapshotStore) -> None:
    plan = await sqlite.explain_count(AGENT, RunFilter(thread_id="t1", from_date=T0))

    index_range = "runs_agent_thread_created (agent_id=? AND thread_id=? AND created_at>?)"
    assert plan == [f"SEARCH run_snapshots USING COVERING INDEX {index_range}"], plan  # O(matches): docs/storage.md


async def test_the_stalled_run_read_is_one_search_of_its_index_in_its_order(sqlite: SQLiteSnapshotStore) -> None:
    plan = await sqlite.explain_stalled_runs(now=T0, idle_before=T0, limit=50)

    assert plan == ["SEARCH run_snapshots USING INDEX runs_stalled (pending_count=?)"], plan  # no sort step


async def test_a_file_of_a_newer_schema_version_is_refused_and_left_unchanged(
    sqlite: SQLiteSnapshotStore, sqlite_path: Path
) -> None:
    await sqlite.insert(snapshot("kept"), b"[]")
    await sqlite.close()
    with sqlite3.connect(sqlite_path) as db:
        db.execute("UPDATE runsgate_meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    db.close()

    with pytest.raises(NewerSchemaError) as refused:
        await SQLiteSnapshotStore(sqlite_path).open()

    assert (refused.value.found, refused.value.known) == (SCHEMA_VERSION + 1, SCHEMA_VERSION)
    assert "upgrade runsgate" in str(refused.value)
    db = sqlite3.connect(sqlite_path)
    try:
        assert db.execute("SELECT key, value FROM runsgate_meta ORDER BY key").fetchall() == [
            ("backfill", str(BACKFILL_VERSION)),
            ("schema_version", str(SCHEMA_VERSION + 1)),
        ]
        assert db.execute("SELECT run_id FROM run_snapshots").fetchall() == [("kept",)]
    finally:
        db.close()


async def test_a_corrupt_file_is_refused_naming_it_and_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.db"
    garbage = b"this is not a SQLite database, but it is somebody's file\n" * 200
    path.write_bytes(garbage)

    with pytest.raises(StoreUnavailableError) as refused:
        await SQLiteSnapshotStore(path).open()

    assert str(path) in str(refused.value)
    assert "corrupt or not a SQLite database" in str(refused.value)
    assert path.read_bytes() == garbage
    assert not path.with_name("corrupt.db-wal").exists()  # no journal written next to it either


async def test_a_database_of_another_program_is_refused_and_left_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY)")
    db.close()

    with pytest.raises(StoreUnavailableError, match="not a runsgate store") as refused:
        await SQLiteSnapshotStore(path).open()

    assert str(path) in str(refused.value)
    db = sqlite3.connect(path)
    try:
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["customers"]
    finally:
        db.close()


async def test_a_path_that_cannot_be_created_is_refused_naming_it(tmp_path: Path) -> None:
    not_a_directory = tmp_path / "a-file"
    not_a_directory.write_text("x")
    path = not_a_directory / "runsgate.db"

    with pytest.raises(StoreUnavailableError) as refused:
        await SQLiteSnapshotStore(path).open()

    assert f"cannot open or write the SQLite database {path}" in str(refused.value)


async def test_a_decision_waiting_for_a_lock_held_by_another_process_fails_and_writes_nothing(
    sqlite_path: Path,
) -> None:
    store = SQLiteSnapshotStore(sqlite_path, busy_timeout=0.3)
    await store.open()
    blocker = sqlite3.connect(sqlite_path, isolation_level=None)
    try:
        await store.insert(snapshot("run", calls=[tool_call("c1"), tool_call("c2")]), b"[]")
        before = await store.get(AGENT, "run")
        blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock

        # when a decision is recorded while the lock stays taken
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError, match="database is locked"):
            await store.record_decision(
                DecisionWrite(agent_id=AGENT, run_id="run", index=0, tool_call_id="c1", decision=decision(), now=T0)
            )
        waited = time.monotonic() - started

        # then it waited for the busy timeout, failed, and nothing of it was written
        assert waited >= 0.3
        blocker.execute("ROLLBACK")
        assert await store.get(AGENT, "run") == before

        # and once the lock is free the same decision is recorded
        decided = await store.record_decision(
            DecisionWrite(agent_id=AGENT, run_id="run", index=0, tool_call_id="c1", decision=decision(), now=T0)
        )
        assert decided is not None
        assert decided["pendingCount"] == 1
    finally:
        blocker.close()
        await store.close()


async def _rollback_journal_file(path: Path) -> aiosqlite.Connection:
    """A runsgate file switched back to SQLite's rollback journal, opened as ``open()`` opens it."""
    store = SQLiteSnapshotStore(path)
    await store.open()
    await store.close()
    plain = sqlite3.connect(path, isolation_level=None)
    assert plain.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"
    plain.close()
    return await aiosqlite.connect(path, timeout=5.0, isolation_level=None)


def _write_lock_held(path: Path) -> sqlite3.Connection:
    """Another connection holding the file's write lock (a pending write): the caller ends it."""
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    blocker.execute("INSERT INTO runsgate_meta (key, value) VALUES ('probe', 'x')")
    return blocker


async def test_the_switch_to_wal_waits_while_another_process_holds_the_write_lock(sqlite_path: Path) -> None:
    # SQLite fails PRAGMA journal_mode at once, busy handler or not, while another connection
    # holds the write lock: two servers opening one new file at once met it
    conn = await _rollback_journal_file(sqlite_path)
    blocker = _write_lock_held(sqlite_path)
    try:
        asyncio.get_running_loop().call_later(0.4, blocker.execute, "COMMIT")

        # when the file is switched to WAL while the lock is held for 0.4 s
        started = time.monotonic()
        await switch_to_wal(conn, busy_timeout=10.0)

        # then the switch waited for the lock and the file is in WAL
        assert time.monotonic() - started >= 0.3
        assert (await conn.execute_fetchall("PRAGMA journal_mode"))[0][0] == "wal"
    finally:
        blocker.close()
        await conn.close()


async def test_the_switch_to_wal_gives_up_after_the_busy_timeout(sqlite_path: Path) -> None:
    conn = await _rollback_journal_file(sqlite_path)
    blocker = _write_lock_held(sqlite_path)
    try:
        started = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            await switch_to_wal(conn, busy_timeout=0.3)
        assert time.monotonic() - started >= 0.2
        blocker.execute("ROLLBACK")
        assert (await conn.execute_fetchall("PRAGMA journal_mode"))[0][0] == "delete"
    finally:
        blocker.close()
        await conn.close()


async def test_an_event_that_waited_for_the_lock_still_reaches_a_subscriber(sqlite_path: Path) -> None:
    store = SQLiteSnapshotStore(sqlite_path)  # default busy timeout: 2 s, below half the 5 s lookback
    await store.open()
    feed = EventFeed(store, poll_interval=0.05, lookback=5.0)
    blocker = sqlite3.connect(sqlite_path, isolation_level=None)
    try:
        stream = feed.subscribe(AGENT)
        waiting = asyncio.ensure_future(asyncio.wait_for(anext(stream), 10))
        for _ in range(500):
            if feed.polled_agents:
                break
            await asyncio.sleep(0.01)
        blocker.execute("BEGIN IMMEDIATE")
        asyncio.get_running_loop().call_later(1.0, blocker.execute, "ROLLBACK")
        event: EventDocument = {
            "_id": event_id(),  # made now, visible only after the lock is released a second later
            "runId": "run",
            "agentId": AGENT,
            "type": "started",
            "at": T0,
            "by": None,
            "data": {},
        }

        started = time.monotonic()
        await store.append_event(event)

        assert time.monotonic() - started >= 0.9  # it did wait for the lock
        assert await waiting == event
        await stream.aclose()
    finally:
        await feed.close()
        blocker.close()
        await store.close()


async def test_a_full_disk_during_a_decision_records_nothing(sqlite: SQLiteSnapshotStore) -> None:
    await sqlite.insert(snapshot("run"), b"[]")
    before = await sqlite.get(AGENT, "run")
    writer = sqlite._writer  # the store's own connection: SQLite's page limit stands for a full disk
    assert writer is not None
    pages = await writer.call(lambda db: db.execute("PRAGMA page_count").fetchone()[0])
    await writer.call(lambda db: db.execute(f"PRAGMA max_page_count = {pages}").fetchall())
    big = {**decision("resumed"), "resumeData": "x" * 1_000_000}

    with pytest.raises(StoreUnavailableError, match="full"):
        await sqlite.record_decision(
            DecisionWrite(agent_id=AGENT, run_id="run", index=0, tool_call_id="c1", decision=big, now=T0)
        )

    assert await sqlite.get(AGENT, "run") == before
    assert await sqlite.list_runs(AGENT, RunFilter()) == [before]


async def test_a_history_of_20_mb_is_stored_apart_and_read_back(sqlite: SQLiteSnapshotStore) -> None:
    history = bytes(range(256)) * (20 * 1024 * 1024 // 256)
    await sqlite.insert(snapshot("big"), history)

    assert await sqlite.load_history(AGENT, "big") == history
    assert [d["_id"] for d in await sqlite.list_runs(AGENT, RunFilter())] == ["big"]


async def test_a_write_cancelled_while_waiting_for_the_lock_leaves_no_transaction_behind(sqlite_path: Path) -> None:
    store = SQLiteSnapshotStore(sqlite_path, busy_timeout=1.0)
    await store.open()
    blocker = sqlite3.connect(sqlite_path, isolation_level=None)
    try:
        await store.insert(snapshot("run"), b"[]")
        blocker.execute("BEGIN IMMEDIATE")
        asyncio.get_running_loop().call_later(0.2, blocker.execute, "ROLLBACK")

        # when a decision waiting for the lock is cancelled (a client went away)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await store.record_decision(
                    DecisionWrite(agent_id=AGENT, run_id="run", index=0, tool_call_id="c1", decision=decision(), now=T0)
                )
        await asyncio.sleep(0.3)

        # then the store's connection holds no transaction: another process can write, and so can it
        blocker.execute("BEGIN IMMEDIATE")
        blocker.execute("ROLLBACK")
        decided = await store.record_decision(
            DecisionWrite(agent_id=AGENT, run_id="run", index=0, tool_call_id="c1", decision=decision(), now=T0)
        )
        assert decided is not None
    finally:
        blocker.close()
        await store.close()


async def test_concurrent_writes_share_commits_and_each_is_durable_when_it_returns(sqlite_path: Path) -> None:
    store = SQLiteSnapshotStore(sqlite_path)
    await store.open()
    statements: list[str] = []
    writer = store._writer  # the store's own connection: its statements are what is counted
    assert writer is not None
    await writer.call(lambda db: db.set_trace_callback(statements.append))
    try:
        # when 12 decisions on 12 runs are recorded at once
        for i in range(12):
            await store.insert(snapshot(f"run-{i}"), b"[]")
        statements.clear()
        decided = await asyncio.gather(
            *(
                store.record_decision(
                    DecisionWrite(
                        agent_id=AGENT, run_id=f"run-{i}", index=0, tool_call_id="c1", decision=decision(), now=T0
                    )
                )
                for i in range(12)
            )
        )

        # then every one was recorded, with fewer commits (fsyncs) than writes
        assert all(doc is not None for doc in decided)
        commits = sum(1 for statement in statements if statement.strip().upper() == "COMMIT")
        assert 1 <= commits < 12, statements
    finally:
        await store.close()

    # and each is in the file, read by a fresh connection
    reopened = SQLiteSnapshotStore(sqlite_path)
    await reopened.open()
    try:
        for i in range(12):
            stored = await reopened.get(AGENT, f"run-{i}")
            assert stored is not None
            assert stored["toolCalls"][0]["decision"] == decision()
    finally:
        await reopened.close()


async def test_a_write_failing_inside_a_shared_commit_is_rolled_back_alone(sqlite: SQLiteSnapshotStore) -> None:
    # given a stored run
    await sqlite.insert(snapshot("taken"), b"[]")

    # when new runs are inserted at once with one that reuses the stored id
    results = await asyncio.gather(
        *(sqlite.insert(snapshot(run_id), b"[]") for run_id in ("a", "b", "taken", "c", "d")),
        return_exceptions=True,
    )

    # then only the duplicate failed, and the others are stored
    assert [type(r).__name__ for r in results] == ["NoneType", "NoneType", "DuplicateRunError", "NoneType", "NoneType"]
    listed = sorted(doc["_id"] for doc in await sqlite.list_runs(AGENT, RunFilter()))
    assert listed == ["a", "b", "c", "d", "taken"]


async def test_a_write_cancelled_while_its_group_commits_leaves_the_others_stored(sqlite: SQLiteSnapshotStore) -> None:
    # when several inserts run at once and the first is cancelled as soon as it has started
    tasks = [asyncio.create_task(sqlite.insert(snapshot(f"run-{i}"), b"[]")) for i in range(6)]
    await asyncio.sleep(0)
    tasks[0].cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)

    # then the others are stored, and the store keeps writing
    assert all(r is None for r in results[1:]), results
    listed = {doc["_id"] for doc in await sqlite.list_runs(AGENT, RunFilter())}
    assert {f"run-{i}" for i in range(1, 6)} <= listed
    await sqlite.insert(snapshot("after"), b"[]")
    assert await sqlite.get(AGENT, "after") is not None


async def test_a_write_queued_behind_this_process_longer_than_the_busy_timeout_fails_and_never_runs(
    sqlite_path: Path,
) -> None:
    store = SQLiteSnapshotStore(sqlite_path, busy_timeout=0.2)
    await store.open()
    try:
        await store.insert(snapshot("run"), b"[]")
        before = await store.get(AGENT, "run")

        # given a write of this process that holds the writer for 2 s
        def slow(db: sqlite3.Connection) -> None:
            time.sleep(2)

        holding = asyncio.ensure_future(store._write(slow))
        await asyncio.sleep(0.05)

        # when a decision queues behind it
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError, match="busy in this process"):
            await store.record_decision(
                DecisionWrite(agent_id=AGENT, run_id="run", index=0, tool_call_id="c1", decision=decision(), now=T0)
            )

        # then it failed after the busy timeout, before the other write ended, and never ran
        assert time.monotonic() - started >= 0.2
        assert not holding.done()
        await holding
        assert await store.get(AGENT, "run") == before
    finally:
        await store.close()
