"""A start under an idempotency key stores at most one run, whatever fails between its steps (docs/guarantees.md)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime import AgentRegistry, RunManager
from storage import EventDocument, KeyAnswer, RunFilter, SnapshotDocument, SnapshotStore, StoreUnavailableError
from storage.protocol import EventsAfter, RunPage

REFUND = "refund-agent"


def _fail_key_completion_once(store: SnapshotStore) -> None:
    """The real store's ``complete_idempotency_key`` raises once, as if the store went down just then."""
    complete = store.complete_idempotency_key
    failed = False

    async def once(answer: KeyAnswer) -> None:
        nonlocal failed
        if not failed:
            failed = True
            raise StoreUnavailableError("connection refused")
        await complete(answer)

    store.complete_idempotency_key = once  # type: ignore[method-assign]


async def _events(store: SnapshotStore, agent_id: str) -> list[EventDocument]:
    return await store.list_events_after(EventsAfter(agent_id=agent_id, after_event_id=None, limit=1000))


async def test_a_retry_after_the_key_could_not_be_completed_answers_the_stored_run(
    store: SnapshotStore, registry: AgentRegistry
) -> None:
    # given a start whose run was stored but whose key could not be completed
    manager = RunManager(store, registry, instance_id="instance-a", claim_ttl=0.2, in_flight_wait=2.0)
    _fail_key_completion_once(store)
    with pytest.raises(StoreUnavailableError):
        await manager.start_run(REFUND, "Please refund order 1042", idempotency_key="k-1")

    # when the client retries once the key's lease lapsed
    retry = await manager.start_run(REFUND, "Please refund order 1042", idempotency_key="k-1")

    # then one run is stored, the retry answers it, and the agent ran once
    listed = await store.list_runs(REFUND, RunFilter(), RunPage(limit=10))
    assert [doc["_id"] for doc in listed] == [retry.run_id]
    assert retry.status == "suspended"
    assert retry.run is not None
    assert retry.run["toolCalls"] == listed[0]["toolCalls"]
    started = [e for e in await _events(store, REFUND) if e["type"] == "started"]
    assert [e["runId"] for e in started] == [retry.run_id]
    # and the key now holds that answer: a third start replays it
    assert await manager.start_run(REFUND, "Please refund order 1042", idempotency_key="k-1") == retry


async def test_a_retry_of_a_start_that_completed_answers_its_output(
    store: SnapshotStore, registry: AgentRegistry
) -> None:
    # given a start that completed (nothing stored) but whose key could not be completed
    manager = RunManager(store, registry, instance_id="instance-a", claim_ttl=0.2, in_flight_wait=2.0)
    _fail_key_completion_once(store)
    with pytest.raises(StoreUnavailableError):
        await manager.start_run("slow-agent", "hello", idempotency_key="k-2")

    # when the client retries once the key's lease lapsed
    retry = await manager.start_run("slow-agent", "hello", idempotency_key="k-2")

    # then it answers the first start's output without running the agent again
    assert retry.status == "completed"
    assert retry.output == "slow answer to 'hello'"
    events = await _events(store, "slow-agent")
    assert [(e["runId"], e["type"]) for e in events] == [(retry.run_id, "started"), (retry.run_id, "completed")]


async def test_keyed_run_ids_differ_by_key_and_principal(store: SnapshotStore, registry: AgentRegistry) -> None:
    manager = RunManager(store, registry, instance_id="instance-a")

    ids = {
        (await manager.start_run(REFUND, "Please refund order 1042", idempotency_key="a")).run_id,
        (await manager.start_run(REFUND, "Please refund order 1042", idempotency_key="b")).run_id,
        (await manager.start_run(REFUND, "Please refund order 1042", idempotency_key="a", principal="bob")).run_id,
    }

    assert len(ids) == 3
    assert await store.count_runs(REFUND, RunFilter()) == 3


class _SlowInsert:
    """Delays the store's first ``insert`` and fails every renewal of an idempotency key: a first
    request alive but too slow to keep its key, which a retry then takes over."""

    def __init__(self, store: SnapshotStore, delay: float) -> None:
        insert = store.insert
        self.first = True

        async def slow(snapshot: SnapshotDocument, history: bytes, *, event: Any = None) -> None:
            if self.first:
                self.first = False
                await asyncio.sleep(delay)
            await insert(snapshot, history, event=event)

        async def renew(key_id: str, *, by: str, until: Any) -> bool:
            raise StoreUnavailableError("connection refused")

        store.insert = slow  # type: ignore[method-assign]
        store.renew_idempotency_key = renew  # type: ignore[method-assign]


async def test_a_retry_racing_a_slow_first_start_stores_one_run(store: SnapshotStore, registry: AgentRegistry) -> None:
    # given a first start that lost its key's lease while inserting its run
    _SlowInsert(store, delay=0.6)
    manager = RunManager(store, registry, instance_id="instance-a", claim_ttl=0.2, in_flight_wait=2.0)
    first = asyncio.create_task(manager.start_run(REFUND, "Please refund order 1042", idempotency_key="k-3"))
    await asyncio.sleep(0.05)

    # when the retry takes the key over and stores its run first
    retry = await manager.start_run(REFUND, "Please refund order 1042", idempotency_key="k-3")
    answered = await first

    # then the first start's insert met the stored run and answered it: one run for the key
    assert await store.count_runs(REFUND, RunFilter()) == 1
    assert answered.run_id == retry.run_id
    assert answered.status == retry.status == "suspended"


def _fail_supervisor_insert_once(store: SnapshotStore, supervisor: str) -> None:
    """The real store's ``insert`` of ``supervisor``'s run raises once (its sub-run's goes through)."""
    insert = store.insert
    failed = False

    async def once(snapshot: SnapshotDocument, history: bytes, *, event: Any = None) -> None:
        nonlocal failed
        if snapshot["agentId"] == supervisor and not failed:
            failed = True
            raise StoreUnavailableError("connection refused")
        await insert(snapshot, history, event=event)

    store.insert = once  # type: ignore[method-assign]


async def test_a_repeated_supervisor_start_finds_the_sub_run_its_first_try_stored(
    store: SnapshotStore, registry: AgentRegistry
) -> None:
    # given a keyed supervisor start whose sub-run was stored but whose own run was not
    manager = RunManager(store, registry, instance_id="instance-a")
    _fail_supervisor_insert_once(store, "dispatcher")
    with pytest.raises(StoreUnavailableError):
        await manager.start_run("dispatcher", "refund-agent: Please refund order 1042", idempotency_key="s-1")
    [first_sub] = await store.list_runs(REFUND, RunFilter())

    # when the client repeats the start
    retry = await manager.start_run("dispatcher", "refund-agent: Please refund order 1042", idempotency_key="s-1")

    # then the supervisor's call shows the sub-run its first try stored, and no other was stored
    assert retry.status == "suspended"
    assert retry.run is not None
    assert [doc["_id"] for doc in await store.list_runs(REFUND, RunFilter())] == [first_sub["_id"]]
    assert first_sub["parentRunId"] == retry.run_id
    [call] = retry.run["toolCalls"]
    assert call["suspendPayload"] == first_sub["toolCalls"][0]["suspendPayload"]
    # and deciding through the supervisor completes the refund once
    done = await manager.approve("dispatcher", retry.run_id, call["toolCallId"])
    assert done.status == "completed"
    assert await store.count_runs(REFUND, RunFilter()) == 0
