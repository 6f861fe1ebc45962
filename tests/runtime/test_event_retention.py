"""A finished run's events expire a retention period after its ``completed`` or ``failed`` event,
through the sweeper (docs/guarantees.md "Events"), but never while the run or, for a sub-run,
its supervisor's run is still stored; a keyed start repeated inside the period answers from them.
On every store, with a clock the test moves."""

from __future__ import annotations

from runtime import AgentRegistry, RunManager, StalledRunSweeper
from runtime.demo import LEDGER
from storage import EventDocument, SnapshotStore, rules

from . import agents
from ._clock import MovedClock

REFUND = "refund-agent"
SUPERVISOR = "support-supervisor"
FLAKY = "flaky-agent"
PERIOD = 2_592_000.0
"""``RUNSGATE_EVENT_RETENTION``'s default, seconds (30 days)."""


def _sweeper(manager: RunManager) -> StalledRunSweeper:
    return StalledRunSweeper(manager, interval=5, event_retention=PERIOD)


async def _completed(manager: RunManager, prompt: str = "Please refund order 1042") -> str:
    started = await manager.start_run(REFUND, prompt)
    assert started.run is not None
    call_id = started.run["toolCalls"][0]["toolCallId"]
    assert (await manager.approve(REFUND, started.run_id, call_id, principal="alice")).status == "completed"
    return started.run_id


async def test_the_events_of_a_finished_run_are_deleted_after_the_period_and_others_kept(
    store: SnapshotStore, registry: AgentRegistry
) -> None:
    clock = MovedClock()
    manager = RunManager(store, registry, instance_id="instance-a", clock=clock)
    finished = await _completed(manager)
    [completed] = [e for e in await store.list_events(REFUND, finished) if e["type"] == "completed"]
    assert completed["retentionFrom"] == completed["at"]
    waiting = await manager.start_run(REFUND, "Please refund order 1043")

    # inside the period the finished run's events stay
    clock.ahead = PERIOD - 60
    await _sweeper(manager).sweep_once()
    assert len(await store.list_events(REFUND, finished)) >= 4

    # after it they are gone, and those of the run still waiting stay
    clock.ahead = PERIOD + 60
    await _sweeper(manager).sweep_once()
    assert await store.list_events(REFUND, finished) == []
    assert [e["type"] for e in await store.list_events(REFUND, waiting.run_id)] == ["started", "suspended"]
    assert await store.list_expired_events(before=clock(), limit=10) == []


async def test_a_failed_run_still_stored_keeps_its_events_until_a_period_after_it_finished(
    store: SnapshotStore, registry: AgentRegistry
) -> None:
    # given a run whose continuation failed: its snapshot stays, waiting for retryRun
    clock = MovedClock()
    manager = RunManager(store, registry, instance_id="instance-a", clock=clock)
    started = await manager.start_run(FLAKY, "ship a book")
    assert started.run is not None
    agents.SWITCHES["model_down"] = True
    call_id = started.run["toolCalls"][0]["toolCallId"]
    assert (await manager.approve(FLAKY, started.run_id, call_id, principal="alice")).status == "failed"

    # when the sweeper runs after the period, the events stay (the run is stored)
    clock.ahead = PERIOD + 60
    await _sweeper(manager).sweep_once()
    assert "failed" in [e["type"] for e in await store.list_events(FLAKY, started.run_id)]

    # and once retried it completes then, and its events stay a period after that
    agents.SWITCHES["model_down"] = False
    assert (await manager.retry(FLAKY, started.run_id, principal="ops")).status == "completed"
    clock.ahead = 2 * PERIOD
    await _sweeper(manager).sweep_once()
    assert "completed" in [e["type"] for e in await store.list_events(FLAKY, started.run_id)]
    clock.ahead = 2 * PERIOD + 120
    await _sweeper(manager).sweep_once()
    assert await store.list_events(FLAKY, started.run_id) == []


