"""Idempotency keys expire a retention period after their answer, through the sweeper
(docs/guarantees.md "Idempotency keys"): a repeat inside the period answers the first result, one
after it is a new request. On every store, with a clock the test moves."""

from __future__ import annotations

import pytest

from runtime import AgentRegistry, IdempotencyKeyReusedError, RunManager, StalledRunSweeper, ToolCallAlreadyDecidedError
from runtime.demo import LEDGER
from storage import RunFilter, SnapshotStore

from ._clock import MovedClock

REFUND = "refund-agent"
DAY = 86400.0
"""``RUNSGATE_IDEMPOTENCY_KEY_RETENTION``'s default, seconds."""


async def test_a_repeat_inside_the_period_answers_the_first_result_and_one_after_it_is_new(
    store: SnapshotStore, registry: AgentRegistry
) -> None:
    clock = MovedClock()
    manager = RunManager(store, registry, instance_id="instance-a", clock=clock)
    sweeper = StalledRunSweeper(manager, interval=5, key_retention=DAY)
    started = await manager.start_run(REFUND, "Please refund order 1042")
    assert started.run is not None
    call_id = started.run["toolCalls"][0]["toolCallId"]
    first = await manager.approve(REFUND, started.run_id, call_id, principal="alice", idempotency_key="a-1")
    assert first.status == "completed"

    # when the sweeper runs just inside the period after the answer
    clock.ahead = DAY - 60
    await sweeper.sweep_once()

    # then a repeat answers the first result, and the refund was issued once
    assert await manager.approve(REFUND, started.run_id, call_id, principal="alice", idempotency_key="a-1") == first
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]

    # when it runs after the period
    clock.ahead = DAY + 60
    await sweeper.sweep_once()

    # then the repeat is a new request: checked again, it finds the call decided (the run ended)
    with pytest.raises(ToolCallAlreadyDecidedError):
        await manager.approve(REFUND, started.run_id, call_id, principal="alice", idempotency_key="a-1")
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]


async def test_a_start_key_reused_with_other_arguments_is_refused_inside_the_period_and_new_after_it(
    store: SnapshotStore, registry: AgentRegistry
) -> None:
    clock = MovedClock()
    manager = RunManager(store, registry, instance_id="instance-a", clock=clock)
    sweeper = StalledRunSweeper(manager, interval=5, key_retention=DAY)
    first = await manager.start_run(REFUND, "Please refund order 1042", idempotency_key="s-1")

    # inside the period, the key with other arguments is refused, and the same start replays
    clock.ahead = DAY - 60
    await sweeper.sweep_once()
    with pytest.raises(IdempotencyKeyReusedError):
        await manager.start_run(REFUND, "Please refund order 1043", idempotency_key="s-1")
    assert await manager.start_run(REFUND, "Please refund order 1042", idempotency_key="s-1") == first

    # after it, the key is free: a start with other arguments is a new run
    clock.ahead = DAY + 60
    await sweeper.sweep_once()
    other = await manager.start_run(REFUND, "Please refund order 1043", idempotency_key="s-1")
    assert other.status == "suspended"
    assert other.run_id != first.run_id
    assert await store.count_runs(REFUND, RunFilter()) == 2
    # and the key is now the new request's: the first start's arguments are refused with it
    with pytest.raises(IdempotencyKeyReusedError):
        await manager.start_run(REFUND, "Please refund order 1042", idempotency_key="s-1")
