"""``DeadlineNotifier`` on each store (docs/api.md "Reminders and escalation"): a scan adds one
timer per notice of each waiting question; a fire records each due notice once, with its event,
reading the runs of all its timers in one ``get_many``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from runtime import AgentRegistry, RunManager, ToolApprovalRule
from runtime.notifying.notifier import DeadlineNotifier
from storage import SnapshotStore

from ._clock import MovedClock

REFUND = "refund-agent"
RULE = ToolApprovalRule(tool="issue_refund", remind_after=60, escalate_after=120)


async def _waiting(store: SnapshotStore, registry: AgentRegistry, clock: MovedClock) -> tuple[RunManager, list[str]]:
    """Two suspended runs of three waiting questions in all, and a notifier's scan of them."""
    manager = RunManager(store, registry, instance_id="instance-a", clock=clock, tool_rules=[RULE])
    run_ids = []
    for prompt in ("Please refund order 1042", "Please refund orders 1042 and 1043"):
        started = await manager.start_run(REFUND, prompt)
        assert started.status == "suspended"
        run_ids.append(started.run_id)
    return manager, run_ids


def _notifier(store: SnapshotStore, clock: MovedClock) -> DeadlineNotifier:
    return DeadlineNotifier(store, rules=[RULE], agent_ids=[REFUND], instance_id="instance-a", clock=clock)


def _counting(store: SnapshotStore, monkeypatch: pytest.MonkeyPatch, reads: Counter[str]) -> None:
    """Count ``get`` and ``get_many`` calls on the real ``store``, still answered by it."""
    for name in ("get", "get_many"):
        original: Callable[..., Awaitable[Any]] = getattr(store, name)

        async def counted(*args: Any, __name: str = name, __original: Any = original, **kwargs: Any) -> Any:
            reads[__name] += 1
            return await __original(*args, **kwargs)

        monkeypatch.setattr(store, name, counted)


async def test_each_due_notice_is_recorded_once_with_its_event(store: SnapshotStore, registry: AgentRegistry) -> None:
    # given two runs waiting on three questions, scanned
    clock = MovedClock()
    _, run_ids = await _waiting(store, registry, clock)
    notifier = _notifier(store, clock)
    assert await notifier.scan_once() == 6

    # when nothing is due yet, then the reminders, then both notices again
    early = await notifier.fire_once()
    clock.ahead = 61
    reminded = await notifier.fire_once()
    clock.ahead = 121
    escalated = await notifier.fire_once()
    again = await notifier.fire_once()

    # then each question was reminded, then escalated, once each, by the deadline
    assert (early, reminded, escalated, again) == (0, 3, 3, 0)
    for run_id in run_ids:
        run = await store.get(REFUND, run_id)
        assert run is not None
        assert all(call.get("reminded") and call.get("escalated") for call in run["toolCalls"])
        events = [e for e in await store.list_events(REFUND, run_id) if e["type"] in ("reminded", "escalated")]
        per_call = Counter((e["data"]["toolCallId"], e["type"], e["by"]) for e in events)
        assert sorted(per_call.values()) == [1] * 2 * len(run["toolCalls"])
        assert {by for _, _, by in per_call} == {"deadline"}


async def test_a_decided_question_gets_no_notice(store: SnapshotStore, registry: AgentRegistry) -> None:
    # given a run's question decided after its timers were added
    clock = MovedClock()
    manager, (single, _) = await _waiting(store, registry, clock)
    notifier = _notifier(store, clock)
    await notifier.scan_once()
    run = await store.get(REFUND, single)
    assert run is not None
    await manager.decline(REFUND, single, run["toolCalls"][0]["toolCallId"], reason="no")

    # when every notice falls due
    clock.ahead = 121
    recorded = await notifier.fire_once()

    # then only the other run's two questions were noticed, twice each
    assert recorded == 4
    assert [e["type"] for e in await store.list_events(REFUND, single) if e["type"] in ("reminded", "escalated")] == []


async def test_a_fire_reads_the_runs_of_its_timers_in_one_query(
    store: SnapshotStore, registry: AgentRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given six timers of three questions on two runs, all due
    clock = MovedClock()
    await _waiting(store, registry, clock)
    notifier = _notifier(store, clock)
    await notifier.scan_once()
    clock.ahead = 121
    reads: Counter[str] = Counter()
    _counting(store, monkeypatch, reads)

    # when they fire
    recorded = await notifier.fire_once()

    # then every notice was recorded after one read of the runs
    assert recorded == 6
    assert reads == Counter({"get_many": 1})
