"""A page is one round trip: the MongoDB store reads a listing page (and every other limited
read) in the first batch of its ``find``, with no ``getMore``, whatever the page size up to
``RUNSGATE_MAX_PAGE_SIZE``; on DocumentDB a second batch cost about 30 ms more
(docs/storage.md "What a page costs"). The batch is a single one (``singleBatch``): a limited
``find`` without it makes FerretDB 2.5 close the PostgreSQL connection it read on, which the
next command pays for. A page of runs bigger than one reply (16 MiB) still comes whole. Shown
through PyMongo's command monitoring, on both MongoDB test servers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from pymongo import monitoring

from storage import MongoSnapshotStore, RunFilter, sort_key
from storage.mongo import LISTING_ORDER, mapping
from storage.protocol import EventsAfter, RunPage

from ..conftest import open_store
from ._contract import T0, feed_event, snapshot, tool_call

pytestmark = pytest.mark.mongo

RUNS = 260
"""More than the 101 documents a first batch holds by default, and than a page of 250 asks for."""


class Names(monitoring.CommandListener):
    """The names of the commands sent while ``recording()`` runs, and the ``find`` commands themselves."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.finds: list[dict[str, Any]] = []
        self._on = False

    @contextmanager
    def recording(self) -> Iterator[list[str]]:
        self.names = []
        self.finds = []
        self._on = True
        try:
            yield self.names
        finally:
            self._on = False

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if self._on:
            self.names.append(event.command_name)
            if event.command_name == "find":
                self.finds.append(dict(event.command))

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


def _left_open(find: dict[str, Any]) -> bool:
    """Whether DocumentDB serves ``find`` from a persisted cursor (a sort, a limit or a skip)
    that is not a single batch: FerretDB 2.5 then takes the PostgreSQL connection out of its pool
    and closes it once the cursor is read to its end."""
    return any(key in find for key in ("sort", "limit", "skip")) and find.get("singleBatch") is not True


async def test_no_limited_read_leaves_a_persisted_cursor(mongo: MongoSnapshotStore) -> None:
    later = T0 + timedelta(days=1)
    with NAMES.recording():
        first = await mongo.list_runs("refund-agent", RunFilter(), RunPage(limit=21))
        await mongo.list_runs("refund-agent", RunFilter(), RunPage(limit=21, after=sort_key(first[5])))
        await mongo.list_runs("refund-agent", RunFilter(thread_id="t1"), RunPage(limit=21, from_end=True))
        await mongo.list_runs("refund-agent", RunFilter(), RunPage(limit=21, skip=40))
        await mongo.list_events_after(EventsAfter(agent_id="refund-agent", after_event_id=None, limit=20))
        await mongo.get_many([f"run-{i:03d}" for i in range(30)])
        await mongo.list_stalled_runs(now=later, idle_before=later, limit=20)
        await mongo.list_expired_runs(now=later, limit=20)
        finds = NAMES.finds

    assert len(finds) >= 8
    assert [find for find in finds if _left_open(find)] == []


BIG = 1024 * 1024
"""Bytes of one big run's arguments: 20 of them (and the page's one more) pass a 16 MiB reply."""


async def test_a_page_bigger_than_one_reply_comes_whole(
    mongo: MongoSnapshotStore, request: pytest.FixtureRequest
) -> None:
    # given 30 runs of a thread of their own whose arguments hold 1 MiB each
    big = [
        snapshot(f"big-{i:02d}", created=T0 - timedelta(days=1, seconds=i), thread="big", calls=[tool_call("c1")])
        for i in range(30)
    ]
    for run in big:
        run["toolCalls"][0]["args"] = {"note": "x" * BIG}
    await mongo.insert_many([(run, b"[]") for run in big])

    # when a page of 21 and the page of the last 10 are read
    with NAMES.recording() as sent:
        page = await mongo.list_runs("refund-agent", RunFilter(thread_id="big"), RunPage(limit=21))
    rest = await mongo.list_runs("refund-agent", RunFilter(thread_id="big"), RunPage(limit=21, skip=20))

    # then each holds every run it asked for, in order, though no reply holds more than 16 MiB
    assert [run["_id"] for run in page] == [f"big-{i:02d}" for i in range(21)]
    assert [run["_id"] for run in rest] == [f"big-{i:02d}" for i in range(20, 30)]
    if request.node.callspec.params["mongo"] == "mongo":  # DocumentDB cut the first reply (FerretDB 1.24 does not)
        assert sent.count("find") >= 2


async def test_a_run_written_between_a_short_page_and_its_check_repeats_none(
    mongo: MongoSnapshotStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a thread of three runs, read newest first in a page of 20: short, so checked by a
    # second read from its last run; a newer run of the thread is written between the two reads
    three = [snapshot(f"few-{i}", created=T0 + timedelta(days=2, seconds=i), thread="few") for i in range(3)]
    await mongo.insert_many([(run, b"[]") for run in three])
    newer = snapshot("few-new", created=T0 + timedelta(days=3), thread="few")
    reads: list[int] = []
    paged = mapping.page

    def page(cursor: Any, limit: int) -> Any:
        reads.append(limit)
        return paged(cursor, limit)

    async def written_between(cursor: Any) -> list[dict[str, Any]]:
        docs = await cursor.to_list()
        if len(reads) == 1:
            await mongo.insert_many([(newer, b"[]")])
        return docs

    monkeypatch.setattr(mapping, "page", lambda cursor, limit: Read(page(cursor, limit), written_between))
    found = await mapping.read_page(mongo._runs.find({"threadId": "few"}).sort([("createdAt", -1)]), 20)

    # then the page holds each run once (the newer one too, or not: it was written meanwhile)
    ids = [doc["_id"] for doc in found]
    assert len(ids) == len(set(ids)), ids
    assert {"few-0", "few-1", "few-2"} <= set(ids), ids


async def test_a_run_deleted_between_a_cut_reply_and_the_next_read_leaves_no_other_out(
    mongo: MongoSnapshotStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given six runs of a thread read in listing order in a page of 6, whose first reply is cut
    # after three (as the server cuts one at 16 MiB); the second of those three is deleted
    # before the next read
    six = [snapshot(f"cut-{i}", created=T0 + timedelta(days=4, seconds=i), thread="cut") for i in range(6)]
    await mongo.insert_many([(run, b"[]") for run in six])
    replies: list[list[str]] = []
    paged = mapping.page

    async def cut_then_deleted(cursor: Any) -> list[dict[str, Any]]:
        docs = await cursor.to_list()
        if not replies:
            docs = docs[:3]
            await mongo._runs.delete_one({"_id": docs[1]["_id"]})
        replies.append([doc["_id"] for doc in docs])
        return docs

    monkeypatch.setattr(mapping, "page", lambda cursor, limit: Read(paged(cursor, limit), cut_then_deleted))
    found = await mapping.read_page(mongo._runs.find({"threadId": "cut"}).sort(LISTING_ORDER), 6)

    # then every run still there is in the page, once and in order (the deleted one as read, or not)
    ids = [doc["_id"] for doc in found]
    assert replies[0] == ["cut-5", "cut-4", "cut-3"]
    assert [i for i in ids if i != "cut-4"] == ["cut-5", "cut-3", "cut-2", "cut-1", "cut-0"], (ids, replies)


class Read:
    """A cursor whose ``to_list`` goes through ``read`` (the test's write between two reads)."""

    def __init__(self, cursor: Any, read: Any) -> None:
        self._cursor, self._read = cursor, read

    async def to_list(self) -> list[dict[str, Any]]:
        return await self._read(self._cursor)
