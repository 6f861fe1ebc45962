"""Idempotency keys: the same request returns the first answer and does nothing twice (docs/api.md "Mutations")."""

from __future__ import annotations

import asyncio

import pytest

from runtime import AgentRegistry, IdempotencyKeyReusedError, RunManager, RunOutcome, ToolCallNotFoundError
from runtime.demo import LEDGER
from storage import EventDocument, MemorySnapshotStore, RunFilter, SnapshotDocument, StoreUnavailableError

from .._processes import scaled
from . import agents

REFUND = "refund-agent"


async def test_repeating_a_start_returns_the_first_run(manager: RunManager) -> None:
    first = await manager.start_run(REFUND, "Please refund order 1042", idempotency_key="k-1")
    again = await manager.start_run(REFUND, "Please refund order 1042", idempotency_key="k-1")

    assert again == first
    assert await manager.store.count_runs(REFUND, RunFilter()) == 1
    events = await manager.store.list_events(REFUND, first.run_id)
    assert [e["type"] for e in events] == ["started", "suspended"]


async def test_repeating_an_approval_issues_the_refund_once(manager: RunManager) -> None:
    started = await manager.start_run(REFUND, "Please refund order 1042")
    assert started.run is not None
    call_id = started.run["toolCalls"][0]["toolCallId"]

    first = await manager.approve(REFUND, started.run_id, call_id, principal="alice", idempotency_key="a-1")
    again = await manager.approve(REFUND, started.run_id, call_id, principal="alice", idempotency_key="a-1")

    assert first.status == "completed"
    assert again == first
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]


async def test_a_waiting_outcome_replays_with_its_stored_run(manager: RunManager) -> None:
    started = await manager.start_run(REFUND, "Please refund orders 1042 and 1043")
    assert started.run is not None
    call_id = started.run["toolCalls"][0]["toolCallId"]

    first = await manager.approve(REFUND, started.run_id, call_id, idempotency_key="a-2")
    again = await manager.approve(REFUND, started.run_id, call_id, idempotency_key="a-2")

    assert first.status == "suspended"
    assert again == first
    assert again.run is not None
    assert again.run["toolCalls"][0]["decision"] is not None


async def test_the_same_key_with_other_arguments_is_refused(manager: RunManager) -> None:
    await manager.start_run(REFUND, "Please refund order 1042", idempotency_key="k-2")

    with pytest.raises(IdempotencyKeyReusedError) as caught:
        await manager.start_run(REFUND, "Please refund order 1043", idempotency_key="k-2")

    assert caught.value.key == "k-2"
    assert caught.value.in_flight is False
    assert await manager.store.count_runs(REFUND, RunFilter()) == 1


async def test_keys_are_scoped_by_operation(manager: RunManager) -> None:
    started = await manager.start_run(REFUND, "Please refund order 1042", idempotency_key="shared")
    assert started.run is not None

    outcome = await manager.approve(
        REFUND, started.run_id, started.run["toolCalls"][0]["toolCallId"], idempotency_key="shared"
    )

    assert outcome.status == "completed"


async def test_a_domain_error_is_a_final_answer_and_replays(manager: RunManager) -> None:
    started = await manager.start_run(REFUND, "Please refund order 1042")

    with pytest.raises(ToolCallNotFoundError) as first:
        await manager.approve(REFUND, started.run_id, "call-404", idempotency_key="e-1")
    with pytest.raises(ToolCallNotFoundError) as again:
        await manager.approve(REFUND, started.run_id, "call-404", idempotency_key="e-1")

    assert again.value == first.value
    assert again.value.message == first.value.message


async def test_a_request_while_the_first_is_still_running_is_told_so(manager: RunManager) -> None:
    # given a first request that takes a while
    agents.SWITCHES["delay"] = 0.3
    impatient = RunManager(manager.store, manager.agents, instance_id="instance-b", in_flight_wait=0.05)
    first = asyncio.create_task(manager.start_run("slow-agent", "hello", idempotency_key="slow"))
    await asyncio.sleep(0.01)

    # when / then
    with pytest.raises(IdempotencyKeyReusedError) as caught:
        await impatient.start_run("slow-agent", "hello", idempotency_key="slow")
    assert caught.value.in_flight is True
    assert "still running" in caught.value.message
    assert (await first).status == "completed"


