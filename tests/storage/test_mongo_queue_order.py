"""A page of the reviewers' queue on MongoDB reads one range of one index in queue order
(``queueAt``, docs/storage.md "Windows instead"): the runs with a deadline and those without one
in the same read, on DocumentDB (FerretDB 2.5) and FerretDB 1.24 alike; a database written before
``queueAt`` gets it once (backfill 5) and lists the same queue."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from bson import json_util
from pymongo import AsyncMongoClient

from storage import SCHEMA_VERSION, MongoSnapshotStore, QueueFilter, QueueKey, SnapshotDocument, queue_key
from storage.mongo import schema
from storage.mongo.mapping import queue_at
from tests._servers import mongo_store

from ..conftest import MONGO_SERVERS, kind_uri, open_store
from ._contract import T0, snapshot, tool_call
from ._sent import SENT

pytestmark = pytest.mark.mongo


def _run(number: int, deadline: timedelta | None) -> SnapshotDocument:
    call = tool_call("c1")
    if deadline is not None:
        call["expiresAt"] = T0 + deadline
    return snapshot(f"run-{number:02d}", created=T0 + timedelta(seconds=number), calls=[call])


@pytest.fixture(params=list(MONGO_SERVERS))
async def store(request: pytest.FixtureRequest) -> AsyncIterator[MongoSnapshotStore]:
    """A fresh store (no window learnt) holding 5 runs with a deadline and 30 without."""
    async with open_store(request, request.param) as opened:
        assert isinstance(opened, MongoSnapshotStore)
        runs = [_run(i, timedelta(hours=5 - i) if i < 5 else None) for i in range(35)]
        await opened.insert_many([(doc, b"[]") for doc in runs])
        yield opened


async def test_a_page_across_the_runs_with_and_without_a_deadline_is_one_read(store: MongoSnapshotStore) -> None:
    # when a fresh store reads the first page of 20, then the page after the third run
    with SENT.recording() as sent:
        first = await store.list_review_runs(QueueFilter(), limit=20)
        after = await store.list_review_runs(QueueFilter(), limit=20, after=queue_key(first[2]))
    reads = [one for one in sent if one.collection == "run_snapshots" and one.name == "find"]

    # then each page is in queue order (earliest deadline first, then the oldest without one)
    order = [f"run-{i:02d}" for i in (4, 3, 2, 1, 0, *range(5, 35))]
    assert [doc["_id"] for doc in first] == order[:20]
    assert [doc["_id"] for doc in after] == order[3:23]
    # and each is one read of one range (no window known yet: a read without one)
    assert len(reads) == 2, reads


V5_DATA = Path(__file__).resolve().parent.parent / "data" / "v5-mongo-before-queue-counts"


def _waiting_in_order(raw: list[dict[str, Any]]) -> list[str]:
    """The runs a queue of every agent lists, in queue order (``QueueKey``), from the stored documents."""
    waiting = [
        doc
        for doc in raw
        if doc["status"] == "suspended"
        and doc["pendingCount"] > 0
        and not any(event["type"] == "completed" for event in doc.get("pendingEvents") or [])
    ]
    keys = [QueueKey(doc.get("expiresAt"), doc["suspendedAt"], doc["_id"]) for doc in waiting]
    return [key.run_id for key in sorted(keys, key=QueueKey.order)]


async def _indexes(store: MongoSnapshotStore) -> set[str]:
    """The queue's indexes of ``store``'s runs: today's, and those of older versions."""
    found = {index["name"] for index in await (await store.database[schema.RUNS].list_indexes()).to_list()}
    return found & {schema.REVIEW_QUEUE_INDEX, *schema.RETIRED_QUEUE_INDEXES}


async def _walk(store: MongoSnapshotStore, limit: int) -> list[str]:
    walked: list[str] = []
    after = None
    while found := await store.list_review_runs(QueueFilter(), limit=limit, after=after):
        walked += [doc["_id"] for doc in found]
        after = queue_key(found[-1])
    return walked


