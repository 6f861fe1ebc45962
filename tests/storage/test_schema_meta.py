"""Start-up reads one metadata document for the schema version, on MongoDB as on SQLite.

``open()`` must not look at every stored snapshot: the version is the ``schema`` document of
``runsgate_meta`` (MongoDB) or the ``schema_version`` row of the table of that name (SQLite). A
MongoDB database written before that document existed is still checked, once, and then gets it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from pymongo import AsyncMongoClient

from storage import SCHEMA_VERSION, NewerSchemaError, SQLiteSnapshotStore
from tests._servers import mongo_store

from ._contract import snapshot

BACKFILLED = {"_id": "backfill", "version": 5}
"""The ``runsgate_meta`` document of the backfills an open applied (``storage/mongo/schema.py``)."""


async def _database_docs(uri: str, collection: str) -> list[dict[str, object]]:
    """Every document of ``collection``, in ``_id`` order."""
    client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(uri, tz_aware=True)
    try:
        return [doc async for doc in client.get_default_database()[collection].find({}).sort("_id")]
    finally:
        await client.close()


@pytest.mark.mongo
async def test_mongo_open_writes_the_schema_document_and_reads_it_alone(mongodb_uri: str) -> None:
    store = mongo_store(mongodb_uri)
    await store.open()
    try:
        assert await _database_docs(mongodb_uri, "runsgate_meta") == [
            BACKFILLED,
            {"_id": "schema", "version": SCHEMA_VERSION},
        ]

        # when only the metadata document says the store is newer (no snapshot does)
        await store.database["runsgate_meta"].update_one({"_id": "schema"}, {"$set": {"version": SCHEMA_VERSION + 1}})
        reopened = mongo_store(mongodb_uri)

        # then the next start refuses it: the document is what open() reads
        with pytest.raises(NewerSchemaError) as refused:
            await reopened.open()
        assert refused.value.found == SCHEMA_VERSION + 1
    finally:
        await store.drop_all()
        await store.database.drop_collection("runsgate_meta")
        await store.close()


@pytest.mark.mongo
async def test_mongo_a_store_written_before_the_schema_document_is_checked_once(mongodb_uri: str) -> None:
    store = mongo_store(mongodb_uri)
    await store.open()
    try:
        # given a database of before the metadata document, holding a snapshot of a newer version
        newer = snapshot("from-the-future")
        newer["schemaVersion"] = SCHEMA_VERSION + 1
        await store.database["run_snapshots"].insert_one(dict(newer))
        await store.database.drop_collection("runsgate_meta")

        # then a start refuses it, and records the version it found
        with pytest.raises(NewerSchemaError):
            await mongo_store(mongodb_uri).open()
        assert await _database_docs(mongodb_uri, "runsgate_meta") == [{"_id": "schema", "version": SCHEMA_VERSION + 1}]

        # and a database of before it holding only current snapshots starts, and gets the document
        await store.database["run_snapshots"].delete_many({})
        await store.database.drop_collection("runsgate_meta")
        await store.insert(snapshot("today"), b"h")
        again = mongo_store(mongodb_uri)
        await again.open()
        await again.close()
        assert await _database_docs(mongodb_uri, "runsgate_meta") == [
            BACKFILLED,
            {"_id": "schema", "version": SCHEMA_VERSION},
        ]
    finally:
        await store.drop_all()
        await store.database.drop_collection("runsgate_meta")
        await store.close()


@pytest.mark.mongo
async def test_mongo_inserting_a_newer_snapshot_raises_the_stored_version(mongodb_uri: str) -> None:
    store = mongo_store(mongodb_uri)
    await store.open()
    try:
        newer = snapshot("from-the-future")
        newer["schemaVersion"] = SCHEMA_VERSION + 2
        await store.insert_many([(newer, b"h")])

        assert await _database_docs(mongodb_uri, "runsgate_meta") == [
            BACKFILLED,
            {"_id": "schema", "version": SCHEMA_VERSION + 2},
        ]
    finally:
        await store.drop_all()
        await store.database.drop_collection("runsgate_meta")
        await store.close()


async def test_sqlite_open_reads_the_version_row_not_the_snapshots(tmp_path: Path) -> None:
    path = tmp_path / "runsgate.db"
    store = SQLiteSnapshotStore(path)
    await store.open()
    await store.insert(snapshot("today"), b"h")
    await store.close()

    # when only the version row says the file is newer
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE runsgate_meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    db.close()

    # then the next start refuses it
    with pytest.raises(NewerSchemaError):
        await SQLiteSnapshotStore(path).open()


@pytest.mark.mongo
async def test_mongo_stores_opened_at_once_on_a_fresh_database_all_start(mongodb_uri: str) -> None:
    # given several processes' stores starting together on a database without the document
    # (FerretDB applies an upsert as a read then an insert, so two can race on the insert)
    stores = [mongo_store(mongodb_uri) for _ in range(6)]
    try:
        for _ in range(5):
            # when they all record the schema version at once
            await asyncio.gather(*(one.open() for one in stores))
            await asyncio.gather(*(one._raise_schema_version(SCHEMA_VERSION) for one in stores))

            # then none fails, and there is one document of each
            assert await _database_docs(mongodb_uri, "runsgate_meta") == [
                BACKFILLED,
                {"_id": "schema", "version": SCHEMA_VERSION},
            ]
            await stores[0].database["runsgate_meta"].delete_many({})
            for one in stores:
                await one.close()
    finally:
        await stores[0].open()
        await stores[0].drop_all()
        await stores[0].close()
