"""Edit, then approve (issue 18 part 1) over HTTP: ``approveToolCall(editedArgs)``.

The edited arguments are checked by the tool's own pydantic validator (strict JSON mode: ``true``
is no integer, ``"12.5"`` no float), refused with ``InvalidToolArguments`` changing nothing; the tool
runs with them, the decision, its event and the stored model history show them, a multi-question
tool re-runs with them, and the per-tool rules are evaluated on them (``allowEdits: false``
forbids edits). ``runtime.demo.LEDGER`` records the refunds really issued.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai import ModelMessagesTypeAdapter
from pydantic_ai.messages import ModelResponse, ToolCallPart
from starlette.applications import Starlette

from runtime.demo import LEDGER
from server.settings import ApiKeyConfig, Settings, ToolRuleConfig

from .._auth import ADMIN, TestKey
from .._graphql import GraphQLClient
from ..runtime import agents

LARGE = TestKey(
    "test-large", "rg_test_large_0123456789abcdefghijklmnopqrstuvwxyz", scopes=(*ADMIN.scopes, "refunds:large")
)
"""Holds ``refunds:large``, which approving a refund above $40 needs (``ADMIN`` lacks it)."""

RULES = [
    {"tool": "issue_refund", "argument": "amount", "above": 40, "scope": "refunds:large"},
    {"tool": "issue_refund", "argument": "amount", "above": 1000, "allowEdits": False},
]
SMALL_ORDER = "Please refund order 1044"
"""$15.50: under every rule's limit."""

CALL = "toolCallId toolName args decision { kind decidedBy reason editedArgs }"
APPROVE = f"""
mutation($input: ApproveToolCallInput!) {{
  approveToolCall(input: $input) {{
    __typename
    ... on UserError {{ code message }}
    ... on InvalidToolArguments {{ problems {{ path message }} }}
    ... on Forbidden {{ requiredScope }}
    ... on ToolCallAlreadyDecided {{ decision {{ kind }} }}
    ... on RunOutcome {{ status output run {{ toolCalls {{ {CALL} }} }} }}
  }}
}}"""
DECLINE = """
mutation($input: DeclineToolCallInput!) {
  declineToolCall(input: $input) {
    __typename ... on UserError { code } ... on ToolCallAlreadyDecided { decision { kind editedArgs } }
    ... on RunOutcome { status output }
  }
}"""
START = f"""
mutation($input: StartRunInput!) {{
  startRun(input: $input) {{ __typename ... on RunOutcome {{ runId status run {{ toolCalls {{ {CALL} }} }} }} }}
}}"""
RUN = f"""
query($agentId: ID!, $runId: ID!) {{
  suspendedRun(agentId: $agentId, runId: $runId) {{ toolCalls {{ {CALL} }} events {{ type data }} }}
}}"""
EVENTS = "query($agentId: ID!, $runId: ID!) { runEvents(agentId: $agentId, runId: $runId) { type by data } }"


