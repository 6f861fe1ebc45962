"""``LiveQueue`` reads an event's run once for all the watches of an instance: watches taking one
event share one read, a watch further behind than the kept reads reads again, and a failed read
is not kept (docs/api.md "The reviewers' queue, live"). On the memory store, its reads counted."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from runtime import AgentRegistry, Principal, RunManager
from runtime.access import ALL_SCOPES
from runtime.reviewing.live import LiveQueue
from runtime.reviewing.queue import QueueQuery
from storage import EventDocument, MemorySnapshotStore, SnapshotDocument, StoreUnavailableError
from storage.protocol import EventsAfter

X = Principal(name="x", scopes=ALL_SCOPES, credential="key")


class CountingStore(MemorySnapshotStore):
    """The memory store, recording each ``get_many``; ``failing`` of them fail first."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[list[str]] = []
        self.failing = 0

    async def get_many(self, run_ids: Sequence[str]) -> list[SnapshotDocument]:
        self.reads.append(list(run_ids))
        if self.failing:
            self.failing -= 1
            raise StoreUnavailableError("the store is down (test)")
        return await super().get_many(run_ids)


async def _suspended(
    store: CountingStore, registry: AgentRegistry, count: int
) -> tuple[RunManager, list[EventDocument]]:
    manager = RunManager(store, registry, instance_id="a")
    for _ in range(count):
        assert (await manager.start_run("refund-agent", "Please refund order 1042")).status == "suspended"
    events = await store.list_events_after(EventsAfter(agent_id=None, after_event_id="0", limit=100))
    store.reads.clear()
    return manager, [event for event in events if event["type"] == "suspended"]


async def test_watches_taking_one_event_share_one_read(registry: AgentRegistry) -> None:
    store = CountingStore()
    await store.open()
    manager, [event] = await _suspended(store, registry, 1)
    live = LiveQueue(manager.review_queue)
    watches = [live.watch(X, QueueQuery()) for _ in range(3)]
    changes = [await watch.changes(event) for watch in watches]
    assert [[change.kind for change in found] for found in changes] == [["entered"]] * 3
    assert store.reads == [[event["runId"]]]


async def test_a_watch_behind_the_kept_reads_reads_again(registry: AgentRegistry) -> None:
    store = CountingStore()
    await store.open()
    manager, events = await _suspended(store, registry, 3)
    live = LiveQueue(manager.review_queue, kept=2)
    ahead, behind = live.watch(X, QueueQuery()), live.watch(X, QueueQuery())
    for event in events:
        await ahead.changes(event)
    for event in events:
        await behind.changes(event)
    # the first event's read was let go when the third was kept: read again, the others shared
    assert store.reads == [[event["runId"]] for event in [*events, events[0]]]
    # and that straggler's read displaced none of the reads kept for those ahead
    late = live.watch(X, QueueQuery())
    for event in events[1:]:
        await late.changes(event)
    assert len(store.reads) == 4


async def test_a_failed_read_is_not_kept(registry: AgentRegistry) -> None:
    store = CountingStore()
    await store.open()
    manager, [event] = await _suspended(store, registry, 1)
    live = LiveQueue(manager.review_queue)
    store.failing = 1
    with pytest.raises(StoreUnavailableError):
        await live.watch(X, QueueQuery()).changes(event)
    assert [change.kind for change in await live.watch(X, QueueQuery()).changes(event)] == ["entered"]
    assert len(store.reads) == 2


def test_at_least_one_read_is_kept(registry: AgentRegistry) -> None:
    with pytest.raises(ValueError, match="kept"):
        LiveQueue(RunManager(MemorySnapshotStore(), registry, instance_id="a").review_queue, kept=0)
