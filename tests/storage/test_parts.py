"""The store protocol split by aggregate (``storage/protocol.py``): ``RunStore``, ``EventLog``,
``IdempotencyKeys``, ``WebhookDeliveries`` and ``RunUpdateLog``, whose union with opening and
closing is ``SnapshotStore``.

Each store is one class implementing every part with the parts' own signatures (mypy checks the
assignments below structurally; the test compares the signatures at run time too), and the
runtime's components accept the part they use and nothing more.
"""

from __future__ import annotations

import asyncio
import inspect
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import cast

import pytest

from runtime.events.feed import EventFeed
from runtime.events.journal import Journal
from runtime.idempotency import HeldKey, IdempotencyGuard
from runtime.outcome import RunOutcome
from runtime.running.scope import RunScope
from storage import (
    EventLog,
    IdempotencyKeys,
    MemorySnapshotStore,
    MongoSnapshotStore,
    RunStore,
    RunUpdateLog,
    SnapshotStore,
    SQLiteSnapshotStore,
    WebhookDeliveries,
)

PARTS: tuple[type, ...] = (RunStore, EventLog, IdempotencyKeys, WebhookDeliveries, RunUpdateLog)
STORES: tuple[type, ...] = (MemorySnapshotStore, SQLiteSnapshotStore, MongoSnapshotStore)


def _methods(protocol: type) -> set[str]:
    return {name for name, value in vars(protocol).items() if inspect.isfunction(value) and not name.startswith("_")}


def test_the_parts_are_disjoint_and_with_the_lifecycle_make_the_whole_store() -> None:
    parts = [_methods(part) for part in PARTS]

    assert all(not (a & b) for i, a in enumerate(parts) for b in parts[i + 1 :])
    whole = set().union(*parts) | _methods(SnapshotStore)
    assert _methods(SnapshotStore) == {"open", "close", "ping"}
    assert len(whole) == sum(len(p) for p in parts) + 3


@pytest.mark.parametrize("store_class", STORES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("part", [*PARTS, SnapshotStore], ids=lambda c: c.__name__)
def test_each_store_implements_each_part_with_its_signatures(store_class: type, part: type) -> None:
    for name in _methods(part):
        expected = inspect.signature(getattr(part, name))
        got = inspect.signature(getattr(store_class, name))
        assert list(got.parameters) == list(expected.parameters), (store_class.__name__, name)
        assert inspect.iscoroutinefunction(getattr(store_class, name)), (store_class.__name__, name)


class _OnlyEvents:
    """An ``EventLog`` and nothing else, over a real store."""

    def __init__(self, store: SnapshotStore) -> None:
        self.append_event = store.append_event
        self.list_events = store.list_events
        self.list_events_of_runs = store.list_events_of_runs
        self.list_events_after = store.list_events_after


class _OnlyKeys:
    """``IdempotencyKeys`` and nothing else, over a real store."""

    def __init__(self, store: SnapshotStore) -> None:
        self.reserve_idempotency_key = store.reserve_idempotency_key
        self.renew_idempotency_key = store.renew_idempotency_key
        self.complete_idempotency_key = store.complete_idempotency_key
        self.release_idempotency_key = store.release_idempotency_key
        self.delete_expired_idempotency_keys = store.delete_expired_idempotency_keys


async def test_the_journal_and_the_feed_need_only_the_event_log_and_the_guard_only_the_keys(
    store: SnapshotStore,
) -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    events: EventLog = _OnlyEvents(store)
    keys: IdempotencyKeys = _OnlyKeys(store)
    scope = cast(
        RunScope,
        SimpleNamespace(run_id="r1", agent_id="refund-agent", thread_id="t1", resource_id=None, principal="alice"),
    )

    # the journal appends through the event log alone, and the feed reads it
    outcome = await Journal(events, lambda: now).completed(scope, "done")
    feed = EventFeed(events, poll_interval=0.05, lookback=1.0)
    stream = feed.subscribe("refund-agent", after_event_id="0")
    try:
        # Awaited in the test's own task, bounded. This used to hang about one run in three on
        # FerretDB: close() cancelled the poller while its query opened a second connection, and
        # PyMongo awaits that through asyncio.wait_for, which on Python 3.11 drops a cancel that
        # arrives as the connection completes, so the poller polled on and close() awaited it
        # forever. The poller now stops on the cancel request itself (runtime/_cancel.py).
        async with asyncio.timeout(10):
            read = [await anext(stream)]
            await feed.close()  # stops and awaits the poller first (a poll is never cut off mid-query)
            await stream.aclose()
    finally:
        await feed.close()

    # the guard answers a repeated key from the keys alone
    guard = IdempotencyGuard(keys, lambda: now, in_flight_wait=0.1)
    calls: list[int] = []

    async def action(held: HeldKey | None) -> RunOutcome:
        assert held is not None  # the key's answer is left to the guard: it writes it
        calls.append(1)
        return outcome

    first = await guard.run(agent_id="refund-agent", operation="op", key="k", arguments={}, action=action)
    again = await guard.run(agent_id="refund-agent", operation="op", key="k", arguments={}, action=action)

    assert [e["type"] for e in read] == ["completed"]
    assert (first, again, len(calls)) == (outcome, outcome, 1)