async def test_a_patient_repeat_gets_the_first_answer(manager: RunManager) -> None:
    agents.SWITCHES["delay"] = 0.1
    patient = RunManager(manager.store, manager.agents, instance_id="instance-b", in_flight_wait=1.0)
    first = asyncio.create_task(manager.start_run("slow-agent", "hello", idempotency_key="slow"))
    await asyncio.sleep(0.01)

    again = await patient.start_run("slow-agent", "hello", idempotency_key="slow")

    assert again == await first
    events = await manager.store.list_events("slow-agent", again.run_id)
    assert [e["type"] for e in events] == ["started", "completed"]


class _FailingInsertStore(MemorySnapshotStore):
    """Fails the next ``insert`` as if the database were unreachable."""

    fail_next_insert = True

    async def insert(self, snapshot: SnapshotDocument, history: bytes, *, event: EventDocument | None = None) -> None:
        if self.fail_next_insert:
            self.fail_next_insert = False
            raise StoreUnavailableError("connection refused")
        await super().insert(snapshot, history, event=event)


async def test_an_unexpected_failure_releases_the_key_for_a_retry(registry: AgentRegistry) -> None:
    store = _FailingInsertStore()
    manager = RunManager(store, registry, instance_id="instance-a")

    with pytest.raises(StoreUnavailableError):
        await manager.start_run(REFUND, "Please refund order 1042", idempotency_key="k-3")
    outcome: RunOutcome = await manager.start_run(REFUND, "Please refund order 1042", idempotency_key="k-3")

    assert outcome.status == "suspended"
    assert await store.count_runs(REFUND, RunFilter()) == 1


class _LockedStore(_FailingInsertStore):
    """Fails the next ``insert`` and the release of its key, as a SQLite file held locked for
    longer than the busy timeout: the request answers ``STORE_UNAVAILABLE`` and its key stays
    reserved."""

    async def release_idempotency_key(self, key_id: str, *, by: str | None = None) -> None:
        raise StoreUnavailableError("database is locked")


async def test_a_key_whose_request_could_not_release_it_is_taken_over_after_its_lease(registry: AgentRegistry) -> None:
    # given a start that failed and could not release its key (the store stayed locked)
    store = _LockedStore()
    manager = RunManager(store, registry, instance_id="instance-a", claim_ttl=0.2, in_flight_wait=2.0)
    with pytest.raises(StoreUnavailableError):
        await manager.start_run(REFUND, "Please refund order 1042", idempotency_key="k-4")

    # when the client retries with the same key
    outcome = await manager.start_run(REFUND, "Please refund order 1042", idempotency_key="k-4")

    # then the retry waited for the dead request's lease to lapse, took the key over and ran once
    assert outcome.status == "suspended"
    assert await store.count_runs(REFUND, RunFilter()) == 1


async def test_a_running_request_keeps_its_key_beyond_its_lease(manager: RunManager) -> None:
    # given a first request that runs for three lease periods (the lease is the claim TTL, renewed
    # every third of it: a lease of 1 s survives the event loop stalling 0.6 s on a loaded machine)
    lease = scaled(1.0)
    agents.SWITCHES["delay"] = 3 * lease
    first_instance = RunManager(manager.store, manager.agents, instance_id="instance-a", claim_ttl=lease)
    patient = RunManager(
        manager.store, manager.agents, instance_id="instance-b", claim_ttl=lease, in_flight_wait=6 * lease
    )
    first = asyncio.create_task(first_instance.start_run("slow-agent", "hello", idempotency_key="slow-2"))
    await asyncio.sleep(0.05)

    # when a retry arrives while it runs
    again = await patient.start_run("slow-agent", "hello", idempotency_key="slow-2")

    # then the retry never took the key over: it got the first answer, the run ran once
    assert again == await first
    started = [e for e in await manager.store.list_events("slow-agent", again.run_id) if e["type"] == "started"]
    assert len(started) == 1
