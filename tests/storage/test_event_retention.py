"""The events of finished runs expire (docs/guarantees.md "Events"): on every store a finishing
event's ``retentionFrom`` is kept as written, ``list_expired_events`` finds the runs finished
before a bound through an index, ``postpone_event_retention`` moves them later and
``delete_run_events`` deletes runs' events, many runs a call; files and databases written before get dates once."""

from __future__ import annotations

import shutil
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from storage import SCHEMA_VERSION, EventDocument, MongoSnapshotStore, SnapshotStore, SQLiteSnapshotStore, rules
from storage.protocol import EventsAfter
from storage.sqlite.file.backfill import BACKFILL_VERSION
from tests._servers import mongo_store

from ._contract import T0
from .test_key_retention import V3, mongo  # noqa: F401 (the fixture)

HOUR = timedelta(hours=1)


def _event(run_id: str, event_type: Any, at: datetime, number: int, agent_id: str = "agent-a") -> EventDocument:
    event: EventDocument = {
        "_id": f"{int(at.timestamp() * 1e9):020d}-{number:012x}",
        "runId": run_id,
        "agentId": agent_id,
        "threadId": None,
        "resourceId": None,
        "type": event_type,
        "at": at,
        "by": "alice",
        "data": {},
    }
    retention = rules.retention_from(event_type, at)
    if retention is not None:
        event["retentionFrom"] = retention
    return event


async def _append_run(store: SnapshotStore, run_id: str, finished: datetime, agent_id: str = "agent-a") -> None:
    number = sum(map(ord, run_id)) * 10
    await store.append_event(_event(run_id, "started", finished - HOUR, number, agent_id))
    await store.append_event(_event(run_id, "completed", finished, number + 1, agent_id))


async def test_expired_runs_are_listed_oldest_first_and_their_events_deleted(store: SnapshotStore) -> None:
    # given three finished runs (one of another agent) and one still running
    await _append_run(store, "run-old", T0)
    await _append_run(store, "run-older", T0 - HOUR, agent_id="agent-b")
    await _append_run(store, "run-new", T0 + 10 * HOUR)
    await store.append_event(_event("run-open", "started", T0 - 5 * HOUR, 1))

    # the finishing event keeps its date, the others have none
    events = await store.list_events("agent-a", "run-old")
    assert [e.get("retentionFrom") for e in events] == [None, T0]

    # then the runs finished before the bound are listed, oldest first, at most the limit
    before = T0 + HOUR
    expired = await store.list_expired_events(before=before, limit=10)
    assert expired == [("agent-b", "run-older"), ("agent-a", "run-old")]
    assert await store.list_expired_events(before=before, limit=1) == [("agent-b", "run-older")]
    assert await store.list_expired_events(before=T0 - HOUR, limit=10) == []

    # and deleting one run's events leaves the other runs' alone
    assert await store.delete_run_events([("agent-a", "run-old")]) == 2
    assert await store.list_events("agent-a", "run-old") == []
    assert await store.list_expired_events(before=before, limit=10) == [("agent-b", "run-older")]
    assert len(await store.list_events("agent-a", "run-new")) == 2
    assert len(await store.list_events("agent-a", "run-open")) == 1
    feed = await store.list_events_after(EventsAfter(agent_id="agent-a", after_event_id=None, limit=100))
    assert {e["runId"] for e in feed} == {"run-new", "run-open"}


async def test_a_postponed_run_is_listed_again_only_after_its_new_date(store: SnapshotStore) -> None:
    await _append_run(store, "run-a", T0)
    await store.append_event(_event("run-a", "failed", T0 - HOUR, 99))

    await store.postpone_event_retention({("agent-a", "run-a"): T0 + 5 * HOUR})

    assert await store.list_expired_events(before=T0 + HOUR, limit=10) == []
    assert await store.list_expired_events(before=T0 + 6 * HOUR, limit=10) == [("agent-a", "run-a")]
    dates = [e.get("retentionFrom") for e in await store.list_events("agent-a", "run-a")]
    assert sorted(dates, key=lambda d: d is not None) == [None, T0 + 5 * HOUR, T0 + 5 * HOUR]


async def test_one_call_postpones_or_deletes_many_runs_each_to_its_own_date(store: SnapshotStore) -> None:
    # given four finished runs of two agents
    for run_id, agent_id in [("run-a", "agent-a"), ("run-b", "agent-a"), ("run-c", "agent-b"), ("run-d", "agent-b")]:
        await _append_run(store, run_id, T0, agent_id=agent_id)

    # when one call postpones two of them to different dates and one call deletes the other two
    await store.postpone_event_retention({("agent-a", "run-a"): T0 + 2 * HOUR, ("agent-b", "run-c"): T0 + 4 * HOUR})
    assert await store.delete_run_events([("agent-a", "run-b"), ("agent-b", "run-d"), ("agent-b", "run-d")]) == 4

    # then each postponed run is listed once its own date is old, and the deleted ones are gone
    assert await store.list_expired_events(before=T0 + 3 * HOUR, limit=10) == [("agent-a", "run-a")]
    assert await store.list_expired_events(before=T0 + 5 * HOUR, limit=10) == [
        ("agent-a", "run-a"),
        ("agent-b", "run-c"),
    ]
    assert await store.list_events("agent-a", "run-b") == []
    assert await store.list_events("agent-b", "run-d") == []
    assert [e.get("retentionFrom") for e in await store.list_events("agent-b", "run-c")] == [None, T0 + 4 * HOUR]

    # and empty batches write nothing
    await store.postpone_event_retention({})
    assert await store.delete_run_events([]) == 0
    assert len(await store.list_events("agent-a", "run-a")) == 2


