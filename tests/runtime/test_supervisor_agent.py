"""support-supervisor: delegation to refund-agent (the supervisor sees its outer run only)."""

from __future__ import annotations

import pytest

from runtime import RunManager, ToolCallAlreadyDecidedError, sub_run_id
from runtime.demo import LEDGER
from storage import RunFilter

SUPERVISOR = "support-supervisor"
REFUND = "refund-agent"


async def test_outer_run_shows_the_sub_agents_call_and_inner_run_is_listed_only_under_the_sub_agent(
    any_manager: RunManager,
) -> None:
    # when
    started = await any_manager.start_run(
        SUPERVISOR, "Please refund order 1042", thread_id="t-9", resource_id="r-9", principal="bob"
    )

    # then the supervisor lists its own outer run, showing the sub-agent's pending call
    assert started.status == "suspended"
    assert started.run is not None
    [outer_call] = started.run["toolCalls"]
    assert outer_call["toolName"] == "issue_refund"
    assert outer_call["args"] == {"order_id": 1042, "amount": 49.9}
    assert outer_call["requiresApproval"] is True
    assert outer_call.get("delegated") is True
    assert started.run["parentRunId"] is None
    outer_runs = await any_manager.store.list_runs(SUPERVISOR, RunFilter())
    assert [r["_id"] for r in outer_runs] == [started.run_id]

    # and the inner run is listed only under the sub-agent, pointing at its parent
    inner_runs = await any_manager.store.list_runs(REFUND, RunFilter())
    assert len(inner_runs) == 1
    inner = inner_runs[0]
    assert inner["_id"] == sub_run_id(started.run_id, outer_call["toolCallId"])
    assert inner["parentRunId"] == started.run_id
    assert (inner["threadId"], inner["resourceId"]) == ("t-9", "r-9")
    assert inner["toolCalls"][0]["toolName"] == "issue_refund"
    assert await any_manager.store.get(SUPERVISOR, inner["_id"]) is None

    # when the outer call is approved
    outcome = await any_manager.approve(SUPERVISOR, started.run_id, outer_call["toolCallId"], principal="alice")

    # then both runs complete and both snapshots are gone
    assert outcome.status == "completed"
    assert outcome.output == "The refund team says: Refund of $49.90 for order 1042 issued."
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]
    assert await any_manager.store.get(SUPERVISOR, started.run_id) is None
    assert await any_manager.store.get(REFUND, inner["_id"]) is None
    inner_events = await any_manager.store.list_events(REFUND, inner["_id"])
    forwarded = [e for e in inner_events if e["type"] == "decision"]
    assert [(e["by"], e["data"]["kind"]) for e in forwarded] == [("alice", "approved")]


async def test_declining_the_outer_call_declines_the_sub_agents_call(manager: RunManager) -> None:
    started = await manager.start_run(SUPERVISOR, "Please refund order 1043")
    assert started.run is not None
    call_id = started.run["toolCalls"][0]["toolCallId"]

    outcome = await manager.decline(SUPERVISOR, started.run_id, call_id, reason="fraud suspected")

    assert outcome.status == "completed"
    assert outcome.output == (
        "The refund team says: The refund for order 1043 was not issued: "
        "The user declined this tool call. Reason: fraud suspected"
    )
    assert LEDGER == []
    assert await manager.store.count_runs(REFUND, RunFilter()) == 0
    assert await manager.store.count_runs(SUPERVISOR, RunFilter()) == 0


async def test_a_sub_run_with_two_calls_is_decided_one_outer_decision_at_a_time(manager: RunManager) -> None:
    # given
    started = await manager.start_run(SUPERVISOR, "Please refund orders 1042 and 1043")
    assert started.run is not None
    [first] = started.run["toolCalls"]
    assert first["args"] == {"order_id": 1042, "amount": 49.9}

    # when the first is approved, the outer run suspends again showing the second
    again = await manager.approve(SUPERVISOR, started.run_id, first["toolCallId"])

    # then
    assert again.status == "suspended"
    assert again.run is not None
    [second] = again.run["toolCalls"]
    assert second["args"] == {"order_id": 1043, "amount": 120.0}
    assert second["decision"] is None
    assert LEDGER == []
    [inner] = await manager.store.list_runs(REFUND, RunFilter())
    assert [c["decision"] is not None for c in inner["toolCalls"]] == [True, False]

    # when the second is approved, by the question shown (the call's first was decided)
    with pytest.raises(ToolCallAlreadyDecidedError):
        await manager.approve(SUPERVISOR, started.run_id, second["toolCallId"])
    done = await manager.approve(SUPERVISOR, started.run_id, second["toolCallId"], question_id=second["questionId"])

    # then
    assert done.status == "completed"
    issued = sorted(LEDGER, key=lambda refund: refund["orderId"])  # tools of one turn run concurrently
    assert issued == [{"orderId": 1042, "amount": 49.9}, {"orderId": 1043, "amount": 120.0}]
    assert await manager.store.count_runs(REFUND, RunFilter()) == 0
    assert await manager.store.count_runs(SUPERVISOR, RunFilter()) == 0


async def test_a_supervisor_request_without_refund_completes_without_delegating(manager: RunManager) -> None:
    outcome = await manager.start_run(SUPERVISOR, "Hello there")

    assert outcome.status == "completed"
    assert outcome.output == "I handle refunds. Which order would you like refunded?"
    assert await manager.store.count_runs(REFUND, RunFilter()) == 0