async def test_a_sub_runs_events_stay_while_its_supervisors_run_is_stored(
    store: SnapshotStore, registry: AgentRegistry
) -> None:
    # given a supervisor's stored run, and a finished sub-run of it as the runtime logs one
    # (its started event names the supervisor's run, delegate() reads its completed event)
    clock = MovedClock()
    manager = RunManager(store, registry, instance_id="instance-a", clock=clock)
    supervisor = await manager.start_run(SUPERVISOR, "Please refund order 1042")
    assert supervisor.run is not None
    now = clock()
    sub_run: list[EventDocument] = [
        {
            "_id": f"{int(now.timestamp() * 1e9):020d}-{n:012x}",
            "runId": "finished-sub-run",
            "agentId": REFUND,
            "type": kind,
            "at": now,
            "by": "bob",
            "data": {"parentRunId": supervisor.run_id} if kind == "started" else {"output": "refunded"},
        }
        for n, kind in enumerate(("started", "completed"))
    ]
    sub_run[1]["retentionFrom"] = rules.retention_from("completed", now)  # type: ignore[typeddict-item]
    for event in sub_run:
        await store.append_event(event)

    # when the sweeper runs after the period, the sub-run's events stay
    clock.ahead = PERIOD + 60
    await _sweeper(manager).sweep_once()
    assert [e["type"] for e in await store.list_events(REFUND, "finished-sub-run")] == ["started", "completed"]

    # once the supervisor's run finished and is gone, they go a period later
    call_id = supervisor.run["toolCalls"][0]["toolCallId"]
    assert (await manager.decline(SUPERVISOR, supervisor.run_id, call_id, reason="no")).status == "completed"
    clock.ahead = 2 * PERIOD + 120
    await _sweeper(manager).sweep_once()
    assert await store.list_events(REFUND, "finished-sub-run") == []
    assert await store.list_events(SUPERVISOR, supervisor.run_id) == []


async def test_a_keyed_start_repeated_inside_the_period_answers_the_first_result(
    store: SnapshotStore, registry: AgentRegistry
) -> None:
    # given a keyed start whose run completed, kept a period as long as the events' (the longest allowed)
    clock = MovedClock()
    manager = RunManager(store, registry, instance_id="instance-a", clock=clock)
    sweeper = StalledRunSweeper(manager, interval=5, key_retention=PERIOD, event_retention=PERIOD)
    first = await manager.start_run(REFUND, "Please refund order 1042", idempotency_key="s-1")
    assert first.run is not None
    call_id = first.run["toolCalls"][0]["toolCallId"]
    done = await manager.approve(REFUND, first.run_id, call_id, principal="alice")
    assert done.status == "completed"

    # when the sweeper runs just inside the period
    clock.ahead = PERIOD - 60
    await sweeper.sweep_once()

    # then the repeat answers the first result, the run's events are still there, and the
    # refund was issued once
    again = await manager.start_run(REFUND, "Please refund order 1042", idempotency_key="s-1")
    assert again == first
    assert "completed" in [e["type"] for e in await store.list_events(REFUND, first.run_id)]
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]


async def test_a_run_that_finished_again_counts_from_its_last_finish(
    store: SnapshotStore, registry: AgentRegistry
) -> None:
    # given a run that failed, then was retried half a period later and completed
    clock = MovedClock()
    manager = RunManager(store, registry, instance_id="instance-a", clock=clock)
    started = await manager.start_run(FLAKY, "ship a book")
    assert started.run is not None
    agents.SWITCHES["model_down"] = True
    call_id = started.run["toolCalls"][0]["toolCallId"]
    assert (await manager.approve(FLAKY, started.run_id, call_id, principal="alice")).status == "failed"
    clock.ahead = PERIOD / 2
    agents.SWITCHES["model_down"] = False
    assert (await manager.retry(FLAKY, started.run_id, principal="ops")).status == "completed"

    # when the sweeper runs a period after the failure, the events stay (the completion is newer)
    clock.ahead = PERIOD + 60
    await _sweeper(manager).sweep_once()
    types = [e["type"] for e in await store.list_events(FLAKY, started.run_id)]
    assert {"failed", "completed"} <= set(types)

    # and they go a period after the completion
    clock.ahead = 1.5 * PERIOD + 60
    await _sweeper(manager).sweep_once()
    assert await store.list_events(FLAKY, started.run_id) == []
