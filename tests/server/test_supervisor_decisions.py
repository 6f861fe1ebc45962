"""A supervisor's delegated call and the sub-run it waits on are one decision (issue 14, part 4), over HTTP.

The design (docs/writing-agents.md "Supervisors"): the inner run is decided only through the
supervisor's run. A decision sent to the inner run directly is refused with
``DecideThroughSupervisor`` (naming the supervisor's run) and changes nothing; the supervisor's
decision is forwarded to the inner run, so both record the same decision, and a decline is
never recorded next to an executed refund.
"""

from __future__ import annotations

from typing import Any

import pytest

from runtime.demo import LEDGER

from .._graphql import REFUND, REFUND_PROMPT, SUPERVISOR, GraphQLClient

THREAD = "t-n"

APPROVE_INNER = """
mutation($input: ApproveToolCallInput!) {
  approveToolCall(input: $input) {
    __typename
    ... on UserError { code message }
    ... on DecideThroughSupervisor { runId supervisorRunId }
  }
}"""

DECLINE_INNER = APPROVE_INNER.replace("ApproveToolCallInput", "DeclineToolCallInput").replace(
    "approveToolCall", "declineToolCall"
)

QUESTION_IDS = """
query($agentId: ID!, $runId: ID!) {
  suspendedRun(agentId: $agentId, runId: $runId) { toolCalls { toolCallId questionId decision { kind } } }
}"""

MODEL_IDS = """
query($agentId: ID!, $runId: ID!) {
  suspendedRun(agentId: $agentId, runId: $runId) { toolCalls { modelToolCallId } }
}"""


async def _supervised(gql: GraphQLClient) -> tuple[dict[str, Any], dict[str, Any]]:
    """A supervisor run waiting on its refund sub-run: ``(outer run, inner run)`` as listed."""
    outer = await gql.suspend(SUPERVISOR, REFUND_PROMPT, threadId=THREAD)
    inner_runs = (await gql.suspended_runs(REFUND, filter={"threadId": THREAD}))["edges"]
    assert len(inner_runs) == 1
    inner: dict[str, Any] = inner_runs[0]["node"]
    assert inner["parentRunId"] == outer["runId"]
    return outer, inner


async def _decisions(gql: GraphQLClient, agent_id: str, run_id: str) -> list[str]:
    return [e["data"]["kind"] for e in await gql.run_events(agent_id, run_id) if e["type"] == "decision"]


async def _assert_both_pending(gql: GraphQLClient, outer: dict[str, Any], inner: dict[str, Any]) -> None:
    for agent_id, run in ((SUPERVISOR, outer), (REFUND, inner)):
        listed = await gql.suspended_run(agent_id, run["runId"])
        assert listed is not None
        assert [c["decision"] for c in listed["toolCalls"]] == [None]
        assert await _decisions(gql, agent_id, run["runId"]) == []


async def test_the_supervisors_call_shows_the_same_question_as_the_inner_run(gql: GraphQLClient) -> None:
    outer, inner = await _supervised(gql)

    shown = (await gql.data(QUESTION_IDS, agentId=SUPERVISOR, runId=outer["runId"]))["suspendedRun"]
    asked = (await gql.data(QUESTION_IDS, agentId=REFUND, runId=inner["runId"]))["suspendedRun"]
    assert shown["toolCalls"][0]["questionId"] == asked["toolCalls"][0]["questionId"]
    assert outer["toolCalls"][0]["toolName"] == inner["toolCalls"][0]["toolName"] == "issue_refund"


@pytest.mark.parametrize(
    ("inner_document", "inner_field"), [(APPROVE_INNER, "approveToolCall"), (DECLINE_INNER, "declineToolCall")]
)
async def test_a_decision_sent_to_the_inner_run_is_refused_and_names_the_supervisor_run(
    gql: GraphQLClient, inner_document: str, inner_field: str
) -> None:
    # given a supervisor run waiting on its refund sub-run
    outer, inner = await _supervised(gql)

    # when the inner run is decided directly
    refused = (
        await gql.data(
            inner_document,
            input={"agentId": REFUND, "runId": inner["runId"], "toolCallId": inner["toolCalls"][0]["toolCallId"]},
        )
    )[inner_field]

    # then it is refused, naming the supervisor's run, and nothing was decided or refunded anywhere
    assert refused["__typename"] == "DecideThroughSupervisor"
    assert refused["code"] == "DECIDE_THROUGH_SUPERVISOR"
    assert (refused["runId"], refused["supervisorRunId"]) == (inner["runId"], outer["runId"])
    assert LEDGER == []
    await _assert_both_pending(gql, outer, inner)


