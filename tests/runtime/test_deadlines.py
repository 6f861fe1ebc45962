"""Deadlines in the runtime with an injected clock (issue 18 part 2; docs/api.md "Deadlines").

The manager's clock decides when a run suspends and when the sweeper looks, so each deadline
is checked to the millisecond: none before it, the fallback at it, and a new deadline for each
new question of a call that suspends again.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from runtime import AgentRegistry, RunManager, StalledRunSweeper, ToolApprovalRule
from runtime.demo import LEDGER
from storage import SnapshotStore, utcnow

from . import agents

MS = timedelta(milliseconds=1)


class Clock:
    """A settable UTC clock (``RunManager(clock=...)``)."""

    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now


def _manager(store: SnapshotStore, registry: AgentRegistry, clock: Clock, *rules: ToolApprovalRule) -> RunManager:
    return RunManager(store, registry, instance_id="instance-a", clock=clock, tool_rules=rules)


async def test_the_fallback_is_applied_at_the_deadline_not_before(
    store: SnapshotStore, registry: AgentRegistry
) -> None:
    # given a refund that must be decided within 60 s
    clock = Clock()
    manager = _manager(store, registry, clock, ToolApprovalRule(tool="issue_refund", expires_after=60))
    sweeper = StalledRunSweeper(manager, interval=1)
    started = await manager.start_run("refund-agent", "Please refund order 1042")
    assert started.run is not None
    deadline = started.run["toolCalls"][0]["expiresAt"]
    assert deadline == clock.now + timedelta(seconds=60)
    assert started.run["expiresAt"] == deadline

    # when the sweeper looks a millisecond before the deadline, then at it
    clock.now = deadline - MS
    early = await sweeper.sweep_once()
    clock.now = deadline
    due = await sweeper.sweep_once()

    # then nothing happened before it; at it the refund was declined by the expiry and the run completed
    assert early == []
    assert [(o.run_id, o.status) for o in due] == [(started.run_id, "completed")]
    assert LEDGER == []
    events = await store.list_events("refund-agent", started.run_id)
    assert [e["type"] for e in events] == ["started", "suspended", "expired", "decision", "resumed", "completed"]
    assert events[3]["data"]["kind"] == "declined"
    assert events[2]["at"] == deadline
    assert await sweeper.sweep_once() == []


async def test_a_new_question_after_an_answer_gets_a_new_deadline(
    store: SnapshotStore, registry: AgentRegistry
) -> None:
    # given `pay`, which asks for an amount (no deadline: it waits for data) then needs an approval
    clock = Clock()
    manager = _manager(store, registry, clock, ToolApprovalRule(tool="pay", expires_after=60, on_expiry="approve"))
    started = await manager.start_run("payment-agent", "pay")
    assert started.run is not None
    call = started.run["toolCalls"][0]
    assert not call["requiresApproval"]
    assert "expiresAt" not in call
    assert "expiresAt" not in started.run

    # when the amount is given 100 s later, and the run suspends again for the approval
    clock.now += timedelta(seconds=100)
    answered = await manager.resume("payment-agent", started.run_id, call["toolCallId"], 12)
    assert answered.status == "suspended"
    assert answered.run is not None

    # then the approval's deadline counts from the new suspension
    again = answered.run["toolCalls"][0]
    assert again["requiresApproval"]
    assert again["expiresAt"] == clock.now + timedelta(seconds=60)
    assert answered.run["expiresAt"] == again["expiresAt"]

    # and at it the expiry approves it (the rule says so): the payment runs once
    clock.now = again["expiresAt"]
    outcomes = await StalledRunSweeper(manager, interval=1).sweep_once()
    assert [o.status for o in outcomes] == ["completed"]
    assert agents.PAID == [12]


async def test_two_sweepers_at_the_deadline_record_one_decision(store: SnapshotStore, registry: AgentRegistry) -> None:
    # given an expired refund seen by two instances' sweepers at once
    clock = Clock()
    rule = ToolApprovalRule(tool="issue_refund", expires_after=1, on_expiry="approve")
    a = _manager(store, registry, clock, rule)
    b = RunManager(store, registry, instance_id="instance-b", clock=clock, tool_rules=[rule])
    started = await a.start_run("refund-agent", "Please refund order 1042")
    clock.now += timedelta(seconds=2)
    first, second = StalledRunSweeper(a, interval=1), StalledRunSweeper(b, interval=1)
    expired = await first.find_expired()
    assert [d["_id"] for d in expired] == [started.run_id]

    # when both apply it from the same read
    results = [await a.expire(expired[0]), await b.expire(expired[0])]

    # then the first recorded it and continued the run; the second recorded nothing
    assert results[0] is not None
    assert results[0].status == "completed"
    assert results[1] is None
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]
    kinds = [e["type"] for e in await store.list_events("refund-agent", started.run_id)]
    assert kinds.count("expired") == 1
    assert kinds.count("decision") == 1
    assert await second.find_expired() == []
