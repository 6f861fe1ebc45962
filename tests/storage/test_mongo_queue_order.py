"""A page of the reviewers' queue on MongoDB reads one range of one index in queue order
(``queueAt``, docs/storage.md "Windows instead"): the runs with a deadline and those without one
in the same read, on DocumentDB (FerretDB 2.5) and FerretDB 1.24 alike."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from storage import MongoSnapshotStore, QueueFilter, SnapshotDocument, queue_key

from ..conftest import MONGO_SERVERS, open_store
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


@pytest.mark.xfail(strict=True, reason="a queue page reads the runs with a deadline, then those without")
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
