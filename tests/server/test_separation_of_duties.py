"""Who asked may not approve (issue 45 section 4), over HTTP.

A tool rule with ``separationOfDuties`` keeps the principal who started a run from approving or
editing its calls, on every path: ``approveToolCall``, ``decideToolCalls``, a supervisor's card;
with a two-person rule, every approver differs from the requester. The refusal is typed
(``SeparationOfDuties``) and records nothing. On the memory, SQLite and MongoDB stores.
"""

from __future__ import annotations

from typing import Any

import pytest

from runtime.demo import LEDGER
from storage import MemorySnapshotStore, SQLiteSnapshotStore

from .._auth import TestKey
from .._graphql import REFUND, SUPERVISOR, TWO_REFUNDS_PROMPT, GraphQLClient
from .conftest import Serve

X = TestKey("requester-x", "rg_test_requester_x_0123456789abcdefghijklmnopqrst")
Y = TestKey("approver-y", "rg_test_approver_y_0123456789abcdefghijklmnopqrstu")
Z = TestKey("approver-z", "rg_test_approver_z_0123456789abcdefghijklmnopqrstu")

SOD = [{"tool": "issue_refund", "separationOfDuties": True}]
ANSWER = """
  __typename
  ... on UserError { code message }
  ... on SeparationOfDuties { runId toolCallId startedBy }
  ... on RunOutcome { status }
"""
APPROVE = f"mutation($input: ApproveToolCallInput!) {{ approveToolCall(input: $input) {{ {ANSWER} }} }}"
DECLINE = f"mutation($input: DeclineToolCallInput!) {{ declineToolCall(input: $input) {{ {ANSWER} }} }}"
BULK = f"mutation($input: DecideToolCallsInput!) {{ decideToolCalls(input: $input) {{ results {{ {ANSWER} }} }} }}"
QUEUE = "query { reviewQueue { totalCount nodes { runId } } }"
START = """
mutation($input: StartRunInput!) {
  startRun(input: $input) { ... on RunOutcome { runId status run { toolCalls { toolCallId questionId } } } }
}"""


async def started(gql: GraphQLClient, agent_id: str, prompt: str) -> tuple[str, dict[str, Any]]:
    outcome = (await gql.data(START, input={"agentId": agent_id, "prompt": prompt}))["startRun"]
    assert outcome["status"] == "SUSPENDED", outcome
    return outcome["runId"], outcome["run"]["toolCalls"][0]


@pytest.mark.parametrize("path", ["approveToolCall", "editedArgs", "decideToolCalls"])
async def test_the_requester_may_not_approve_on_any_path(serve: Serve, path: str) -> None:
    served = await serve(keys=[X, Y], tool_rules=SOD)
    x, y = served.client(X), served.client(Y)
    run_id, call = await started(x, REFUND, "Please refund order 1042")
    named = {"runId": run_id, "toolCallId": call["toolCallId"], "questionId": call["questionId"]}

    if path == "decideToolCalls":
        decisions = [{**named, "kind": "APPROVED"}]
        [refused] = (await x.data(BULK, input={"agentId": REFUND, "decisions": decisions}))["decideToolCalls"][
            "results"
        ]
    else:
        edits = {"editedArgs": {"order_id": 1042, "amount": 10}} if path == "editedArgs" else {}
        refused = (await x.data(APPROVE, input={"agentId": REFUND, **named, **edits}))["approveToolCall"]

    assert (refused["__typename"], refused["code"]) == ("SeparationOfDuties", "SEPARATION_OF_DUTIES"), refused
    assert (refused["runId"], refused["toolCallId"], refused["startedBy"]) == (
        run_id,
        call["toolCallId"],
        f"key:{X.name}",
    )
    assert LEDGER == []
    # the requester is not shown it in the queue; another principal is, and may approve it
    assert (await x.data(QUEUE))["reviewQueue"]["totalCount"] == 0
    assert (await y.data(QUEUE))["reviewQueue"]["nodes"] == [{"runId": run_id}]
    approved = (await y.data(APPROVE, input={"agentId": REFUND, **named}))["approveToolCall"]
    assert (approved["__typename"], approved["status"]) == ("RunOutcome", "COMPLETED"), approved
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]


