"""``EventFeed``: the event log followed by polling, fanned out to subscribers (docs/api.md
"Subscriptions"), on both stores. Events are appended straight to the store, as the runtime's
journal does, with ids made like its ``event_id`` (UTC nanoseconds, then random hex)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncGenerator
from datetime import UTC, datetime
from typing import Any

import pytest

from runtime import EventFeed, EventFeedClosedError, EventFeedOverflowError
from storage import EventDocument, MemorySnapshotStore, SnapshotStore
from storage.protocol import EventsAfter

from .._processes import scaled

AGENT = "refund-agent"
WAIT = scaled(30.0)
"""Seconds to wait for an expected event before failing: a liveness bound, not a speed check."""


def make_id(ns: int | None = None) -> str:
    return f"{time.time_ns() if ns is None else ns:020d}-{uuid.uuid4().hex[:12]}"


async def append(
    store: SnapshotStore, event_id: str | None = None, *, agent_id: str = AGENT, data: dict[str, object] | None = None
) -> str:
    event: EventDocument = {
        "_id": event_id or make_id(),
        "runId": "run",
        "agentId": agent_id,
        "threadId": None,
        "resourceId": None,
        "type": "started",
        "at": datetime.now(UTC),
        "by": None,
        "data": data or {},
    }
    await store.append_event(event)
    return event["_id"]


async def next_id(stream: AsyncGenerator[EventDocument, None]) -> str:
    event = await asyncio.wait_for(anext(stream), WAIT)
    return event["_id"]


async def registered(feed: EventFeed, expected: dict[str, int]) -> None:
    """Wait until the subscribers' generators ran their first step (registration)."""
    for _ in range(3000):
        if feed.polled_agents == expected:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"polled agents {feed.polled_agents}, expected {expected}")


@pytest.fixture
async def feed(store: SnapshotStore) -> AsyncGenerator[EventFeed, None]:
    events = EventFeed(store, poll_interval=0.05, lookback=60.0)
    yield events
    await events.close()


async def test_subscribers_of_one_agent_share_one_poller_and_each_get_every_event(
    store: SnapshotStore, feed: EventFeed
) -> None:
    first, second = feed.subscribe(AGENT), feed.subscribe(AGENT)
    other = feed.subscribe("weather-agent")
    waiting = [asyncio.ensure_future(next_id(s)) for s in (first, second, other)]
    await registered(feed, {AGENT: 2, "weather-agent": 1})

    sent = await append(store)
    received = await asyncio.gather(*waiting[:2])
    then = await append(store)
    again = [await next_id(first), await next_id(second)]
    weather = await append(store, agent_id="weather-agent")

    assert received == [sent, sent]
    assert again == [then, then]
    assert await waiting[2] == weather
    await first.aclose()
    assert feed.polled_agents == {AGENT: 1, "weather-agent": 1}
    await second.aclose()
    await other.aclose()
    assert feed.polled_agents == {}


async def test_a_subscription_starts_now(store: SnapshotStore, feed: EventFeed) -> None:
    await append(store)
    stream = feed.subscribe(AGENT)
    waiting = asyncio.ensure_future(next_id(stream))
    await registered(feed, {AGENT: 1})

    sent = await append(store)

    assert await waiting == sent
    await stream.aclose()


async def test_an_event_that_becomes_visible_late_is_delivered_once(store: SnapshotStore, feed: EventFeed) -> None:
    stream = feed.subscribe(AGENT)
    waiting = asyncio.ensure_future(next_id(stream))
    await registered(feed, {AGENT: 1})
    subscribed_ns = time.time_ns()

    later = await append(store)
    assert await waiting == later
    # created before `later` (another instance's slow insert), visible only now
    earlier = await append(store, make_id(subscribed_ns))
    assert earlier < later
    assert await next_id(stream) == earlier
    # the next polls read both again (lookback) without delivering them twice
    last = await append(store)
    assert await next_id(stream) == last
    await stream.aclose()


async def test_resuming_after_an_event_reads_the_log_then_follows_it_without_repeats(
    store: SnapshotStore, feed: EventFeed
) -> None:
    first = await append(store)
    backlog = [await append(store), await append(store)]
    stream = feed.subscribe(AGENT, after_event_id=first)

    caught_up = [await next_id(stream), await next_id(stream)]
    live = await append(store)

    assert caught_up == backlog
    assert await next_id(stream) == live
    await stream.aclose()


