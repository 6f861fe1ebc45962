"""A decision is made on the question its decider was shown (issue 41), over HTTP.

One tool call may ask several questions in its life: a supervisor's delegated call shows each
question of its sub-run in turn, a tool may ``suspend()`` twice, or need an approval after an
answer. A decision applies to the question it names (``questionId``), or, naming only the
``toolCallId``, to the call's first question; on a question no longer pending it changes nothing
and names the decision that answered it. On the memory, SQLite and MongoDB stores, with two
reviewers, each deciding with a key of their own.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from runtime.demo import LEDGER

from .._auth import TestKey
from .._graphql import REFUND, SUPERVISOR, TWO_REFUNDS_PROMPT, GraphQLClient
from .._processes import scaled
from ..runtime import agents
from .conftest import Serve

X = TestKey("reviewer-x", "rg_test_reviewer_x_0123456789abcdefghijklmnopqrstuv")
Y = TestKey("reviewer-y", "rg_test_reviewer_y_0123456789abcdefghijklmnopqrstuv")

CALL = "toolCallId questionId toolName args suspendPayload requiresApproval decision { kind decidedBy }"
ANSWER = f"""
  __typename
  ... on UserError {{ code message }}
  ... on ToolCallAlreadyDecided {{ runId toolCallId decision {{ kind decidedBy reason }} }}
  ... on QuestionNotPending {{ runId callId: toolCallId questionId answered: decision {{ kind decidedBy }} }}
  ... on RunOutcome {{ runId status output run {{ toolCalls {{ {CALL} }} }} }}
"""
SINGLE = """
mutation($input: {input}!) {{ {field}(input: $input) {{ {answer} }} }}
"""
APPROVE = SINGLE.format(input="ApproveToolCallInput", field="approveToolCall", answer=ANSWER)
DECLINE = SINGLE.format(input="DeclineToolCallInput", field="declineToolCall", answer=ANSWER)
RESUME = SINGLE.format(input="ResumeRunInput", field="resumeRun", answer=ANSWER)
BULK = f"""
mutation($input: DecideToolCallsInput!) {{ decideToolCalls(input: $input) {{ results {{ {ANSWER} }} }} }}
"""
START = f"""
mutation($input: StartRunInput!) {{
  startRun(input: $input) {{ __typename ... on RunOutcome {{ runId status run {{ toolCalls {{ {CALL} }} }} }} }}
}}"""
RUN = f"""
query($agentId: ID!, $runId: ID!) {{ suspendedRun(agentId: $agentId, runId: $runId) {{ toolCalls {{ {CALL} }} }} }}
"""
EVENTS = "query($agentId: ID!, $runId: ID!) { runEvents(agentId: $agentId, runId: $runId) { type } }"

KINDS = {"approveToolCall": "APPROVED", "declineToolCall": "DECLINED", "decideToolCalls": "APPROVED"}


async def decide(
    gql: GraphQLClient, path: str, agent_id: str, run_id: str, tool_call_id: str | None, **fields: Any
) -> dict[str, Any]:
    """One decision through ``path`` (a mutation, or an item of ``decideToolCalls``); its answer."""
    named = {"runId": run_id, **({"toolCallId": tool_call_id} if tool_call_id is not None else {}), **fields}
    if path == "decideToolCalls":
        key = named.pop("idempotencyKey", None)
        kind = named.pop("kind", "APPROVED")
        bulk = {"agentId": agent_id, "decisions": [{**named, "kind": kind}], "idempotencyKey": key}
        [answer] = (await gql.data(BULK, input=bulk))["decideToolCalls"]["results"]
        return dict(answer)
    named.pop("kind", None)  # the mutation says it
    document = {"approveToolCall": APPROVE, "declineToolCall": DECLINE, "resumeRun": RESUME}[path]
    answered: dict[str, Any] = (await gql.data(document, input={"agentId": agent_id, **named}))[path]
    return answered


async def pending_calls(gql: GraphQLClient, agent_id: str, run_id: str) -> list[dict[str, Any]]:
    run = (await gql.data(RUN, agentId=agent_id, runId=run_id))["suspendedRun"]
    assert run is not None
    return list(run["toolCalls"])


async def refunds_asked_one_after_the_other(served: Any) -> tuple[GraphQLClient, GraphQLClient, str, dict[str, Any]]:
    """A supervisor run asking for two refunds, one question at a time under one call: the two
    reviewers' clients, the run id and the card both were shown (refund 1042)."""
    x, y = served.client(X), served.client(Y)
    started = (await x.data(START, input={"agentId": SUPERVISOR, "prompt": TWO_REFUNDS_PROMPT}))["startRun"]
    assert started["status"] == "SUSPENDED", started
    [card] = started["run"]["toolCalls"]
    assert (card["toolName"], card["args"]) == ("issue_refund", {"order_id": 1042, "amount": 49.9})
    return x, y, started["runId"], card


