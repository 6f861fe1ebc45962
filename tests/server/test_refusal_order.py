"""Which refusal a decision naming a call and a question gets, over HTTP (docs/api.md "Errors").

A request is checked from the run down: the run, then the call it names, then the question, then
its state. A ``toolCallId`` no call of the run has, or one that does not ask the ``questionId``
named, is ``ToolCallNotFound``, even though that question waits: never ``QuestionNotPending``,
which says the run does not wait on the question. The same on every path that names a question
(the three mutations, an item of ``decideToolCalls``, ``claimReview``), on the memory, SQLite
and MongoDB stores; nothing is recorded.
"""

from __future__ import annotations

from typing import Any

import pytest

from runtime.demo import LEDGER

from .._graphql import REFUND, TWO_REFUNDS_PROMPT, WEATHER, WEATHER_PROMPT, GraphQLClient
from ..runtime import agents
from .conftest import Serve

UNKNOWN = "c_000000000000000000000000"

CALL = "toolCallId questionId toolName decision { kind }"
ANSWER = """
  __typename
  ... on UserError { code message }
  ... on ToolCallNotFound { runId missing: toolCallId }
  ... on QuestionNotPending { questionId }
"""
START = f"""
mutation($input: StartRunInput!) {{
  startRun(input: $input) {{ __typename ... on RunOutcome {{ runId status run {{ toolCalls {{ {CALL} }} }} }} }}
}}"""
DECIDED = f"{ANSWER} ... on RunOutcome {{ status }}"
DOCUMENTS = {
    "approveToolCall": f"mutation($input: ApproveToolCallInput!) {{ approveToolCall(input: $input) {{ {DECIDED} }} }}",
    "declineToolCall": f"mutation($input: DeclineToolCallInput!) {{ declineToolCall(input: $input) {{ {DECIDED} }} }}",
    "resumeRun": f"mutation($input: ResumeRunInput!) {{ resumeRun(input: $input) {{ {DECIDED} }} }}",
    "claimReview": f"mutation($input: ReviewClaimInput!) {{ claimReview(input: $input) {{ {ANSWER} }} }}",
}
BULK = f"""
mutation($input: DecideToolCallsInput!) {{ decideToolCalls(input: $input) {{ results {{ {DECIDED} }} }} }}
"""
RUN = f"""
query($agentId: ID!, $runId: ID!) {{ suspendedRun(agentId: $agentId, runId: $runId) {{ toolCalls {{ {CALL} }} }} }}
"""
EVENTS = "query($agentId: ID!, $runId: ID!) { runEvents(agentId: $agentId, runId: $runId) { type } }"

PATHS = ["approveToolCall", "declineToolCall", "resumeRun", "decideToolCalls", "claimReview"]


async def started(gql: GraphQLClient, path: str) -> tuple[str, str, list[dict[str, Any]]]:
    """A run whose calls ``path`` decides (a question for resume data for ``resumeRun``, two
    refunds to approve otherwise): its agent, its id and its pending calls."""
    agent, prompt = (WEATHER, WEATHER_PROMPT) if path == "resumeRun" else (REFUND, TWO_REFUNDS_PROMPT)
    outcome = (await gql.data(START, input={"agentId": agent, "prompt": prompt}))["startRun"]
    assert outcome["status"] == "SUSPENDED", outcome
    return agent, outcome["runId"], outcome["run"]["toolCalls"]


async def send(gql: GraphQLClient, path: str, agent: str, run_id: str, call_id: str, question: str) -> dict[str, Any]:
    """``path``'s answer to a request naming ``call_id`` and ``question`` of the run."""
    named = {"runId": run_id, "toolCallId": call_id, "questionId": question}
    if path == "decideToolCalls":
        bulk = {"agentId": agent, "decisions": [{**named, "kind": "APPROVED"}]}
        [answer] = (await gql.data(BULK, input=bulk))["decideToolCalls"]["results"]
        return dict(answer)
    fields = {"resumeData": {"name": "Paris"}} if path == "resumeRun" else {}
    answered: dict[str, Any] = (await gql.data(DOCUMENTS[path], input={"agentId": agent, **named, **fields}))[path]
    return answered


async def unchanged(gql: GraphQLClient, agent: str, run_id: str, calls: list[dict[str, Any]]) -> None:
    run = (await gql.data(RUN, agentId=agent, runId=run_id))["suspendedRun"]
    assert run is not None
    assert run["toolCalls"] == calls, run
    events = (await gql.data(EVENTS, agentId=agent, runId=run_id))["runEvents"]
    assert [e["type"] for e in events] == ["started", "suspended"], events
    assert LEDGER == []