async def test_the_sqlite_expired_events_are_one_search_of_their_index(sqlite_path: Path) -> None:
    store = SQLiteSnapshotStore(sqlite_path)
    await store.open()
    try:
        plan = await store.explain_expired_events(before=T0, limit=100)
    finally:
        await store.close()

    assert any("USING COVERING INDEX events_retention (retention_from<?)" in step for step in plan), plan
    assert not any("SCAN run_events" in step or "TEMP B-TREE" in step for step in plan), plan


async def test_a_sqlite_file_of_an_earlier_version_gets_its_finished_runs_dates_once(tmp_path: Path) -> None:
    # given a file written by an earlier runsgate (no retention_from column) holding a finished run
    path = tmp_path / "runs.db"
    shutil.copy(V3, path)
    with sqlite3.connect(path) as conn:
        assert "retention_from" not in {row[1] for row in conn.execute("PRAGMA table_info(run_events)")}
        conn.executemany(
            "INSERT INTO run_events (event_id, agent_id, run_id, thread_id, resource_id, scope, type, at, by, data) "
            "VALUES (?, 'agent-a', 'run-old', NULL, NULL, 0, ?, ?, 'alice', '{}')",
            [("00000000000000000001-a", "started", 1000), ("00000000000000000002-a", "completed", 2000)],
        )
    conn.close()

    # when this runsgate opens it
    store = SQLiteSnapshotStore(path)
    opened = datetime.now(UTC).replace(microsecond=0)
    await store.open()
    try:
        # then the finishing event is dated at the open, not at its own time (1970): the run that
        # finished long ago keeps its events a retention period after the upgrade
        events = await store.list_events("agent-a", "run-old")
        dated = events[1].get("retentionFrom")
        assert events[0].get("retentionFrom") is None
        assert dated is not None
        assert opened <= dated <= datetime.now(UTC)
        assert await store.list_expired_events(before=opened, limit=10) == []
        assert await store.list_expired_events(before=dated + HOUR, limit=10) == [("agent-a", "run-old")]
    finally:
        await store.close()

    with sqlite3.connect(path) as conn:
        meta = dict(conn.execute("SELECT key, value FROM runsgate_meta").fetchall())
    conn.close()
    assert meta == {"schema_version": str(SCHEMA_VERSION), "backfill": str(BACKFILL_VERSION)}


async def test_a_mongodb_database_of_an_earlier_version_gets_its_finished_runs_dates_once(
    mongo: MongoSnapshotStore,  # noqa: F811 (the fixture)
) -> None:
    # given events as earlier versions stored them (no retentionFrom), after backfill 1 only
    events = mongo.database["run_events"]
    old = {"agentId": "agent-a", "threadId": None, "resourceId": None, "by": "alice", "dataJson": "{}"}
    await events.insert_many(
        [
            {"_id": "00000000000000000001-a", "runId": "run-old", "type": "started", "at": T0 - HOUR, **old},
            {"_id": "00000000000000000002-a", "runId": "run-old", "type": "completed", "at": T0, **old},
            {"_id": "00000000000000000003-a", "runId": "run-failed", "type": "failed", "at": T0 + HOUR, **old},
        ]
    )
    await mongo.database["runsgate_meta"].update_one({"_id": "backfill"}, {"$set": {"version": 1}})

    # when this runsgate opens it
    store = mongo_store(mongo.uri)
    opened = datetime.now(UTC).replace(microsecond=0)
    await store.open()
    try:
        # then each finishing event is dated at the open (not at its own time), the others are not
        stored = {doc["_id"]: doc async for doc in events.find({})}
        assert "retentionFrom" not in stored["00000000000000000001-a"]
        dates = [
            stored[i]["retentionFrom"].replace(tzinfo=UTC) for i in ("00000000000000000002-a", "00000000000000000003-a")
        ]
        assert dates[0] == dates[1]
        assert opened <= dates[0] <= datetime.now(UTC)
        meta = [doc async for doc in store.database["runsgate_meta"].find({"_id": "backfill"})]
        assert meta == [{"_id": "backfill", "version": 5}]
        assert await store.list_expired_events(before=T0 + 2 * HOUR, limit=10) == []
        assert sorted(await store.list_expired_events(before=dates[0] + HOUR, limit=10)) == [
            ("agent-a", "run-failed"),
            ("agent-a", "run-old"),
        ]
    finally:
        await store.close()