@pytest.mark.parametrize("path", ["approveToolCall", "declineToolCall", "decideToolCalls"])
async def test_a_later_reviewers_decision_never_decides_a_question_nobody_was_shown(serve: Serve, path: str) -> None:
    served = await serve(keys=[X, Y])
    x, y, run_id, card = await refunds_asked_one_after_the_other(served)

    # given X approved the card both reviewers were shown, and the same call now asks the next refund
    first = await decide(x, "approveToolCall", SUPERVISOR, run_id, card["toolCallId"], idempotencyKey="x-1")
    assert first["status"] == "SUSPENDED", first
    [shown_next] = first["run"]["toolCalls"]
    assert shown_next["toolCallId"] == card["toolCallId"]
    assert shown_next["questionId"] != card["questionId"]
    assert shown_next["args"] == {"order_id": 1043, "amount": 120}

    # when Y decides the card Y saw, naming its call, with a key of Y's own
    kind = {"kind": "DECLINED"} if path == "declineToolCall" else {}
    late = await decide(y, path, SUPERVISOR, run_id, card["toolCallId"], idempotencyKey="y-1", **kind)

    # then nothing is decided: Y is told X's approval answered that question
    assert late["__typename"] == "ToolCallAlreadyDecided", late
    assert late["code"] == "TOOL_CALL_ALREADY_DECIDED"
    assert (late["decision"]["kind"], late["decision"]["decidedBy"]) == ("APPROVED", f"key:{X.name}")
    assert LEDGER == []  # the sub-run runs its refunds once both are decided
    [still] = await pending_calls(x, SUPERVISOR, run_id)
    assert (still["questionId"], still["decision"]) == (shown_next["questionId"], None)


@pytest.mark.parametrize("path", ["approveToolCall", "declineToolCall", "decideToolCalls"])
async def test_a_decision_naming_a_question_answered_already_is_refused_and_names_its_decision(
    serve: Serve, path: str
) -> None:
    served = await serve(keys=[X, Y])
    x, y, run_id, card = await refunds_asked_one_after_the_other(served)
    first = await decide(x, "approveToolCall", SUPERVISOR, run_id, card["toolCallId"], questionId=card["questionId"])
    assert first["status"] == "SUSPENDED", first
    [shown_next] = first["run"]["toolCalls"]

    # when Y decides the question Y saw, naming it
    kind = {"kind": "DECLINED"} if path == "declineToolCall" else {}
    late = await decide(y, path, SUPERVISOR, run_id, card["toolCallId"], questionId=card["questionId"], **kind)

    # then it is refused, naming that question; nothing is decided
    assert late["__typename"] == "QuestionNotPending", late
    assert (late["runId"], late["callId"], late["questionId"]) == (run_id, card["toolCallId"], card["questionId"])
    assert late["answered"] == {"kind": "APPROVED", "decidedBy": f"key:{X.name}"}
    assert LEDGER == []
    [still] = await pending_calls(x, SUPERVISOR, run_id)
    assert (still["questionId"], still["decision"]) == (shown_next["questionId"], None)

    # and the question Y is shown now is decided by naming it
    done = await decide(y, path, SUPERVISOR, run_id, card["toolCallId"], questionId=shown_next["questionId"], **kind)
    assert done["status"] == "COMPLETED", done
    expected = [{"orderId": 1042, "amount": 49.9}]
    if path != "declineToolCall":
        expected.append({"orderId": 1043, "amount": 120.0})
    assert expected == LEDGER

    # and a late decision once the run finished says so, rather than to list the run
    q = shown_next["questionId"]
    gone = await decide(x, path, SUPERVISOR, run_id, card["toolCallId"], questionId=q, **kind)
    assert gone["__typename"] == "QuestionNotPending", gone
    assert gone["message"].endswith("The run has finished: it waits on nothing."), gone
    assert "List the run" in late["message"], late