@pytest.mark.parametrize("path", PATHS)
async def test_an_unknown_call_named_with_a_pending_question_is_tool_call_not_found(serve: Serve, path: str) -> None:
    gql = (await serve(tool_rules=[])).client()
    agent, run_id, calls = await started(gql, path)

    # when a call id the run never had is sent with the question its first call asks now
    answer = await send(gql, path, agent, run_id, UNKNOWN, calls[0]["questionId"])

    # then the call is not found (the question does wait), and nothing changed
    assert answer["__typename"] == "ToolCallNotFound", answer
    assert (answer["code"], answer["runId"], answer["missing"]) == ("TOOL_CALL_NOT_FOUND", run_id, UNKNOWN)
    assert UNKNOWN in answer["message"], answer
    await unchanged(gql, agent, run_id, calls)


@pytest.mark.parametrize("path", [p for p in PATHS if p != "resumeRun"])
async def test_another_calls_id_with_a_pending_question_is_tool_call_not_found(serve: Serve, path: str) -> None:
    gql = (await serve(tool_rules=[])).client()
    agent, run_id, calls = await started(gql, path)
    first, second = calls

    # when the second call's id is sent with the question the first call asks
    answer = await send(gql, path, agent, run_id, second["toolCallId"], first["questionId"])

    # then the call named asks no such question: not found, naming both; nothing changed
    assert answer["__typename"] == "ToolCallNotFound", answer
    assert (answer["runId"], answer["missing"]) == (run_id, second["toolCallId"])
    assert second["toolCallId"] in answer["message"], answer
    assert first["questionId"] in answer["message"], answer
    await unchanged(gql, agent, run_id, calls)


@pytest.mark.parametrize("path", ["approveToolCall", "claimReview"])
async def test_an_unknown_question_of_a_known_call_stays_question_not_pending(serve: Serve, path: str) -> None:
    gql = (await serve(tool_rules=[])).client()
    agent, run_id, calls = await started(gql, path)

    # when a known call is sent with a question nobody asked
    answer = await send(gql, path, agent, run_id, calls[0]["toolCallId"], "q_000000000000000000000000")

    # then the question is the one not pending, as before
    assert answer["__typename"] == "QuestionNotPending", answer
    await unchanged(gql, agent, run_id, calls)


@pytest.mark.usefixtures("clean_test_agents")
async def test_a_call_of_an_earlier_turn_is_checked_before_the_question(serve: Serve) -> None:
    gql = (await serve(agents="tests.runtime.agents:TEST_AGENTS", tool_rules=[])).client()
    agent = "gated-agent"
    outcome = (await gql.data(START, input={"agentId": agent, "prompt": "go"}))["startRun"]
    run_id, [turn_1] = outcome["runId"], outcome["run"]["toolCalls"]
    declined = await send(gql, "declineToolCall", agent, run_id, turn_1["toolCallId"], turn_1["questionId"])
    assert declined["__typename"] == "RunOutcome", declined
    [turn_2] = (await gql.data(RUN, agentId=agent, runId=run_id))["suspendedRun"]["toolCalls"]

    # when turn 1's call is named with the question turn 2's call asks now
    answer = await send(gql, "approveToolCall", agent, run_id, turn_1["toolCallId"], turn_2["questionId"])

    # then that call asks no such question: not found, naming both
    assert answer["__typename"] == "ToolCallNotFound", answer
    assert answer["missing"] == turn_1["toolCallId"], answer
    assert turn_2["questionId"] in answer["message"], answer

    # and an unknown call named with turn 1's answered question is not found either
    unknown = await send(gql, "approveToolCall", agent, run_id, UNKNOWN, turn_1["questionId"])
    assert (unknown["__typename"], unknown["missing"]) == ("ToolCallNotFound", UNKNOWN), unknown

    # while turn 1's call named with its own question says how it was answered
    late = await send(gql, "approveToolCall", agent, run_id, turn_1["toolCallId"], turn_1["questionId"])
    assert late["__typename"] == "QuestionNotPending", late
    [still] = (await gql.data(RUN, agentId=agent, runId=run_id))["suspendedRun"]["toolCalls"]
    assert (still["toolCallId"], still["decision"]) == (turn_2["toolCallId"], None)

    # and once the run finished, an unknown call is not found rather than its question not pending
    done = await send(gql, "approveToolCall", agent, run_id, turn_2["toolCallId"], turn_2["questionId"])
    assert done["__typename"] == "RunOutcome", done
    gone = await send(gql, "approveToolCall", agent, run_id, UNKNOWN, turn_2["questionId"])
    assert (gone["__typename"], gone["missing"]) == ("ToolCallNotFound", UNKNOWN), gone
    finished = await send(gql, "approveToolCall", agent, run_id, turn_2["toolCallId"], turn_2["questionId"])
    assert finished["__typename"] == "QuestionNotPending", finished
    assert agents.GATED == [2]
