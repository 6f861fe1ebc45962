"""Every pending call has an identity of runsgate's own, whatever ids the model made up (issue 24, part 1).

Over HTTP on the memory, SQLite and MongoDB stores, with agents whose scripted models reuse tool
call ids (``tests._collisions``): a plain call and an approval sharing one id in one turn, ids
that restart each turn, and pending calls sharing one id. A decision reaches exactly the call it
names (its ``toolCallId``, as listed); the model's own id stays visible as ``modelToolCallId``
and names a call only when exactly one pending call has it; the provider is sent the ids it made.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .. import _collisions
from .._collisions import DUP_TURN, RAN, RESTART_IDS, SEEN_IDS, TWIN_QUESTIONS, TWINS
from .._graphql import GraphQLClient, document
from .conftest import Serve

CALLS = document(
    """
query Calls($agentId: ID!, $runId: ID!) {
  suspendedRun(agentId: $agentId, runId: $runId) {
    runId
    toolCalls { toolCallId modelToolCallId questionId toolName args suspendPayload requiresApproval decision { kind } }
  }
}"""
)

AGENTS = "tests._collisions:AGENTS"


@pytest.fixture(autouse=True)
def _fresh_records() -> Iterator[None]:
    _collisions.reset()
    yield
    _collisions.reset()


async def _calls(gql: GraphQLClient, agent_id: str, run_id: str) -> list[dict[str, Any]]:
    run = (await gql.data(CALLS, agentId=agent_id, runId=run_id))["suspendedRun"]
    assert run is not None
    calls: list[dict[str, Any]] = run["toolCalls"]
    return calls


async def test_a_plain_call_and_an_approval_sharing_an_id_each_get_their_own_result(serve: Serve) -> None:
    # given a turn whose plain call and approval call both carry the model's id "dup"
    gql = (await serve(agents=AGENTS)).client()
    run = await gql.suspend(DUP_TURN, "go")
    [pending] = run["toolCalls"]
    assert pending["toolName"] == "act"

    # when the approval is approved
    outcome = await gql.approve(DUP_TURN, run["runId"], pending["toolCallId"])

    # then the approved tool ran, once, with its own arguments, and the model read both real results
    assert outcome["status"] == "COMPLETED", outcome
    assert RAN == [("note", {"text": "plain"}), ("act", {"value": 7})]
    assert outcome["output"] == "note:noted plain | act:acted 7"


async def test_ids_that_restart_each_turn_run_each_call_with_its_own_arguments(serve: Serve) -> None:
    # given turn 1's call_0, approved with edited arguments
    gql = (await serve(agents=AGENTS)).client()
    run = await gql.suspend(RESTART_IDS, "go")
    [first] = run["toolCalls"]
    again = await gql.approve(RESTART_IDS, run["runId"], first["toolCallId"], editedArgs={"value": 5})
    assert again["status"] == "SUSPENDED", again

    # when the model asks again under the same id call_0, with other arguments, approved as they are
    [second] = await _calls(gql, RESTART_IDS, run["runId"])
    assert second["args"] == {"value": 2}
    assert second["toolCallId"] != first["toolCallId"]
    done = await gql.approve(RESTART_IDS, run["runId"], second["toolCallId"])

    # then each call ran with its own arguments, once
    assert done["status"] == "COMPLETED", done
    assert RAN == [("act", {"value": 5}), ("act", {"value": 2})]
    assert done["output"] == "act:acted 5 | act:acted 2"


async def test_the_model_keeps_its_own_ids_and_each_call_meets_its_own_return(serve: Serve) -> None:
    # given ids that restart each turn, approved through both turns
    gql = (await serve(agents=AGENTS)).client()
    run = await gql.suspend(RESTART_IDS, "go")
    [first] = await _calls(gql, RESTART_IDS, run["runId"])
    assert first["modelToolCallId"] == "call_0"
    await gql.approve(RESTART_IDS, run["runId"], first["toolCallId"])
    [second] = await _calls(gql, RESTART_IDS, run["runId"])
    assert second["modelToolCallId"] == "call_0"
    await gql.approve(RESTART_IDS, run["runId"], second["toolCallId"])

    # then the provider was sent only the ids it made: each call and its return as a pair
    assert SEEN_IDS[-1] == ["call_0", "call_0", "call_0", "call_0"]


async def test_pending_calls_sharing_the_models_id_are_listed_apart(serve: Serve) -> None:
    gql = (await serve(agents=AGENTS)).client()
    run = await gql.suspend(TWINS, "go")
    calls = await _calls(gql, TWINS, run["runId"])
    assert [c["modelToolCallId"] for c in calls] == ["dup", "dup"]
    assert len({c["toolCallId"] for c in calls}) == 2
    assert [c["args"] for c in calls] == [{"value": 1}, {"value": 2}]


@pytest.mark.parametrize("kind", ["approve", "decline"])
async def test_a_model_id_several_pending_calls_share_is_ambiguous_and_changes_nothing(serve: Serve, kind: str) -> None:
    # given two pending approvals the model gave the same id
    gql = (await serve(agents=AGENTS)).client()
    run = await gql.suspend(TWINS, "go")
    before = await _calls(gql, TWINS, run["runId"])

    # when a decision names that id
    decide = gql.approve if kind == "approve" else gql.decline
    refused = await decide(TWINS, run["runId"], "dup")

    # then it is refused as ambiguous, listing both calls, and nothing changed
    assert refused["__typename"] == "AmbiguousToolCall", refused
    assert sorted(refused["toolCallIds"]) == sorted(c["toolCallId"] for c in before)
    assert await _calls(gql, TWINS, run["runId"]) == before
    assert RAN == []

    # and each is decided by its own toolCallId, running with its own arguments
    for call in before:
        await gql.approve(TWINS, run["runId"], call["toolCallId"])
    assert sorted(value for _, args in RAN for value in args.values()) == [1, 2]


async def test_a_resume_naming_a_model_id_several_pending_calls_share_is_ambiguous(serve: Serve) -> None:
    # given two calls waiting for data that the model gave the same id
    gql = (await serve(agents=AGENTS)).client()
    run = await gql.suspend(TWIN_QUESTIONS, "go")
    before = await _calls(gql, TWIN_QUESTIONS, run["runId"])
    assert [c["modelToolCallId"] for c in before] == ["q", "q"]

    # when resume data names that id
    refused = await gql.resume(TWIN_QUESTIONS, run["runId"], "yes", toolCallId="q")

    # then it is ambiguous and nothing changed
    assert refused["__typename"] == "AmbiguousToolCall", refused
    assert await _calls(gql, TWIN_QUESTIONS, run["runId"]) == before

    # and each answer reaches its own call
    answers = {"about a?": "alpha", "about b?": "beta"}
    for call in before:
        answer = answers[call["suspendPayload"]["question"]]
        await gql.resume(TWIN_QUESTIONS, run["runId"], answer, toolCallId=call["toolCallId"])
    assert sorted((args["topic"], args["answer"]) for _, args in RAN) == [("a", "alpha"), ("b", "beta")]


async def test_a_model_id_one_pending_call_has_names_that_call(serve: Serve) -> None:
    # given ids restarting each turn: turn 2's call_0 is the only pending call with that model id
    gql = (await serve(agents=AGENTS)).client()
    run = await gql.suspend(RESTART_IDS, "go")
    await gql.approve(RESTART_IDS, run["runId"], run["toolCalls"][0]["toolCallId"])

    # when a decision names the model's id
    done = await gql.approve(RESTART_IDS, run["runId"], "call_0")

    # then it decides that call
    assert done["status"] == "COMPLETED", done
    assert RAN == [("act", {"value": 1}), ("act", {"value": 2})]