@pytest.mark.usefixtures("clean_test_agents")
async def test_a_later_answer_naming_only_the_call_never_answers_its_next_question(serve: Serve) -> None:
    served = await serve(keys=[X, Y], agents="tests.runtime.agents:TEST_AGENTS")
    x, y = served.client(X), served.client(Y)
    started = (await x.data(START, input={"agentId": "trip-agent", "prompt": "go"}))["startRun"]
    [asked] = started["run"]["toolCalls"]
    assert asked["suspendPayload"] == {"question": "Which city?"}

    # given X answered "Which city?" and the call now asks "C or F?"
    first = await decide(
        x, "resumeRun", "trip-agent", started["runId"], asked["toolCallId"], resumeData={"city": "Oslo"}
    )
    [next_question] = first["run"]["toolCalls"]
    assert next_question["suspendPayload"] == {"question": "C or F?"}

    # when Y answers the question Y was shown, naming the call only
    late = await decide(y, "resumeRun", "trip-agent", started["runId"], asked["toolCallId"], resumeData={"units": "C"})

    # then it is refused with X's answer, and "C or F?" still waits
    assert late["__typename"] == "ToolCallAlreadyDecided", late
    assert (late["decision"]["kind"], late["decision"]["decidedBy"]) == ("RESUMED", f"key:{X.name}")
    [still] = await pending_calls(x, "trip-agent", started["runId"])
    assert (still["questionId"], still["decision"]) == (next_question["questionId"], None)

    # and the same with no call named at all
    unnamed = await decide(y, "resumeRun", "trip-agent", started["runId"], None, resumeData={"units": "C"})
    assert unnamed["__typename"] == "ToolCallAlreadyDecided", unnamed


@pytest.mark.usefixtures("clean_test_agents")
@pytest.mark.parametrize("path", ["approveToolCall", "declineToolCall", "decideToolCalls"])
async def test_a_call_decided_in_an_earlier_turn_answers_its_decision_while_the_run_waits(
    serve: Serve, path: str
) -> None:
    served = await serve(agents="tests.runtime.agents:TEST_AGENTS")
    gql = served.client()
    started = (await gql.data(START, input={"agentId": "gated-agent", "prompt": "go"}))["startRun"]
    [turn_1] = started["run"]["toolCalls"]

    # given turn 1's call was declined, and the run waits on turn 2's call
    declined = await decide(gql, "declineToolCall", "gated-agent", started["runId"], turn_1["toolCallId"], reason="no")
    assert declined["status"] == "SUSPENDED", declined
    [turn_2] = declined["run"]["toolCalls"]
    assert turn_2["toolCallId"] != turn_1["toolCallId"]
    assert turn_2["args"] == {"value": 2}

    # when turn 1's call is decided again
    kind = {"kind": "DECLINED"} if path == "declineToolCall" else {}
    again = await decide(gql, path, "gated-agent", started["runId"], turn_1["toolCallId"], **kind)

    # then the answer names its decision, as it would once the run finished
    assert again["__typename"] == "ToolCallAlreadyDecided", again
    assert (again["toolCallId"], again["decision"]["kind"], again["decision"]["reason"]) == (
        turn_1["toolCallId"],
        "DECLINED",
        "no",
    )
    assert agents.GATED == []
    [still] = await pending_calls(gql, "gated-agent", started["runId"])
    assert (still["toolCallId"], still["decision"]) == (turn_2["toolCallId"], None)


def _asked(outcome: dict[str, Any]) -> tuple[str, list[str]]:
    """A start's run and the questions it asks: a replay of the start answers the same."""
    return outcome["runId"], [call["questionId"] for call in outcome["run"]["toolCalls"]]


async def test_ids_are_never_given_twice_after_retention(serve: Serve) -> None:
    served = await serve(
        sweep_interval=0.05,
        idempotency_key_retention=2.0,
        event_retention=2.0,
        subscription_lookback=1.0,
        tool_rules=[],
    )
    gql = served.client()
    start = {"agentId": REFUND, "prompt": "Please refund order 1042", "idempotencyKey": "K-order-1042"}
    first = (await gql.data(START, input=start))["startRun"]
    [call] = first["run"]["toolCalls"]
    approved = await decide(gql, "approveToolCall", REFUND, first["runId"], call["toolCallId"], idempotencyKey="A-1")
    assert approved["status"] == "COMPLETED", approved
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]

    # given both retentions passed: the run's events and both keys are gone
    deadline = time.monotonic() + 2.0 + scaled(30)
    while (await gql.data(EVENTS, agentId=REFUND, runId=first["runId"]))["runEvents"]:
        assert time.monotonic() < deadline, "the run's events were never deleted"
        await asyncio.sleep(0.1)
    while _asked(again := (await gql.data(START, input=start))["startRun"]) == _asked(first):  # a replay
        assert time.monotonic() < deadline, "the start's key never expired"
        await asyncio.sleep(0.1)
    assert again["status"] == "SUSPENDED", again

    # then the repeated keyed start is a new request: a new run, with ids of its own
    assert again["runId"] != first["runId"]
    [new_call] = again["run"]["toolCalls"]
    assert new_call["toolCallId"] != call["toolCallId"]

    # and the old approval repeated after its key expired never decides the new run
    repeat = await decide(gql, "approveToolCall", REFUND, first["runId"], call["toolCallId"], idempotencyKey="A-1")
    assert repeat["__typename"] in ("RunNotFound", "ToolCallAlreadyDecided"), repeat
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]
    [waiting] = await pending_calls(gql, REFUND, again["runId"])
    assert waiting["decision"] is None
