"""A store written before the queue's kept counts counts the same questions after the upgrade.

``tests/data/v5-before-queue-counts`` holds a SQLite file written by commit 76625f9 (schema version
5, backfill 3) with its ``make.py``, and what that version counted for each queue filter
(``queue.json``). Today's store opens a copy, fills ``review_counts`` once (backfill 4) and must
count the same from it; later writes keep the counts. ``tests/data/v5-mongo-before-queue-counts``
holds the same runs in a MongoDB database written by commit 2530bd3 (schema version 5, backfill 3,
the queue's total an aggregation): today's store fills the queue's counts once (backfill 4),
raises the schema version to 6 and counts the same.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from bson import json_util
from pymongo import AsyncMongoClient

from storage import SCHEMA_VERSION, QueueFilter, SnapshotStore, SQLiteSnapshotStore
from storage.mongo import schema
from storage.protocol import ClaimedDeletion, DecisionWrite
from tests._servers import mongo_store

from ..conftest import kind_uri
from ._contract import T0, decision, snapshot, tool_call

DATA = Path(__file__).resolve().parent.parent / "data" / "v5-before-queue-counts"
QUEUE: dict[str, Any] = json.loads((DATA / "queue.json").read_text())


def queue_filter(fields: dict[str, Any]) -> QueueFilter:
    """The ``QueueFilter`` of one of ``queue.json``'s filters (as ``make.py`` builds it)."""
    given = dict(fields)
    for name in ("agent_ids", "resource_ids"):
        if name in given:
            given[name] = frozenset(given[name])
    if "expires_before" in given:
        given["expires_before"] = datetime.fromisoformat(given["expires_before"])
    return QueueFilter(**given)


async def counted(store: SnapshotStore) -> dict[str, int]:
    return {name: await store.count_review_questions(queue_filter(f)) for name, f in QUEUE["filters"].items()}


def kept_total(path: Path) -> tuple[int, int]:
    """(the kept counts' every-agent total, the pending calls of the waiting runs) of the file."""
    with sqlite3.connect(path) as db:
        kept = db.execute("SELECT coalesce(sum(questions), 0) FROM review_counts WHERE scope = 0").fetchone()[0]
        truth = db.execute(
            "SELECT coalesce(sum(pending_count), 0) FROM run_snapshots "
            "WHERE status = 'suspended' AND pending_count > 0 AND parent_run_id IS NULL"
        ).fetchone()[0]
    return int(kept), int(truth)


async def test_a_file_written_before_counts_the_same_questions_after_the_upgrade(tmp_path: Path) -> None:
    copy = tmp_path / "runs.db"
    shutil.copy(DATA / "runs.db", copy)
    store = SQLiteSnapshotStore(copy)
    await store.open()
    try:
        # then every total is what the old version counted, read from the kept counts
        assert await counted(store) == QUEUE["answers"]
        kept, truth = kept_total(copy)
        assert kept == truth == QUEUE["answers"]["all"]

        # and later writes keep them: a new run of 2 calls in t1/r1, a decision, the claimed run-03 finished
        await store.insert(snapshot("new-run", calls=[tool_call("c1"), tool_call("c2")], created=T0), b"[]")
        assert await store.record_decision(
            DecisionWrite(
                agent_id="refund-agent", run_id="new-run", index=0, tool_call_id="c1", decision=decision(), now=T0
            )
        )
        assert await store.delete_claimed(ClaimedDeletion(agent_id="refund-agent", run_id="run-03", by="v5"))
        after = await counted(store)
        assert after["all"] == QUEUE["answers"]["all"] + 1
        assert after["refund"] == QUEUE["answers"]["refund"] + 1
        assert after["r1 allowed r1"] == QUEUE["answers"]["r1 allowed r1"] + 1
        assert after["t1"] == QUEUE["answers"]["t1"] + 1
    finally:
        await store.close()
    kept, truth = kept_total(copy)
    assert kept == truth == QUEUE["answers"]["all"] + 1
    with sqlite3.connect(copy) as db:
        assert db.execute("SELECT value FROM runsgate_meta WHERE key = 'backfill'").fetchone() == ("6",)


MONGO_DATA = DATA.parent / "v5-mongo-before-queue-counts"


@pytest.mark.mongo
@pytest.mark.parametrize("kind", ["mongo", "ferretdb1"])
async def test_a_mongodb_database_written_before_counts_the_same_questions_after_the_upgrade(
    request: pytest.FixtureRequest, kind: str
) -> None:
    expected = json.loads((MONGO_DATA / "queue.json").read_text())["answers"]
    assert expected == QUEUE["answers"]  # the same runs and writes as the SQLite file's
    uri = kind_uri(request, kind)
    client: AsyncMongoClient[Any] = AsyncMongoClient(uri, tz_aware=True)
    for name, docs in json_util.loads((MONGO_DATA / "mongo.json").read_text()).items():
        if docs:
            await client.get_default_database()[name].insert_many(docs)
    await client.close()
    store = mongo_store(uri)
    await store.open()
    try:
        # then the database is of backfill 4 and schema version 6 (a runsgate of 5 would not keep the
        # counts, so it must refuse it), and every total is what the old version counted
        meta = {doc["_id"]: doc["version"] for doc in await store.database[schema.META].find({}).to_list()}
        assert meta == {"schema": SCHEMA_VERSION, "backfill": schema.BACKFILL_VERSION} == {"schema": 7, "backfill": 5}
        assert await counted(store) == expected
        queue_counts = await store.database[schema.COUNTS].find({"scope": {"$exists": True}}).to_list()
        assert sum(doc["n"] for doc in queue_counts if doc["_id"].endswith(',null,null,"q"]')) == expected["all"]

        # and later writes keep them: a new run of 2 calls in t1/r1, a decision, the claimed run-03
        # finished; before and after the sweeper's pass writes and folds their entries
        await store.insert(snapshot("new-run", calls=[tool_call("c1"), tool_call("c2")], created=T0), b"[]")
        assert await store.record_decision(
            DecisionWrite(
                agent_id="refund-agent", run_id="new-run", index=0, tool_call_id="c1", decision=decision(), now=T0
            )
        )
        assert await store.delete_claimed(ClaimedDeletion(agent_id="refund-agent", run_id="run-03", by="v5"))
        for _ in range(2):
            after = await counted(store)
            assert after["all"] == expected["all"] + 1
            assert after["refund"] == expected["refund"] + 1
            assert after["r1 allowed r1"] == expected["r1 allowed r1"] + 1
            assert after["t1"] == expected["t1"] + 1
            await store.complete_pending_events(before=datetime.now(UTC) + timedelta(days=1), limit=1000)
        left = await store.database[schema.COUNTS].find({"pending": {"$ne": {}}}).to_list()
        assert left == [], left
    finally:
        await store.drop_all()
        await store.close()