async def test_the_accept_predicate_filters_events(store: SnapshotStore, feed: EventFeed) -> None:
    wanted: set[str] = set()
    stream = feed.subscribe(AGENT, accept=lambda e: e["_id"] in wanted)
    waiting = asyncio.ensure_future(next_id(stream))
    await registered(feed, {AGENT: 1})

    await append(store)
    kept = make_id()
    wanted.add(kept)
    await append(store, kept)

    assert await waiting == kept
    await stream.aclose()


async def test_a_subscriber_too_far_behind_is_dropped(store: SnapshotStore) -> None:
    # five events already in the log, with ids a minute ahead (so after the subscriber's start):
    # the first poll reads them all at once, however long each append took
    sent = [make_id(time.time_ns() + 60_000_000_000 + i) for i in range(5)]
    for event_id in sent:
        await append(store, event_id)
    feed = EventFeed(store, poll_interval=0.05, max_queued=2)
    stream = feed.subscribe(AGENT)
    waiting = asyncio.ensure_future(next_id(stream))

    first = await waiting
    assert first == sent[0]
    assert await next_id(stream) == sent[1]
    with pytest.raises(EventFeedOverflowError):
        await next_id(stream)
    assert feed.polled_agents == {}
    await feed.close()


async def test_a_subscriber_behind_by_more_bytes_than_its_budget_is_dropped_however_few_the_events(
    store: SnapshotStore,
) -> None:
    # the default budget (8 MiB of queued events), far fewer events than the count bound (10,000)
    feed = EventFeed(store, poll_interval=0.05)
    try:
        stream = feed.subscribe(AGENT)
        waiting = asyncio.ensure_future(next_id(stream))
        await registered(feed, {AGENT: 1})
        sent = [make_id(time.time_ns() + i) for i in range(12)]
        for event_id in sent:  # 12 events of 1 MiB each arrive while the subscriber does not read
            await append(store, event_id, data={"blob": "x" * (1 << 20)})
        for _ in range(300):  # until the feed has read them all and let the subscriber go
            if feed.polled_agents.get(AGENT) == 0:
                break
            await asyncio.sleep(0.1)

        received, overflow = [await waiting], None
        while len(received) < len(sent):
            try:
                received.append(await next_id(stream))
            except EventFeedOverflowError as exc:
                overflow = exc
                break
    finally:
        await feed.close()

    assert overflow is not None, f"{len(received)} events of 1 MiB waited without the subscriber being dropped"
    assert "bytes" in str(overflow)
    assert received == sent[: len(received)]
    assert len(received) <= 9


async def test_closing_the_feed_ends_every_subscription(store: SnapshotStore) -> None:
    feed = EventFeed(store, poll_interval=0.05)
    stream = feed.subscribe(AGENT)
    waiting = asyncio.ensure_future(next_id(stream))
    await registered(feed, {AGENT: 1})

    await feed.close()

    with pytest.raises(EventFeedClosedError):
        await waiting
    with pytest.raises(EventFeedClosedError):
        await anext(feed.subscribe(AGENT))


def test_settings_out_of_range_are_refused(store: SnapshotStore) -> None:
    with pytest.raises(ValueError, match="poll_interval"):
        EventFeed(store, poll_interval=0)


class _CancelSwallowingLog(MemorySnapshotStore):
    """Reads the log as PyMongo's async driver opens a connection on Python 3.11: through
    ``asyncio.wait_for``, which returns the result and drops the caller's ``CancelledError`` when
    the cancel arrives as the awaited operation completes (CPython gh-86296). The poller is
    cancelled at exactly that moment once (``cancel_poller``)."""

    cancel_poller = False

    async def list_events_after(self, query: EventsAfter) -> list[EventDocument]:
        caller = asyncio.current_task()
        assert caller is not None

        async def read() -> list[EventDocument]:
            found = await MemorySnapshotStore.list_events_after(self, query)
            if self.cancel_poller and caller.get_name().startswith("runsgate-event-feed"):
                self.cancel_poller = False
                caller.cancel()  # lands while wait_for waits, with the read already done
            return found

        return await asyncio.wait_for(read(), timeout=30)


