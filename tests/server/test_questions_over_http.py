"""Questions and approvals over HTTP (issue 14 parts 1, 2 and 6), with test agents plugged in
through ``RUNSGATE_AGENTS``: ``questionId`` and ``approvalMetadata`` are listed, ``resumeRun``
takes ``questionId`` and refuses a late answer with ``QuestionNotPending``, and a resume never
approves.
"""

from __future__ import annotations

from typing import Any

import pytest

from server.settings import Settings

from .._graphql import GraphQLClient
from ..runtime import agents

CALL = "toolCallId toolName requiresApproval suspendPayload resumeSchema questionId approvalMetadata decision { kind }"

START = f"""
mutation($input: StartRunInput!) {{
  startRun(input: $input) {{ __typename ... on RunOutcome {{ runId status run {{ toolCalls {{ {CALL} }} }} }} }}
}}"""

DECIDE = """
mutation($input: {input}!) {{
  {field}(input: $input) {{
    __typename
    ... on UserError {{ code message }}
    ... on QuestionNotPending {{ runId toolCallId questionId }}
    ... on RunOutcome {{ status output run {{ toolCalls {{ {call} }} }} }}
  }}
}}"""

RESUME = DECIDE.format(input="ResumeRunInput", field="resumeRun", call=CALL)
APPROVE = DECIDE.format(input="ApproveToolCallInput", field="approveToolCall", call=CALL)

LISTED = f"""
query($agentId: ID!) {{ suspendedRuns(agentId: $agentId) {{ nodes {{ runId toolCalls {{ {CALL} }} }} }} }}
"""


pytestmark = pytest.mark.usefixtures("clean_test_agents")


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The HTTP tests' settings, serving the runtime tests' agents instead of the demo ones."""
    return settings.model_copy(update={"agents": "tests.runtime.agents:TEST_AGENTS"})


async def _start(gql: GraphQLClient, agent_id: str) -> tuple[str, dict[str, Any]]:
    started = (await gql.data(START, input={"agentId": agent_id, "prompt": "go"}))["startRun"]
    assert started["status"] == "SUSPENDED", started
    (call,) = started["run"]["toolCalls"]
    return started["runId"], call


async def test_each_question_is_listed_with_its_own_id_and_a_late_answer_is_refused(gql: GraphQLClient) -> None:
    # given a trip run asking "Which city?"
    run_id, first = await _start(gql, "trip-agent")
    assert first["suspendPayload"] == {"question": "Which city?"}

    # when it is answered, naming the question
    answered = (
        await gql.data(
            RESUME,
            input={
                "agentId": "trip-agent",
                "runId": run_id,
                "resumeData": {"city": "Paris"},
                "questionId": first["questionId"],
            },
        )
    )["resumeRun"]

    # then the same call asks its second question, with a new id, and is listed so
    assert answered["status"] == "SUSPENDED"
    (second,) = answered["run"]["toolCalls"]
    assert second["toolCallId"] == first["toolCallId"]
    assert second["questionId"] != first["questionId"]
    assert (second["suspendPayload"], second["resumeSchema"]) == ({"question": "C or F?"}, agents.UNITS_SCHEMA)
    listed = (await gql.data(LISTED, agentId="trip-agent"))["suspendedRuns"]["nodes"]
    assert listed == [{"runId": run_id, "toolCalls": [second]}]

    # and the same answer sent again (late, or twice) is refused, naming the question
    late = (
        await gql.data(
            RESUME,
            input={
                "agentId": "trip-agent",
                "runId": run_id,
                "resumeData": {"units": "C"},
                "questionId": first["questionId"],
            },
        )
    )["resumeRun"]
    assert late["__typename"] == "QuestionNotPending"
    assert (late["code"], late["runId"], late["questionId"]) == ("QUESTION_NOT_PENDING", run_id, first["questionId"])
    assert (await gql.data(LISTED, agentId="trip-agent"))["suspendedRuns"]["nodes"] == listed

    # when the second question is answered, each answer reached its own question
    done = (
        await gql.data(
            RESUME,
            input={
                "agentId": "trip-agent",
                "runId": run_id,
                "resumeData": {"units": "F"},
                "questionId": second["questionId"],
            },
        )
    )["resumeRun"]
    assert done["status"] == "COMPLETED"
    assert done["output"] == "plan_trip: {'city': 'Paris', 'units': {'units': 'F'}}"


async def test_a_resume_never_approves_and_the_approval_shows_the_tools_metadata(gql: GraphQLClient) -> None:
    run_id, asked = await _start(gql, "payment-agent")

    answered = (await gql.data(RESUME, input={"agentId": "payment-agent", "runId": run_id, "resumeData": 1_000_000}))[
        "resumeRun"
    ]

    assert answered["status"] == "SUSPENDED"
    assert agents.PAID == []
    (approval,) = answered["run"]["toolCalls"]
    assert approval["toolCallId"] == asked["toolCallId"]
    assert approval["requiresApproval"] is True
    assert approval["suspendPayload"] is None
    assert approval["approvalMetadata"] == {"payee": "ACME", "amount": 1_000_000, "risk": "high"}

    done = (
        await gql.data(
            APPROVE,
            input={
                "agentId": "payment-agent",
                "runId": run_id,
                "toolCallId": approval["toolCallId"],
                "questionId": approval["questionId"],
            },
        )
    )["approveToolCall"]
    assert done["status"] == "COMPLETED"
    assert agents.PAID == [1_000_000]