async def test_the_requester_may_still_decline(serve: Serve) -> None:
    served = await serve(keys=[X], tool_rules=SOD)
    x = served.client(X)
    run_id, call = await started(x, REFUND, "Please refund order 1042")
    declined = await x.data(DECLINE, input={"agentId": REFUND, "runId": run_id, "toolCallId": call["toolCallId"]})
    assert declined["declineToolCall"]["status"] == "COMPLETED", declined
    assert LEDGER == []


async def test_the_requester_may_not_approve_a_supervisors_card_of_the_tool(serve: Serve) -> None:
    served = await serve(keys=[X, Y], tool_rules=SOD)
    x, y = served.client(X), served.client(Y)
    run_id, card = await started(x, SUPERVISOR, TWO_REFUNDS_PROMPT)
    named = {"agentId": SUPERVISOR, "runId": run_id, "toolCallId": card["toolCallId"], "questionId": card["questionId"]}
    refused = (await x.data(APPROVE, input=named))["approveToolCall"]
    assert refused["__typename"] == "SeparationOfDuties", refused
    approved = (await y.data(APPROVE, input=named))["approveToolCall"]
    assert approved["__typename"] == "RunOutcome", approved
    assert LEDGER == []  # the sub-run runs its refunds once both are decided


async def test_with_two_approvers_each_differs_from_the_requester(serve: Serve) -> None:
    rules = [{"tool": "issue_refund", "approvals": 2, "separationOfDuties": True}]
    served = await serve(keys=[X, Y, Z], tool_rules=rules)
    x, y, z = served.client(X), served.client(Y), served.client(Z)
    run_id, call = await started(x, REFUND, "Please refund order 1042")
    named = {"agentId": REFUND, "runId": run_id, "toolCallId": call["toolCallId"], "questionId": call["questionId"]}

    first = (await y.data(APPROVE, input=named))["approveToolCall"]
    assert (first["__typename"], first["status"]) == ("RunOutcome", "SUSPENDED"), first
    refused = (await x.data(APPROVE, input=named))["approveToolCall"]
    assert refused["__typename"] == "SeparationOfDuties", refused
    second = (await z.data(APPROVE, input=named))["approveToolCall"]
    assert (second["__typename"], second["status"]) == ("RunOutcome", "COMPLETED"), second
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]


async def _forget_starter(store: Any, run_id: str) -> None:
    """Make the stored run look as a version before 5 wrote it: no ``startedBy``."""
    if isinstance(store, MemorySnapshotStore):
        store._runs[run_id].pop("startedBy")
        store._indexes.written(store._runs[run_id])  # its indexes re-read it, as after a write
    elif isinstance(store, SQLiteSnapshotStore):
        await store._write(
            lambda db: db.execute("UPDATE run_snapshots SET started_by = NULL WHERE run_id = ?", (run_id,))
        )
    else:
        await store.database["run_snapshots"].update_one({"_id": run_id}, {"$unset": {"startedBy": ""}})


async def test_a_run_that_records_no_starter_is_approved_by_no_one_under_the_rule(serve: Serve) -> None:
    served = await serve(keys=[X, Y], tool_rules=SOD)
    x, y = served.client(X), served.client(Y)
    run_id, call = await started(x, REFUND, "Please refund order 1042")
    await _forget_starter(served.app.state.store, run_id)
    named = {"agentId": REFUND, "runId": run_id, "toolCallId": call["toolCallId"], "questionId": call["questionId"]}

    refused = (await y.data(APPROVE, input=named))["approveToolCall"]
    assert (refused["__typename"], refused["startedBy"]) == ("SeparationOfDuties", None), refused
    assert "does not record who started it" in refused["message"]
    assert (await y.data(QUEUE))["reviewQueue"]["totalCount"] == 0
    declined = await y.data(DECLINE, input={k: v for k, v in named.items() if k != "questionId"})
    assert declined["declineToolCall"]["status"] == "COMPLETED", declined
    assert LEDGER == []