pytestmark = pytest.mark.usefixtures("clean_test_agents")


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The demo and test agents, ``RULES``, and the ``LARGE`` key beside ``ADMIN``."""
    return settings.model_copy(
        update={
            "agents": "tests.runtime.agents:WITH_DEMO_AGENTS",
            "tool_rules": [ToolRuleConfig.model_validate(rule) for rule in RULES],
            "api_keys": [*settings.api_keys, ApiKeyConfig.model_validate(LARGE.entry())],
        }
    )


async def _start(gql: GraphQLClient, agent_id: str, prompt: str) -> tuple[str, list[dict[str, Any]]]:
    started = (await gql.data(START, input={"agentId": agent_id, "prompt": prompt}))["startRun"]
    assert started["status"] == "SUSPENDED", started
    return started["runId"], started["run"]["toolCalls"]


async def _approve(gql: GraphQLClient, agent_id: str, run_id: str, call_id: str, **fields: Any) -> dict[str, Any]:
    body = {"agentId": agent_id, "runId": run_id, "toolCallId": call_id, **fields}
    result: dict[str, Any] = (await gql.data(APPROVE, input=body))["approveToolCall"]
    return result


async def _unchanged(gql: GraphQLClient, run_id: str, calls: list[dict[str, Any]]) -> None:
    """The run still waits on ``calls`` exactly as listed at the start, with no decision event."""
    run = (await gql.data(RUN, agentId="refund-agent", runId=run_id))["suspendedRun"]
    assert run["toolCalls"] == calls
    assert [event["type"] for event in run["events"]] == ["started", "suspended"]
    assert LEDGER == []


async def test_edited_arguments_failing_the_tools_validator_are_refused_with_their_problems_and_change_nothing(
    gql: GraphQLClient,
) -> None:
    # given a refund of order 1044 waiting for approval
    run_id, calls = await _start(gql, "refund-agent", SMALL_ORDER)

    # when it is approved with an amount that is no number, a missing order_id and an unknown argument
    refused = await _approve(gql, "refund-agent", run_id, calls[0]["toolCallId"], editedArgs={"amount": "lots", "x": 1})

    # then InvalidToolArguments lists one problem per error, with its path, and nothing changed
    assert refused["__typename"] == "InvalidToolArguments", refused
    assert refused["code"] == "INVALID_TOOL_ARGUMENTS"
    problems = {tuple(p["path"]): p["message"] for p in refused["problems"]}
    assert set(problems) == {("order_id",), ("amount",), ("x",)}
    assert "number" in problems[("amount",)]
    await _unchanged(gql, run_id, calls)

    # and arguments that are not an object are refused the same way
    not_object = await _approve(gql, "refund-agent", run_id, calls[0]["toolCallId"], editedArgs=[1044, 12])
    assert not_object["__typename"] == "InvalidToolArguments"
    assert not_object["problems"] == [{"path": [], "message": "must be an object"}]
    await _unchanged(gql, run_id, calls)

    # and so is a refund of a negative amount: the tool's own constraint (amount > 0)
    negative = await _approve(
        gql, "refund-agent", run_id, calls[0]["toolCallId"], editedArgs={"order_id": 1044, "amount": -3}
    )
    assert negative["__typename"] == "InvalidToolArguments", negative
    assert negative["problems"] == [{"path": ["amount"], "message": "Input should be greater than 0"}]
    await _unchanged(gql, run_id, calls)


async def test_the_tool_runs_with_the_edited_arguments_shown_in_the_decision_and_its_event(gql: GraphQLClient) -> None:
    # given two refunds waiting for approval (orders 1044 at $15.50 and 1080 at $10)
    run_id, calls = await _start(gql, "refund-agent", "Please refund orders 1044 and 1080")
    first, second = (call["toolCallId"] for call in calls)
    original = calls[0]["args"]

    # when the first is approved with a smaller amount
    waiting = await _approve(gql, "refund-agent", run_id, first, editedArgs={"order_id": 1044, "amount": 12.5})

    # then its decision shows the edited arguments as sent, the model's are listed unchanged
    assert waiting["status"] == "SUSPENDED", waiting
    decided = waiting["run"]["toolCalls"][0]
    assert decided["args"] == original
    assert decided["decision"] == {
        "kind": "APPROVED",
        "decidedBy": "key:test-admin",
        "reason": None,
        "editedArgs": {"order_id": 1044, "amount": 12.5},
    }

    # and when the second is approved as the model asked, the first refund ran with the edited amount
    done = await _approve(gql, "refund-agent", run_id, second)
    assert done["status"] == "COMPLETED", done
    ledger = sorted(LEDGER, key=lambda entry: entry["orderId"])  # the two calls run concurrently
    assert ledger == [{"orderId": 1044, "amount": 12.5}, {"orderId": 1080, "amount": 10.0}]
    assert "Refund of $12.50 for order 1044 issued" in done["output"]

    # and the decision event records both the model's and the edited arguments
    events = (await gql.data(EVENTS, agentId="refund-agent", runId=run_id))["runEvents"]
    decisions = [event["data"] for event in events if event["type"] == "decision"]
    assert decisions[0]["originalArgs"] == original
    assert decisions[0]["editedArgs"] == {"order_id": 1044, "amount": 12.5}
    assert "editedArgs" not in decisions[1]


async def test_an_edit_is_reapplied_when_a_multi_question_tool_runs_again_and_the_model_history_shows_it(
    gql: GraphQLClient, app: Starlette
) -> None:
    # given release-agent's call release(version="1.2"), which needs an approval, then asks for notes
    run_id, calls = await _start(gql, "release-agent", "go")
    call_id = calls[0]["toolCallId"]
    assert calls[0]["args"] == {"version": "1.2"}

    # when it is approved with version 2.0, the tool runs and stops at its question
    asked = await _approve(gql, "release-agent", run_id, call_id, editedArgs={"version": "2.0"})
    assert asked["status"] == "SUSPENDED", asked

    # then the stored history's tool call carries the edited arguments (what the model will read)
    stored = await app.state.store.load_history("release-agent", run_id)
    parts = [
        part
        for message in ModelMessagesTypeAdapter.validate_json(stored)
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart) and part.tool_call_id == call_id
    ]
    assert [part.args_as_dict() for part in parts] == [{"version": "2.0"}]
    # and the call, waiting on its question now, keeps the edit for its next run
    waiting = await app.state.store.get("release-agent", run_id)
    assert [call.get("editedArgs") for call in waiting["toolCalls"]] == [{"version": "2.0"}]
    question = waiting["toolCalls"][0]["questionId"]

    # and when its question is answered, the tool runs again from its top with the edited version
    done = (
        await gql.data(
            """mutation($input: ResumeRunInput!) { resumeRun(input: $input) {
                 __typename ... on RunOutcome { status output } ... on UserError { code message } } }""",
            input={"agentId": "release-agent", "runId": run_id, "resumeData": "notes", "questionId": question},
        )
    )["resumeRun"]
    assert done["status"] == "COMPLETED", done
    assert agents.RELEASED == ["2.0 (approved): notes"]


async def test_the_per_tool_rules_are_evaluated_on_the_edited_arguments(gql: GraphQLClient) -> None:
    # given a $15.50 refund, which ADMIN may approve (the $40 rule does not apply to it)
    run_id, calls = await _start(gql, "refund-agent", SMALL_ORDER)
    call_id = calls[0]["toolCallId"]

    # when ADMIN approves it edited to $100
    refused = await _approve(gql, "refund-agent", run_id, call_id, editedArgs={"order_id": 1044, "amount": 100})

    # then the rule on the edited amount needs refunds:large, which ADMIN lacks: nothing changed
    assert refused["__typename"] == "Forbidden", refused
    assert refused["requiredScope"] == "refunds:large"
    await _unchanged(gql, run_id, calls)

    # and a holder of refunds:large may approve the same edit
    gql.http.headers.update(LARGE.headers)
    done = await _approve(gql, "refund-agent", run_id, call_id, editedArgs={"order_id": 1044, "amount": 100})
    assert done["status"] == "COMPLETED", done
    assert LEDGER == [{"orderId": 1044, "amount": 100.0}]


async def test_a_rule_with_allow_edits_false_forbids_the_edit_but_not_the_plain_approval(gql: GraphQLClient) -> None:
    # given a $15.50 refund, and a caller holding every scope a rule names
    gql.http.headers.update(LARGE.headers)
    run_id, calls = await _start(gql, "refund-agent", SMALL_ORDER)
    call_id = calls[0]["toolCallId"]

    # when it is approved edited to $2000 (over the allowEdits=false rule's limit)
    refused = await _approve(gql, "refund-agent", run_id, call_id, editedArgs={"order_id": 1044, "amount": 2000})

    # then the edit is Forbidden (no scope would allow it) and nothing changed
    assert refused["__typename"] == "Forbidden", refused
    assert refused["requiredScope"] is None
    assert "may not be edited" in refused["message"]
    await _unchanged(gql, run_id, calls)

    # and approving it as the model asked still works
    done = await _approve(gql, "refund-agent", run_id, call_id)
    assert done["status"] == "COMPLETED", done
    assert LEDGER == [{"orderId": 1044, "amount": 15.5}]


async def test_an_edit_racing_a_decline_has_one_winner(gql: GraphQLClient) -> None:
    for _ in range(5):
        LEDGER.clear()
        # given a refund waiting for approval
        run_id, calls = await _start(gql, "refund-agent", SMALL_ORDER)
        ids = {"agentId": "refund-agent", "runId": run_id, "toolCallId": calls[0]["toolCallId"]}

        # when an approval with edits and a decline are sent at once
        approved, declined = await asyncio.gather(
            gql.data(APPROVE, input={**ids, "editedArgs": {"order_id": 1044, "amount": 9}}),
            gql.data(DECLINE, input={**ids, "reason": "no"}),
        )
        results = [approved["approveToolCall"], declined["declineToolCall"]]

        # then exactly one won; the loser names the winning decision, and the ledger agrees
        kinds = sorted(result["__typename"] for result in results)
        assert kinds == ["RunOutcome", "ToolCallAlreadyDecided"], results
        if results[0]["__typename"] == "RunOutcome":
            assert results[1]["decision"] == {"kind": "APPROVED", "editedArgs": {"order_id": 1044, "amount": 9}}
            assert LEDGER == [{"orderId": 1044, "amount": 9.0}]
        else:
            assert results[0]["decision"] == {"kind": "DECLINED"}
            assert LEDGER == []


async def test_an_edit_is_read_as_the_json_it_is_never_converted_into_another_value(gql: GraphQLClient) -> None:
    # given a refund of order 1044 waiting for approval
    run_id, calls = await _start(gql, "refund-agent", SMALL_ORDER)
    call_id = calls[0]["toolCallId"]

    # when it is approved with a boolean for the order's number (a lax read would make it order 1)
    boolean = await _approve(gql, "refund-agent", run_id, call_id, editedArgs={"order_id": True, "amount": 12.5})

    # then the edit is refused with its path, and nothing changed: no refund of order 1 was issued
    assert boolean["__typename"] == "InvalidToolArguments", boolean
    assert [p["path"] for p in boolean["problems"]] == [["order_id"]]
    await _unchanged(gql, run_id, calls)

    # and so is a number given as text: what was approved is what the decision records
    text = await _approve(gql, "refund-agent", run_id, call_id, editedArgs={"order_id": 1044, "amount": "12.5"})
    assert text["__typename"] == "InvalidToolArguments", text
    assert [p["path"] for p in text["problems"]] == [["amount"]]
    await _unchanged(gql, run_id, calls)
