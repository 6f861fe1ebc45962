"""Idempotency keys stored before they had a ``finishedAt`` get one when their store is first
opened (a backfill recorded in ``runsgate_meta``), so they expire too; keys in flight never get
one. And the SQLite expiry pass is one search of its index."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from storage import SCHEMA_VERSION, KeyReservation, MongoSnapshotStore, SQLiteSnapshotStore, to_bson_precision
from storage.sqlite.file.backfill import BACKFILL_VERSION
from tests._servers import mongo_store

from ..conftest import kind_uri
from ._contract import T0

V3 = Path(__file__).resolve().parent.parent / "data" / "v3" / "runs.db"
"""A SQLite file written by an earlier runsgate (commit aee9d3c, tests/data/v3/make.py)."""


async def test_the_sqlite_expiry_pass_is_one_search_of_the_finished_index(sqlite_path: Path) -> None:
    store = SQLiteSnapshotStore(sqlite_path)
    await store.open()
    try:
        plan = await store.explain_expired_idempotency_keys(before=T0, limit=1000)
    finally:
        await store.close()

    # the delete's subquery walks keys_finished in order: no scan, no temporary B-tree
    assert any("USING COVERING INDEX keys_finished (finished_at<?)" in step for step in plan), plan
    assert not any("SCAN idempotency_keys" in step or "TEMP B-TREE" in step for step in plan), plan


async def test_a_sqlite_file_of_an_earlier_version_gets_its_answered_keys_a_finish_once(tmp_path: Path) -> None:
    # given a file written by an earlier runsgate (no finished_at column), to which that version
    # added an answered key and a key in flight
    path = tmp_path / "runs.db"
    shutil.copy(V3, path)
    with sqlite3.connect(path) as conn:
        assert "finished_at" not in {row[1] for row in conn.execute("PRAGMA table_info(idempotency_keys)")}
        conn.executemany(
            "INSERT INTO idempotency_keys (key_id, fingerprint, result, created_at, reserved_by, reserved_until) "
            "VALUES (?, 'fp', ?, 0, 'old', 0)",
            [("answered", '{"outcome": {"status": "COMPLETED"}}'), ("in-flight", None)],
        )
    conn.close()

    # when this runsgate opens it
    before_open = to_bson_precision(datetime.now(UTC))
    store = SQLiteSnapshotStore(path)
    await store.open()
    try:
        after_open = datetime.now(UTC)
        answered = await store.reserve_idempotency_key(
            KeyReservation(key_id="answered", fingerprint="fp", now=after_open)
        )
        in_flight = await store.reserve_idempotency_key(
            KeyReservation(key_id="in-flight", fingerprint="fp", now=datetime(1970, 1, 1, tzinfo=UTC))
        )

        # then the answered key finished at the open (it expires a retention period after it),
        # and the key in flight has no finish
        assert answered is not None
        assert before_open <= answered["finishedAt"] <= after_open
        assert answered["result"] == {"outcome": {"status": "COMPLETED"}}
        assert in_flight is not None
        assert "finishedAt" not in in_flight
        assert await store.delete_expired_idempotency_keys(before=before_open, limit=10) == 0
        assert await store.delete_expired_idempotency_keys(before=after_open + timedelta(days=400), limit=10) == 1
        assert (
            await store.reserve_idempotency_key(KeyReservation(key_id="answered", fingerprint="fp", now=after_open))
            is None
        )
    finally:
        await store.close()

    # and the backfill is recorded, so it runs once per file
    with sqlite3.connect(path) as conn:
        meta = dict(conn.execute("SELECT key, value FROM runsgate_meta").fetchall())
    conn.close()
    assert meta == {"schema_version": str(SCHEMA_VERSION), "backfill": str(BACKFILL_VERSION)}


@pytest.fixture(
    params=[pytest.param("mongo", marks=pytest.mark.mongo), pytest.param("ferretdb1", marks=pytest.mark.mongo)]
)
async def mongo(request: pytest.FixtureRequest) -> AsyncIterator[MongoSnapshotStore]:
    """A MongoDB store (DocumentDB, then FerretDB 1.24) on a fresh database, dropped afterwards."""
    store = mongo_store(kind_uri(request, request.param))
    await store.open()
    try:
        yield store
    finally:
        await store.drop_all()
        await store.database.drop_collection("runsgate_meta")
        await store.close()


async def test_a_mongodb_database_of_an_earlier_version_gets_its_answered_keys_a_finish_once(
    mongo: MongoSnapshotStore,
) -> None:
    # given keys as earlier versions stored them (an answer as JSON text, an answer as a
    # document before that, one in flight), in a database without the backfill's record
    keys = mongo.database["idempotency_keys"]
    old = {"fingerprint": "fp", "createdAt": T0, "reservedBy": "old", "reservedUntil": T0}
    await keys.insert_many(
        [
            {"_id": "as-text", **old, "result": None, "resultJson": '{"outcome": 1}'},
            {"_id": "as-document", **old, "result": {"outcome": 2}},
            {"_id": "in-flight", **old, "result": None},
        ]
    )
    await mongo.database["runsgate_meta"].delete_one({"_id": "backfill"})

    # when this runsgate opens it
    before_open = to_bson_precision(datetime.now(UTC))
    store = mongo_store(mongo.uri)
    await store.open()
    try:
        after_open = datetime.now(UTC)
        stored = {doc["_id"]: doc async for doc in keys.find({})}

        # then each answered key finished at the open, and the key in flight has no finish
        for key_id in ("as-text", "as-document"):
            assert before_open <= stored[key_id]["finishedAt"] <= after_open, stored[key_id]
        assert "finishedAt" not in stored["in-flight"]
        meta = [doc async for doc in store.database["runsgate_meta"].find({"_id": "backfill"})]
        assert meta == [{"_id": "backfill", "version": 5}]
        assert await store.delete_expired_idempotency_keys(before=before_open, limit=10) == 0
        assert await store.delete_expired_idempotency_keys(before=after_open + timedelta(days=400), limit=10) == 2
        assert [doc["_id"] async for doc in keys.find({})] == ["in-flight"]
    finally:
        await store.close()


async def test_the_sqlite_delivery_expiry_is_one_search_of_its_index(sqlite_path: Path) -> None:
    store = SQLiteSnapshotStore(sqlite_path)
    await store.open()
    try:
        plan = await store.explain_expired_webhook_deliveries(before=T0, limit=1000)
    finally:
        await store.close()

    assert any("USING COVERING INDEX deliveries_finished (finished_at<?)" in step for step in plan), plan
    assert not any("SCAN webhook_deliveries" in step or "TEMP B-TREE" in step for step in plan), plan