@pytest.mark.parametrize("named", ["the supervisor's call", "no call", "the inner call's model id"])
@pytest.mark.parametrize(
    ("inner_document", "inner_field"), [(APPROVE_INNER, "approveToolCall"), (DECLINE_INNER, "declineToolCall")]
)
async def test_a_decision_sent_to_the_inner_run_is_refused_whatever_call_it_names(
    gql: GraphQLClient, inner_document: str, inner_field: str, named: str
) -> None:
    # given a supervisor run waiting on its refund sub-run
    outer, inner = await _supervised(gql)
    listed = (await gql.data(MODEL_IDS, agentId=REFUND, runId=inner["runId"]))["suspendedRun"]
    tool_call_id = {
        "the supervisor's call": outer["toolCalls"][0]["toolCallId"],
        "no call": "no-such-call",
        "the inner call's model id": listed["toolCalls"][0]["modelToolCallId"],
    }[named]

    # when the inner run is decided directly, naming a call it may not have
    refused = (
        await gql.data(inner_document, input={"agentId": REFUND, "runId": inner["runId"], "toolCallId": tool_call_id})
    )[inner_field]

    # then the inner run refuses any direct decision the same way, and nothing changed
    assert refused["__typename"] == "DecideThroughSupervisor", refused
    assert (refused["runId"], refused["supervisorRunId"]) == (inner["runId"], outer["runId"])
    assert LEDGER == []
    await _assert_both_pending(gql, outer, inner)


@pytest.mark.parametrize("question", [False, True])
async def test_a_resume_or_a_question_sent_to_the_inner_run_is_refused_too(gql: GraphQLClient, question: bool) -> None:
    # given a supervisor run waiting on its refund sub-run (an approval, no call waiting for data)
    outer, inner = await _supervised(gql)
    fields = {}
    if question:
        asked = (await gql.data(QUESTION_IDS, agentId=REFUND, runId=inner["runId"]))["suspendedRun"]
        fields["questionId"] = asked["toolCalls"][0]["questionId"]

    # when the inner run is resumed directly, naming no call (or only its question)
    refused = await gql.resume(REFUND, inner["runId"], {"note": "x"}, **fields)

    # then it is refused as a direct decision, not as a missing call or the wrong kind
    assert refused["__typename"] == "DecideThroughSupervisor", refused
    assert LEDGER == []
    await _assert_both_pending(gql, outer, inner)


async def test_inner_approved_first_is_refused_then_the_supervisors_decline_refunds_nothing(
    gql: GraphQLClient,
) -> None:
    # given the inner run was (unsuccessfully) approved directly
    outer, inner = await _supervised(gql)
    inner_call = inner["toolCalls"][0]["toolCallId"]
    refused = await gql.approve(REFUND, inner["runId"], inner_call)
    assert refused["__typename"] == "DecideThroughSupervisor"

    # when the supervisor's call is declined
    outcome = await gql.decline(SUPERVISOR, outer["runId"], outer["toolCalls"][0]["toolCallId"], reason="Do not refund")

    # then no refund was issued, and both runs record the same decline, then completion
    assert outcome["__typename"] == "RunOutcome"
    assert outcome["status"] == "COMPLETED"
    assert "issued" not in outcome["output"].replace("not issued", "")
    assert "Do not refund" in outcome["output"]
    assert LEDGER == []
    assert await _decisions(gql, SUPERVISOR, outer["runId"]) == ["declined"]
    assert await _decisions(gql, REFUND, inner["runId"]) == ["declined"]
    assert await gql.suspended_run(SUPERVISOR, outer["runId"]) is None
    assert await gql.suspended_run(REFUND, inner["runId"]) is None


async def test_inner_declined_first_is_refused_then_the_supervisors_approval_refunds_once(
    gql: GraphQLClient,
) -> None:
    outer, inner = await _supervised(gql)
    refused = await gql.decline(REFUND, inner["runId"], inner["toolCalls"][0]["toolCallId"], reason="no")
    assert refused["__typename"] == "DecideThroughSupervisor"

    outcome = await gql.approve(SUPERVISOR, outer["runId"], outer["toolCalls"][0]["toolCallId"])

    assert outcome["status"] == "COMPLETED"
    assert "Refund of $49.90 for order 1042 issued." in outcome["output"]
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]
    assert await _decisions(gql, SUPERVISOR, outer["runId"]) == ["approved"]
    assert await _decisions(gql, REFUND, inner["runId"]) == ["approved"]


@pytest.mark.parametrize("decision", ["approve", "decline"])
async def test_outer_decided_first_reaches_the_inner_run_and_a_late_inner_decision_changes_nothing(
    gql: GraphQLClient, decision: str
) -> None:
    # given a supervisor run waiting on its refund sub-run
    outer, inner = await _supervised(gql)

    # when the supervisor's call is decided
    decide = gql.approve if decision == "approve" else gql.decline
    outcome = await decide(SUPERVISOR, outer["runId"], outer["toolCalls"][0]["toolCallId"])
    assert outcome["status"] == "COMPLETED"

    # then the inner run recorded the same decision, and the ledger agrees with it
    kind = "approved" if decision == "approve" else "declined"
    refunds = [{"orderId": 1042, "amount": 49.9}] if kind == "approved" else []
    assert await _decisions(gql, SUPERVISOR, outer["runId"]) == [kind]
    assert await _decisions(gql, REFUND, inner["runId"]) == [kind]
    assert refunds == LEDGER

    # and a late decision on the inner run, either way, changes nothing
    for late in (gql.approve, gql.decline):
        answer = await late(REFUND, inner["runId"], inner["toolCalls"][0]["toolCallId"])
        assert answer["__typename"] == "ToolCallAlreadyDecided", answer  # the sub-run finished
        assert answer["decision"]["kind"] == kind.upper()
    assert await _decisions(gql, REFUND, inner["runId"]) == [kind]
    assert refunds == LEDGER