@pytest.mark.parametrize("kind", list(MONGO_SERVERS))
async def test_a_database_written_before_queue_places_lists_its_queue_in_order_after_the_upgrade(
    request: pytest.FixtureRequest, kind: str
) -> None:
    # given a database of schema version 5 (tests/data/v5-mongo-before-queue-counts: no queueAt)
    uri = kind_uri(request, kind)
    client: AsyncMongoClient[Any] = AsyncMongoClient(uri, tz_aware=True)
    for name, docs in json_util.loads((V5_DATA / "mongo.json").read_text()).items():
        if docs:
            await client.get_default_database()[name].insert_many(docs)
    await client.close()
    store = mongo_store(uri)
    await store.open()
    try:
        runs = store.database[schema.RUNS]
        # when it is opened: backfill 5 places every run in the queue, the schema version is 7 (a
        # runsgate of 6 would not write queueAt, so it must refuse the database)
        meta = {doc["_id"]: doc["version"] for doc in await store.database[schema.META].find({}).to_list()}
        assert meta == {"schema": SCHEMA_VERSION, "backfill": schema.BACKFILL_VERSION} == {"schema": 7, "backfill": 5}
        raw = await runs.find({}).to_list()
        assert raw
        for doc in raw:
            assert doc["queueAt"] == queue_at(doc.get("expiresAt"), doc["suspendedAt"], doc["pendingCount"]), doc
        assert await _indexes(store) == {schema.REVIEW_QUEUE_INDEX}

        # then the queue lists its runs in queue order, whole and walked by cursors
        expected = _waiting_in_order(raw)
        assert len(expected) > 3
        assert [doc["_id"] for doc in await store.list_review_runs(QueueFilter(), limit=1000)] == expected
        assert await _walk(store, 3) == expected

        # and a database of backfill 4 (schema version 6, its queue's counts kept) is only placed:
        # its counts stay as they are (a runsgate of 6 wrote them and the old index)
        await runs.update_many({}, {"$unset": {"queueAt": ""}})
        await runs.create_index([("expiresAt", 1), ("suspendedAt", 1), ("_id", 1)], name="review_queue")
        # (and the queue's index of a runsgate of 7 before the filters' fields: dropped at the open too)
        await runs.create_index(schema.REVIEW_QUEUE_ORDER, name="review_queue_at")
        assert await _indexes(store) == {schema.REVIEW_QUEUE_INDEX, *schema.RETIRED_QUEUE_INDEXES}
        await store.database[schema.META].update_one({"_id": "backfill"}, {"$set": {"version": 4}})
        await store.database[schema.COUNTS].insert_one({"_id": "left by version 6", "n": 1})
    finally:
        await store.close()
    again = mongo_store(uri)
    await again.open()
    try:
        assert await again.database[schema.COUNTS].find_one({"_id": "left by version 6"}) is not None
        assert await _walk(again, 4) == expected
        assert await again.database[schema.RUNS].count_documents({"queueAt": {"$exists": False}}) == 0
        assert (await again.database[schema.META].find_one({"_id": "backfill"}) or {}).get("version") == 5
        assert await _indexes(again) == {schema.REVIEW_QUEUE_INDEX}
    finally:
        await again.drop_all()
        await again.close()


def test_a_run_whose_times_are_no_dates_is_placed_last_in_the_queue() -> None:
    # given a run stored by hand or by an older version with times that are no dates
    last = queue_at(None, T0, 1)
    assert last is not None
    # then it still has a place, after every run whose times are dates: it stays listed
    placed = [queue_at(None, "yesterday", 1), queue_at("soon", "yesterday", 1), queue_at(7, T0, 1)]  # type: ignore[arg-type]
    assert all(place is not None and place > last for place in placed), placed
    assert queue_at("soon", T0, 0) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", list(MONGO_SERVERS))
async def test_a_database_holding_a_run_whose_time_is_no_date_opens_and_places_it_last(
    request: pytest.FixtureRequest, kind: str
) -> None:
    # given a database of schema version 5 with one more waiting run, without a deadline, whose
    # suspendedAt is text
    uri = kind_uri(request, kind)
    client: AsyncMongoClient[Any] = AsyncMongoClient(uri, tz_aware=True)
    for name, docs in json_util.loads((V5_DATA / "mongo.json").read_text()).items():
        if name == schema.RUNS and docs:
            docs.append(
                {**docs[0], "_id": "odd-time", "suspendedAt": "yesterday", "pendingCount": 1, "expiresAt": None}
            )
        if docs:
            await client.get_default_database()[name].insert_many(docs)
    await client.close()
    store = mongo_store(uri)
    # when it is opened (backfill 5)
    await store.open()
    try:
        # then every run is placed, the odd one last in the queue
        runs = store.database[schema.RUNS]
        assert await runs.count_documents({"queueAt": {"$exists": False}}) == 0
        places = {doc["_id"]: doc["queueAt"] for doc in await runs.find({"pendingCount": {"$gt": 0}}).to_list()}
        assert places["odd-time"] == max(places.values()), places
    finally:
        await store.drop_all()
        await store.close()
