"""The listing indexes on each MongoDB engine (docs/storage.md "Composite-term listing indexes"):
on DocumentDB (FerretDB 2.5) composite-term ones, which a database made by the version before
gets at its next open, listing the same runs and totals; on FerretDB 1.24 (and mongod) the plain
ones, the option never sent (and refused: the open goes on with the plain ones)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from storage import MongoSnapshotStore, RunFilter, sort_key
from storage.mongo import schema
from storage.mongo.schema import COMPOSITE_LISTING_INDEXES, LISTING_INDEXES, listing_index
from storage.protocol import RunPage
from tests._servers import mongo_store

from ..conftest import kind_uri
from ._contract import T0, snapshot
from ._sent import SENT

pytestmark = pytest.mark.mongo

FILTERS = [
    RunFilter(),
    RunFilter(thread_id="t1"),
    RunFilter(resource_id="r1"),
    RunFilter(thread_id="t1", resource_id="r1"),
    RunFilter(resource_ids=frozenset({"r1", "r2"})),
    RunFilter(thread_id="t2", from_date=T0 + timedelta(minutes=10)),
    RunFilter(expires_before=T0 + timedelta(days=1)),
]
"""Each listing index's filters, a date range and ``expiresBefore`` (no hint)."""


async def _indexes(store: MongoSnapshotStore) -> dict[str, dict[str, object]]:
    found = await (await store.database["run_snapshots"].list_indexes()).to_list()
    return {str(index["name"]): dict(index) for index in found}


async def _listing(store: MongoSnapshotStore) -> list[tuple[list[str], list[str], int]]:
    """Per filter: the first page of 7, the page after it (ids), and the total."""
    seen = []
    for run_filter in FILTERS:
        first = await store.list_runs("refund-agent", run_filter, RunPage(limit=7))
        after = sort_key(first[-1]) if first else None
        second = await store.list_runs("refund-agent", run_filter, RunPage(limit=7, after=after))
        total = await store.count_runs("refund-agent", run_filter)
        seen.append(([d["_id"] for d in first], [d["_id"] for d in second], total))
    return seen


async def _seeded(uri: str) -> MongoSnapshotStore:
    store = mongo_store(uri)
    await store.open()
    runs = [
        (
            snapshot(
                f"run-{i:03d}",
                created=T0 + timedelta(minutes=i // 3),
                thread=("t1", "t2", None)[i % 3],
                resource=("r1", "r2", "r3")[i % 4 % 3],
            ),
            b"[]",
        )
        for i in range(90)
    ]
    await store.insert_many(runs)
    return store


@pytest.mark.parametrize("kind", ["mongo", "ferretdb1"])
async def test_the_listing_indexes_are_composite_term_ones_on_documentdb_alone(
    request: pytest.FixtureRequest, kind: str
) -> None:
    # when a store opens a new database
    store = await _seeded(kind_uri(request, kind))
    try:
        build = await store.database.command("buildInfo")
        indexes = await _indexes(store)
        with SENT.recording() as sent:
            listed = await _listing(store)
    finally:
        await store.drop_all()
        await store.close()

    # then on DocumentDB its listing indexes hold composite terms, under names of their own, and
    # each page names its filter's; elsewhere they are the plain ones and no page names one
    documentdb = isinstance(build.get("ferretdb"), dict)
    composite = {name for name, _ in COMPOSITE_LISTING_INDEXES}
    plain = {name for name, _ in LISTING_INDEXES}
    assert composite <= set(indexes) if documentdb else plain <= set(indexes), indexes
    assert not (plain if documentdb else composite) & set(indexes), indexes
    if documentdb:
        assert all(indexes[name].get("enableCompositeTerm") for name in composite), indexes
    pages = [one for one in sent if one.name == "find" and one.command.get("sort")]
    hints = {str(one.command.get("hint")) for one in pages}
    expected = {str(listing_index(f)) for f in FILTERS} if documentdb else {"None"}
    assert hints == expected, pages
    # and so does a total with dates (counted, no kept count); one with expiresBefore names none
    counts = [one for one in sent if one.name == "aggregate" and one.collection == "run_snapshots"]
    dated = str(listing_index(FILTERS[5])) if documentdb else "None"
    assert [str(one.command.get("hint")) for one in counts] == [dated, "None"], counts
    assert listed[0][2] == 90


async def test_a_database_of_the_version_before_opens_with_composite_terms_and_lists_the_same(
    request: pytest.FixtureRequest,
) -> None:
    # given a DocumentDB database as the version before left it: the plain listing indexes
    store = await _seeded(kind_uri(request, "mongo"))
    try:
        if not store._composite_listing:
            pytest.skip("composite-term listing indexes are DocumentDB's")
        runs = store.database["run_snapshots"]
        for name, _ in COMPOSITE_LISTING_INDEXES:
            await runs.drop_index(name)
        await schema.create_indexes(store.database)
        store._composite_listing = False
        before = await _listing(store)
        assert {name for name, _ in LISTING_INDEXES} <= set(await _indexes(store))

        # when this version opens it
        reopened = mongo_store(store.uri)
        await reopened.open()
        try:
            indexes = await _indexes(reopened)
            after = await _listing(reopened)
        finally:
            await reopened.close()
    finally:
        await store.drop_all()
        await store.close()

    # then the plain listing indexes gave way to composite-term ones, and the pages and totals are the same
    assert {name for name, _ in COMPOSITE_LISTING_INDEXES} <= set(indexes), indexes
    assert not {name for name, _ in LISTING_INDEXES} & set(indexes), indexes
    assert after == before


async def test_a_server_refusing_composite_terms_gets_the_plain_listing_indexes(
    request: pytest.FixtureRequest,
) -> None:
    # given FerretDB 1.24, which refuses any storageEngine option (code 238, NotImplemented)
    store = await _seeded(kind_uri(request, "ferretdb1"))
    try:
        # when the indexes are made asking for composite terms (as on DocumentDB)
        composite = await schema.create_indexes(store.database, composite_terms=True)
        indexes = await _indexes(store)
        listed = await _listing(store)
    finally:
        await store.drop_all()
        await store.close()

    # then the open goes on with the plain listing indexes, and the pages read them
    assert composite is False
    assert {name for name, _ in LISTING_INDEXES} <= set(indexes), indexes
    assert not {name for name, _ in COMPOSITE_LISTING_INDEXES} & set(indexes), indexes
    assert listed[0][2] == 90