async def test_a_poller_whose_cancel_was_swallowed_by_the_store_still_stops() -> None:
    # given a subscriber, and a poller whose cancel the store's read swallows
    store = _CancelSwallowingLog()
    await store.open()
    feed = EventFeed(store, poll_interval=0.01, lookback=1.0)
    stream = feed.subscribe(AGENT)
    reading = asyncio.create_task(anext(stream))
    await registered(feed, {AGENT: 1})
    [poller] = feed._pollers.values()
    store.cancel_poller = True

    # when / then: the poller ends, and closing the feed does not wait forever
    await asyncio.wait_for(asyncio.wait([poller.task]), 5)  # type: ignore[list-item]
    await asyncio.wait_for(feed.close(), 5)
    with pytest.raises(EventFeedClosedError):
        await reading


# -- what a subscriber that does not read holds (issue 42, instance 3) -------------------------------
BEFORE_ALL = "0" * 20 + "-" + "0" * 12
"""An event id before every event: a replay of the whole log."""
PROMPT = "x" * 32 * 1024


class _ReadBytes(MemorySnapshotStore):
    """A memory store that counts the bytes (``event_size``) of the events its pages returned (the
    poller's read none: the log is older than its lookback)."""

    returned = 0

    async def list_events_after(self, query: EventsAfter) -> list[EventDocument]:
        from runtime.events.feed import event_size

        page = await super().list_events_after(query)
        self.returned += sum(event_size(e) for e in page)
        return page


async def _log_of(store: SnapshotStore, count: int, *, data: dict[str, object]) -> list[str]:
    base = time.time_ns() - 3_600_000_000_000  # an hour old: before every poll's lookback
    ids = [make_id(base + n) for n in range(count)]
    for event_id in ids:
        await append(store, event_id, data=data)
    return ids


async def test_a_replaying_subscriber_that_does_not_read_holds_at_most_a_page_of_bytes() -> None:
    from runtime.events.feed import REPLAY_PAGE_BYTES, event_size

    store = _ReadBytes()
    await store.open()
    ids = await _log_of(store, 600, data={"prompt": PROMPT})
    feed = EventFeed(store, poll_interval=60.0)
    stream = feed.subscribe(AGENT, after_event_id=BEFORE_ALL)
    try:
        # when the subscriber takes one event, then does not read
        first = await asyncio.wait_for(anext(stream), WAIT)
        held = store.returned - event_size(first)
        # then what the feed read from the store and has not handed out is at most a page of bytes
        assert held <= REPLAY_PAGE_BYTES, held
        # and reading on gives every event once, in order
        rest = [await next_id(stream) for _ in ids[1:]]
    finally:
        await stream.aclose()
        await feed.close()
    assert [first["_id"], *rest] == ids


def _under(budgets: Any, owner: str, limit: int, extra: int) -> None:
    held = budgets.held(owner)
    assert held <= limit + extra, f"{owner} holds {held} bytes, over {limit} + {extra}"


async def test_the_replays_of_one_owner_hold_at_most_its_budget_together_and_not_anothers() -> None:
    from runtime import SubscriptionBudgets
    from runtime.events.feed import event_size

    store = MemorySnapshotStore()
    await store.open()
    ids = await _log_of(store, 120, data={"prompt": PROMPT})
    one_event = event_size(
        (await store.list_events_after(EventsAfter(agent_id=AGENT, after_event_id=None, limit=1)))[0]
    )
    limit = 1 << 20
    budgets = SubscriptionBudgets(replay_bytes=limit)
    feed = EventFeed(store, poll_interval=60.0, budgets=budgets)
    alice = [feed.subscribe(AGENT, after_event_id=BEFORE_ALL, owner="key:alice") for _ in range(10)]
    bob = feed.subscribe(AGENT, after_event_id=BEFORE_ALL, owner="key:bob")
    try:
        # given ten replays of alice that take their first event (or wait for her budget) and stop
        firsts = [asyncio.ensure_future(anext(stream)) for stream in alice]
        for _ in range(50):
            await asyncio.sleep(0.01)
            _under(budgets, "key:alice", limit, 10 * one_event)  # at every moment, whatever the timing
        # then bob, another principal, replays the whole log meanwhile
        assert [await next_id(bob) for _ in ids] == ids
        _under(budgets, "key:alice", limit, 10 * one_event)

        # and alice's replays, read on, each get every event once, in order
        async def rest(stream: AsyncGenerator[EventDocument, None], first: Any) -> list[str]:
            return [(await asyncio.wait_for(first, WAIT))["_id"], *[await next_id(stream) for _ in ids[1:]]]

        received = await asyncio.gather(*(rest(s, f) for s, f in zip(alice, firsts, strict=True)))
        assert received == [ids] * len(alice)
    finally:
        for stream in [*alice, bob]:
            await stream.aclose()
        await feed.close()
    # and once they end, nothing is held for either
    assert budgets.held("key:alice") == budgets.held("key:bob") == 0


