"""refund-agent end to end: approval suspensions (Mastra's approveToolCall / declineToolCall)."""

from __future__ import annotations

import pytest

from runtime import RunManager, ToolCallAlreadyDecidedError
from runtime.demo import LEDGER
from storage import RunFilter

AGENT = "refund-agent"


async def test_approving_the_refund_issues_it_once_and_deletes_the_snapshot(any_manager: RunManager) -> None:
    # given
    started = await any_manager.start_run(AGENT, "Please refund order 1042", thread_id="t-1", principal="bob")
    assert started.status == "suspended"
    run = started.run
    assert run is not None
    assert run["agentId"] == AGENT
    assert run["threadId"] == "t-1"
    assert run["status"] == "suspended"
    assert run["pendingCount"] == 1
    assert run["version"] == 1
    assert run["parentRunId"] is None
    assert run["createdAt"] == run["suspendedAt"]
    assert run["createdAt"].microsecond % 1000 == 0
    [call] = run["toolCalls"]
    assert call["toolName"] == "issue_refund"
    assert call["args"] == {"order_id": 1042, "amount": 49.9}
    assert call["requiresApproval"] is True
    assert call["suspendPayload"] is None
    assert call["resumeSchema"] is None
    assert call["decision"] is None
    stored = await any_manager.store.list_runs(AGENT, RunFilter())
    assert [r["_id"] for r in stored] == [started.run_id]
    assert LEDGER == []

    # when
    outcome = await any_manager.approve(AGENT, started.run_id, call["toolCallId"], principal="alice")

    # then
    assert outcome.status == "completed"
    assert outcome.output == "Refund of $49.90 for order 1042 issued."
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]
    assert await any_manager.store.get(AGENT, started.run_id) is None
    events = await any_manager.store.list_events(AGENT, started.run_id)
    assert [e["type"] for e in events] == ["started", "suspended", "decision", "resumed", "completed"]
    decision = events[2]
    assert decision["by"] == "alice"
    assert decision["data"]["kind"] == "approved"
    assert decision["data"]["toolCallId"] == call["toolCallId"]
    assert len(decision["data"]["argsFingerprint"]) == 64


async def test_declining_never_runs_the_tool_and_the_model_reads_the_reason(manager: RunManager) -> None:
    # given
    started = await manager.start_run(AGENT, "Please refund order 1042")
    assert started.run is not None
    call_id = started.run["toolCalls"][0]["toolCallId"]

    # when
    outcome = await manager.decline(AGENT, started.run_id, call_id, reason="the item was never returned")

    # then
    assert outcome.status == "completed"
    assert outcome.output == (
        "The refund for order 1042 was not issued: "
        "The user declined this tool call. Reason: the item was never returned"
    )
    assert LEDGER == []
    assert await manager.store.get(AGENT, started.run_id) is None


async def test_two_orders_continue_only_after_both_calls_are_decided(any_manager: RunManager) -> None:
    # given
    started = await any_manager.start_run(AGENT, "Please refund orders 1042 and 1043")
    assert started.run is not None
    first, second = started.run["toolCalls"]
    assert [first["args"], second["args"]] == [
        {"order_id": 1042, "amount": 49.9},
        {"order_id": 1043, "amount": 120.0},
    ]
    assert started.run["pendingCount"] == 2

    # when the first is approved
    waiting = await any_manager.approve(AGENT, started.run_id, first["toolCallId"], principal="alice")

    # then nothing ran yet and the decision is stored
    assert waiting.status == "suspended"
    assert waiting.run is not None
    assert waiting.run["pendingCount"] == 1
    assert waiting.run["version"] == 2
    recorded = waiting.run["toolCalls"][0]["decision"]
    assert recorded is not None
    assert recorded["kind"] == "approved"
    assert recorded["decidedBy"] == "alice"
    assert waiting.run["toolCalls"][1]["decision"] is None
    assert LEDGER == []

    # when the second is declined
    done = await any_manager.decline(AGENT, started.run_id, second["toolCallId"], reason="duplicate")

    # then only the approved refund was issued
    assert done.status == "completed"
    assert done.output == (
        "Refund of $49.90 for order 1042 issued. "
        "The refund for order 1043 was not issued: The user declined this tool call. Reason: duplicate"
    )
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]
    assert await any_manager.store.get(AGENT, started.run_id) is None
    with pytest.raises(ToolCallAlreadyDecidedError) as late:  # the run finished: its events name the decline
        await any_manager.approve(AGENT, started.run_id, second["toolCallId"])
    assert late.value.decision["kind"] == "declined"
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]


async def test_a_prompt_without_an_order_completes_and_stores_nothing(manager: RunManager) -> None:
    outcome = await manager.start_run(AGENT, "I want my money back")

    assert outcome.status == "completed"
    assert outcome.output == "Which order should I refund? Please give me the order number."
    assert outcome.run is None
    assert await manager.store.count_runs(AGENT, RunFilter()) == 0
    events = await manager.store.list_events(AGENT, outcome.run_id)
    assert [e["type"] for e in events] == ["started", "completed"]
