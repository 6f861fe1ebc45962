"""Windowed pages on DocumentDB (``storage/mongo/windows.py``) list what pages read without a window
list: every page of a walk from the start, from the end, and ``hasPreviousPage``'s one-run read,
over runs whose gaps range from none to days, through a store that reads windows and one that
does not, on the same database."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from storage import MongoSnapshotStore, RunFilter, sort_key
from storage.protocol import RunPage
from tests._servers import mongo_store

from ..conftest import open_store
from ._contract import T0, snapshot

pytestmark = pytest.mark.mongo

FILTERS = [RunFilter(), RunFilter(thread_id="t1"), RunFilter(thread_id="t2", resource_id="r1")]


@pytest.fixture
async def stores(request: pytest.FixtureRequest) -> AsyncIterator[tuple[MongoSnapshotStore, MongoSnapshotStore]]:
    async with open_store(request, "mongo") as windowed:
        assert isinstance(windowed, MongoSnapshotStore)
        if not windowed._windowed_pages:
            pytest.skip("windows are read on DocumentDB only")
        rng = random.Random(44)
        created, runs = T0, []
        for i in range(150):
            created += timedelta(seconds=rng.choice([0, 0, 1, 30, 3600, 5 * 86400]))
            run = snapshot(f"run-{i:03d}", created=created, thread=rng.choice(["t1", "t2", None]), resource="r1")
            runs.append((run, b"[]"))
        await windowed.insert_many(runs)
        plain = mongo_store(windowed.uri)
        await plain.open()
        plain._windowed_pages = False
        try:
            yield windowed, plain
        finally:
            await plain.close()


def ids(docs: list[object]) -> list[str]:
    return [doc["_id"] for doc in docs]  # type: ignore[index]


@pytest.mark.parametrize("limit", [2, 7, 21])
async def test_windowed_pages_list_what_pages_without_windows_list(
    stores: tuple[MongoSnapshotStore, MongoSnapshotStore], limit: int
) -> None:
    windowed, plain = stores
    for run_filter in FILTERS:

        async def both(window: RunPage, run_filter: RunFilter = run_filter) -> list[object]:
            page = await windowed.list_runs("refund-agent", run_filter, window)
            expected = await plain.list_runs("refund-agent", run_filter, window)
            assert ids(page) == ids(expected), (run_filter, window)
            return page  # type: ignore[return-value]

        for _ in range(2):  # a first walk teaches the windows, the second uses them
            page = await both(RunPage(limit=limit))
            while page:
                bound = sort_key(page[-1])  # type: ignore[arg-type]
                await both(RunPage(limit=1, before=bound))  # hasPreviousPage's read
                page = await both(RunPage(limit=limit, after=bound))
            page = await both(RunPage(limit=limit, from_end=True))
            while page:
                page = await both(RunPage(limit=limit, before=sort_key(page[0]), from_end=True))  # type: ignore[arg-type]
