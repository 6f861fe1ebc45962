"""A single decision's idempotency key is reserved by the decision's own write where the store
can (``reserves_with_decisions``: SQLite, memory), and by a write of its own first elsewhere
(MongoDB): either way a repeat answers the first answer and the decision happens once, on
every store (the ``store`` fixture)."""

from __future__ import annotations

import asyncio

import pytest

from runtime import AgentRegistry, RunManager, ToolCallNotFoundError
from runtime.demo import LEDGER
from storage import SnapshotStore

from .._processes import scaled

REFUND = "refund-agent"


async def test_two_requests_with_one_key_at_once_decide_once_and_answer_alike(
    store: SnapshotStore, registry: AgentRegistry
) -> None:
    first_instance = RunManager(store, registry, instance_id="instance-a", in_flight_wait=scaled(10.0))
    second_instance = RunManager(store, registry, instance_id="instance-b", in_flight_wait=scaled(10.0))
    started = await first_instance.start_run(REFUND, "Please refund order 1042")
    assert started.run is not None
    call_id = started.run["toolCalls"][0]["toolCallId"]

    # when both instances get the same keyed approval at once
    first, second = await asyncio.gather(
        first_instance.approve(REFUND, started.run_id, call_id, principal="alice", idempotency_key="k"),
        second_instance.approve(REFUND, started.run_id, call_id, principal="alice", idempotency_key="k"),
    )

    # then both answer the one outcome, and the refund was issued once
    assert first.status == "completed"
    assert second == first
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]
    events = await store.list_events(REFUND, started.run_id)
    assert [e["type"] for e in events].count("decision") == 1


async def test_a_refused_decision_leaves_its_key_free_and_the_corrected_one_is_answered(
    store: SnapshotStore, registry: AgentRegistry
) -> None:
    manager = RunManager(store, registry, instance_id="instance-a")
    started = await manager.start_run(REFUND, "Please refund order 1042")
    assert started.run is not None
    call_id = started.run["toolCalls"][0]["toolCallId"]

    # a refusal writes nothing, so its repeat is checked again and refused again
    for _ in range(2):
        with pytest.raises(ToolCallNotFoundError):
            await manager.approve(REFUND, started.run_id, "call-404", principal="alice", idempotency_key="e")

    # and the key of a decision recorded with it replays that decision's answer
    first = await manager.approve(REFUND, started.run_id, call_id, principal="alice", idempotency_key="k")
    again = await manager.approve(REFUND, started.run_id, call_id, principal="alice", idempotency_key="k")
    assert first.status == "completed"
    assert again == first
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]
