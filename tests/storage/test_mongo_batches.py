"""A page is one round trip: the MongoDB store reads a listing page (and every other limited
read) in the first batch of its ``find``, with no ``getMore``, whatever the page size up to
``RUNSGATE_MAX_PAGE_SIZE``; on DocumentDB a second batch cost about 30 ms more
(docs/storage.md "What a page costs"). Shown through PyMongo's command monitoring, on both
MongoDB test servers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
from pymongo import monitoring

from storage import MongoSnapshotStore, RunFilter, sort_key
from storage.protocol import EventsAfter, RunPage

from ..conftest import open_store
from ._contract import T0, feed_event, snapshot

pytestmark = pytest.mark.mongo

RUNS = 260
"""More than the 101 documents a first batch holds by default, and than a page of 250 asks for."""


class Names(monitoring.CommandListener):
    """The names of the commands sent while ``recording()`` runs."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._on = False

    @contextmanager
    def recording(self) -> Iterator[list[str]]:
        self.names = []
        self._on = True
        try:
            yield self.names
        finally:
            self._on = False

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if self._on:
            self.names.append(event.command_name)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


NAMES = Names()
monitoring.register(NAMES)


@pytest.fixture(params=["mongo", "ferretdb1"])
async def mongo(request: pytest.FixtureRequest) -> AsyncIterator[MongoSnapshotStore]:
    async with open_store(request, request.param) as store:
        assert isinstance(store, MongoSnapshotStore)
        # every other run has no pending call left: the sweeper finds it stalled
        await store.insert_many(
            [
                (snapshot(f"run-{i:03d}", created=T0 + timedelta(seconds=i), calls=None if i % 2 else []), b"[]")
                for i in range(RUNS)
            ]
        )
        for i in range(RUNS):
            await store.append_event(feed_event(f"{i:020d}-000000000000", run_id=f"run-{i:03d}"))
        yield store


@pytest.mark.parametrize("size", [20, 101, 250])
async def test_a_listing_page_is_one_find_without_get_more(mongo: MongoSnapshotStore, size: int) -> None:
    # when a page of `size` runs (and one more, as the API asks, to know whether another page follows)
    # is read from the start, after a cursor, and from the end
    with NAMES.recording() as sent:
        first = await mongo.list_runs("refund-agent", RunFilter(), RunPage(limit=size + 1))
        after = await mongo.list_runs("refund-agent", RunFilter(), RunPage(limit=size + 1, after=sort_key(first[5])))
        last = await mongo.list_runs("refund-agent", RunFilter(), RunPage(limit=size + 1, from_end=True))

    # then each came whole in the first batch of one find
    assert [len(first), len(after), len(last)] == [size + 1] * 3
    assert sent == ["find", "find", "find"]


async def test_the_other_limited_reads_are_one_find_each(mongo: MongoSnapshotStore) -> None:
    later = T0 + timedelta(days=1)
    with NAMES.recording() as sent:
        events = await mongo.list_events_after(EventsAfter(agent_id="refund-agent", after_event_id=None, limit=250))
        many = await mongo.get_many([f"run-{i:03d}" for i in range(RUNS)])
        stalled = await mongo.list_stalled_runs(now=later, idle_before=later, limit=250)

    assert (len(events), len(many), len(stalled)) == (250, RUNS, RUNS // 2)
    assert "getMore" not in sent, sent