async def test_live_events_waiting_for_one_owner_hold_at_most_its_budget(store: SnapshotStore) -> None:
    from runtime import SubscriptionBudgets

    limit = 2 << 20
    budgets = SubscriptionBudgets(queued_bytes=limit)
    feed = EventFeed(store, poll_interval=0.05, budgets=budgets)
    alice = [feed.subscribe(AGENT, owner="key:alice") for _ in range(5)]
    bob = feed.subscribe(AGENT, owner="key:bob")
    waiting = [asyncio.ensure_future(next_id(stream)) for stream in [*alice, bob]]
    try:
        await registered(feed, {AGENT: 6})
        # when 20 events of 64 KiB arrive (6.4 MiB queued for alice's five if none read)
        sent = [make_id(time.time_ns() + n) for n in range(20)]
        for event_id in sent:
            await append(store, event_id, data={"blob": "x" * (64 << 10)})
            _under(budgets, "key:alice", limit, 64 << 10)
        for _ in range(300):  # until the feed read them all
            if feed.polled_agents.get(AGENT, 0) <= 1:
                break
            _under(budgets, "key:alice", limit, 64 << 10)
            await asyncio.sleep(0.05)
        # then alice's subscribers were dropped, resumable, once her budget was used up
        dropped = 0
        for stream, first in zip(alice, waiting, strict=False):
            await first
            try:
                while True:
                    await next_id(stream)
            except EventFeedOverflowError:
                dropped += 1
        assert dropped == 5
        # and bob, within his own budget, got every event
        assert [await waiting[-1], *[await next_id(bob) for _ in sent[1:]]] == sent
    finally:
        for stream in [*alice, bob]:
            await stream.aclose()
        await feed.close()
    assert budgets.held("key:alice") == budgets.held("key:bob") == 0


async def test_one_owners_streams_are_sent_at_most_its_rate_and_anothers_at_their_own() -> None:
    from runtime import SubscriptionBudgets

    store = MemorySnapshotStore()
    await store.open()
    ids = await _log_of(store, 150, data={"kind": "approved"})
    rate = 200.0
    feed = EventFeed(store, poll_interval=60.0, budgets=SubscriptionBudgets(rate=rate))
    alice = [feed.subscribe(AGENT, after_event_id=BEFORE_ALL, owner="key:alice") for _ in range(4)]
    bob = feed.subscribe(AGENT, after_event_id=BEFORE_ALL, owner="key:bob")
    received = {"key:alice": 0, "key:bob": 0}

    async def read(owner: str, stream: AsyncGenerator[EventDocument, None]) -> None:
        for _ in ids:
            await anext(stream)
            received[owner] += 1

    loop = asyncio.get_running_loop()
    started = loop.time()
    readers = [asyncio.ensure_future(read("key:alice", s)) for s in alice] + [
        asyncio.ensure_future(read("key:bob", bob))
    ]
    try:
        # when alice's four replays and bob's one are read as fast as they come, for a while
        for _ in range(40):
            await asyncio.sleep(0.02)
            elapsed = loop.time() - started
            # then each owner was sent at most its rate (and a burst of a tenth of a second's worth),
            # however the machine runs (a slower one only sends fewer)
            for owner in received:
                assert received[owner] <= rate / 10 + rate * elapsed + 1, (owner, received, elapsed)
        assert received["key:bob"] > 0, "bob waited for alice's turns"
    finally:
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        for stream in [*alice, bob]:
            await stream.aclose()
        await feed.close()
