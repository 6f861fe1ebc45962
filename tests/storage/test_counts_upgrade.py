"""A store written before kept counts lists the same runs and totals after the upgrade.

``tests/data/v4-before-counts`` holds a SQLite file and a MongoDB database (Extended JSON) written
by commit 9c0088c with its ``make.py``, and what that version answered for each agent and filter
(``listings.json``): the run ids listed, newest first, and the total. Today's store opens a copy,
fills its counts once (the ``backfill``), and must answer the same; later writes keep the totals.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from bson import json_util
from pymongo import AsyncMongoClient

from storage import MongoSnapshotStore, RunFilter, SnapshotStore, SQLiteSnapshotStore
from storage.protocol import ClaimedDeletion, DecisionWrite
from tests._servers import mongo_store

from ..conftest import kind_uri
from ._contract import T0, decision, snapshot

DATA = Path(__file__).resolve().parent.parent / "data" / "v4-before-counts"
LISTINGS: dict[str, Any] = json.loads((DATA / "listings.json").read_text())


def run_filter(fields: dict[str, Any]) -> RunFilter:
    """The ``RunFilter`` of one of ``listings.json``'s filters (as ``make.py`` builds it)."""
    given = dict(fields)
    if "resource_ids" in given:
        given["resource_ids"] = frozenset(given["resource_ids"])
    if "from_date" in given:
        given["from_date"] = datetime.fromisoformat(given["from_date"])
    return RunFilter(**given)


@asynccontextmanager
async def upgraded(request: pytest.FixtureRequest, tmp_path: Path, kind: str) -> AsyncIterator[SnapshotStore]:
    """Today's store of ``kind`` over a copy of the old store, opened (and so upgraded)."""
    store: SnapshotStore
    if kind == "sqlite":
        copy = tmp_path / "runs.db"
        shutil.copy(DATA / "runs.db", copy)
        store = SQLiteSnapshotStore(copy)
    else:
        uri = kind_uri(request, kind)
        client: AsyncMongoClient[Any] = AsyncMongoClient(uri, tz_aware=True)
        database = client.get_default_database()
        for name, docs in json_util.loads((DATA / "mongo.json").read_text()).items():
            if docs:
                await database[name].insert_many(docs)
        await client.close()
        store = mongo_store(uri)
    await store.open()
    try:
        yield store
    finally:
        if isinstance(store, MongoSnapshotStore):
            await store.drop_all()
        await store.close()


async def answers(store: SnapshotStore) -> dict[str, dict[str, Any]]:
    """What ``store`` lists and counts for every agent and filter of ``listings.json``."""
    found = {}
    for key in LISTINGS["answers"]["sqlite"]:
        agent, name = key.split(" ", 1)
        fields = LISTINGS["filters"][name]
        listed = await store.list_runs(agent, run_filter(fields))
        total = await store.count_runs(agent, run_filter(fields))
        found[key] = {"runs": [doc["_id"] for doc in listed], "total": total}
    return found


@pytest.mark.parametrize(
    "kind",
    [
        "sqlite",
        pytest.param("mongo", marks=pytest.mark.mongo),
        pytest.param("ferretdb1", marks=pytest.mark.mongo),
    ],
)
async def test_an_old_store_lists_the_same_runs_and_totals_after_the_upgrade(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str
) -> None:
    expected = LISTINGS["answers"]["sqlite" if kind == "sqlite" else "mongo"]

    async with upgraded(request, tmp_path, kind) as store:
        # then every listing and total is what the old version answered
        assert await answers(store) == expected

        # and totals follow later writes: a new run in t1/r1, the claimed run-05 finished
        await store.insert(snapshot("new-run", thread="t1", resource="r1", created=T0), b"[]")
        assert await store.delete_claimed(ClaimedDeletion(agent_id="weather-agent", run_id="run-05", by="v4"))
        after = await answers(store)
        assert after["refund-agent t1 r1"]["total"] == expected["refund-agent t1 r1"]["total"] + 1
        assert after["refund-agent all"]["total"] == expected["refund-agent all"]["total"] + 1
        assert after["weather-agent all"]["total"] == expected["weather-agent all"]["total"] - 1
        for key, answer in after.items():
            assert answer["total"] == len(answer["runs"]) or "since" in key, key

    if kind == "sqlite":  # and the file's counts are its runs', recorded as backfill 3 (4 and 5, the queue's)
        with sqlite3.connect(tmp_path / "runs.db") as db:
            assert db.execute("SELECT value FROM runsgate_meta WHERE key = 'backfill'").fetchone() == ("6",)
            kept = db.execute("SELECT sum(runs) FROM run_counts WHERE scope = 0").fetchone()[0]
            assert kept == db.execute("SELECT count(*) FROM run_snapshots").fetchone()[0]


async def test_a_decision_after_the_upgrade_changes_no_total(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    async with upgraded(request, tmp_path, "sqlite") as store:
        before = await answers(store)
        write = DecisionWrite(
            agent_id="refund-agent",
            run_id="run-00",
            index=0,
            tool_call_id="call-00",
            question_id="question-00",
            decision=decision(),
            now=T0,
        )
        decided = await store.record_decision(write)
        assert decided is not None
        assert await answers(store) == before
