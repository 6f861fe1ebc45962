"""``startRun`` over HTTP for each demo agent: what a suspended run looks like
(docs/api.md "Listing suspended runs")."""

from __future__ import annotations

from datetime import datetime

import pytest

from .._graphql import (
    REFUND,
    REFUND_PROMPT,
    START_RUN,
    SUPERVISOR,
    WEATHER,
    WEATHER_PROMPT,
    GraphQLClient,
)


def _utc(value: str) -> datetime:
    assert value.endswith("Z"), value
    return datetime.fromisoformat(value)


async def test_refund_run_suspends_on_one_issue_refund_call_waiting_for_approval(gql: GraphQLClient) -> None:
    # given the refund agent
    # when a refund is asked for, with a memory thread and resource
    outcome = await gql.start_run(REFUND, REFUND_PROMPT, threadId="thread-1", resourceId="customer-7")

    # then the run is suspended and stored, waiting on one issue_refund approval
    assert outcome["status"] == "SUSPENDED"
    assert outcome["agentId"] == REFUND
    assert outcome["output"] is None
    assert outcome["error"] is None
    run = outcome["run"]
    assert run["runId"] == outcome["runId"]
    assert run["agentId"] == REFUND
    assert run["status"] == "SUSPENDED"
    assert (run["threadId"], run["resourceId"], run["parentRunId"]) == ("thread-1", "customer-7", None)
    assert _utc(run["createdAt"]) <= _utc(run["suspendedAt"])
    [call] = run["toolCalls"]
    assert call["toolCallId"]
    assert call["toolName"] == "issue_refund"
    assert call["args"] == {"order_id": 1042, "amount": 49.9}
    assert call["requiresApproval"] is True
    assert call["decision"] is None
    # and it is what the listing and the lookup return
    assert await gql.suspended_run(REFUND, run["runId"]) == run
    assert (await gql.suspended_runs(REFUND))["nodes"] == [{"runId": run["runId"]}]


async def test_weather_run_suspends_on_ask_city_with_its_question_and_resume_schema(
    gql: GraphQLClient,
) -> None:
    # given the weather agent
    # when the prompt names no city
    run = await gql.suspend(WEATHER, WEATHER_PROMPT)

    # then the run waits on ask_city's suspend(): the question, and a schema asking for a city name
    assert run["agentId"] == WEATHER
    [call] = run["toolCalls"]
    assert call["toolCallId"]
    assert call["toolName"] == "ask_city"
    assert call["requiresApproval"] is False
    assert call["suspendPayload"] == {"question": "Which city do you want the weather for?"}
    schema = call["resumeSchema"]
    assert schema["type"] == "object"
    assert schema["required"] == ["name"]
    assert schema["properties"]["name"]["type"] == "string"
    assert call["decision"] is None
    assert await gql.suspended_run(WEATHER, run["runId"]) == run


async def test_supervisor_run_shows_the_sub_agents_approval_and_the_inner_run_is_listed_only_under_it(
    gql: GraphQLClient,
) -> None:
    # given the supervisor, which delegates refunds to refund-agent
    # when it is asked for a refund
    outer = await gql.suspend(SUPERVISOR, REFUND_PROMPT)

    # then its own run lists the refund agent's issue_refund call with its args
    [call] = outer["toolCalls"]
    assert call["toolName"] == "issue_refund"
    assert call["args"] == {"order_id": 1042, "amount": 49.9}
    assert call["requiresApproval"] is True
    assert outer["parentRunId"] is None
    # and the supervisor lists its outer run only
    assert await gql.listed_ids(SUPERVISOR) == [outer["runId"]]
    # and the inner run is listed under refund-agent, pointing at the outer run
    inner_runs = (await gql.suspended_runs(REFUND))["edges"]
    assert len(inner_runs) == 1
    inner = inner_runs[0]["node"]
    assert inner["runId"] != outer["runId"]
    assert inner["agentId"] == REFUND
    assert inner["parentRunId"] == outer["runId"]
    assert [(c["toolName"], c["args"]) for c in inner["toolCalls"]] == [
        ("issue_refund", {"order_id": 1042, "amount": 49.9})
    ]
    # and neither agent sees the other's run by id
    assert await gql.suspended_run(SUPERVISOR, inner["runId"]) is None
    assert await gql.suspended_run(REFUND, outer["runId"]) is None


async def test_a_run_that_finishes_is_completed_and_stores_nothing(gql: GraphQLClient) -> None:
    # given the weather agent
    # when the prompt names a city, so no question is needed
    outcome = await gql.start_run(WEATHER, "What's the weather in Paris?")

    # then the run completes with the forecast, and nothing is listed
    assert outcome["status"] == "COMPLETED"
    assert "Paris" in outcome["output"]
    assert outcome["run"] is None
    assert await gql.suspended_run(WEATHER, outcome["runId"]) is None
    assert (await gql.suspended_runs(WEATHER))["totalCount"] == 0


async def test_start_run_of_an_unknown_agent_is_agent_not_found(gql: GraphQLClient) -> None:
    # given no agent "nope"
    # when a run of it is started
    result = (await gql.data(START_RUN, input={"agentId": "nope", "prompt": REFUND_PROMPT}))["startRun"]

    # then the result is AgentNotFound naming it
    assert result["__typename"] == "AgentNotFound"
    assert result["code"] == "AGENT_NOT_FOUND"
    assert result["agentId"] == "nope"
    # and the message lists the agents the caller may use
    known = "refund-agent, support-supervisor, weather-agent"
    assert result["message"] == f"No agent is registered with id 'nope'; known agents: {known}."


@pytest.mark.parametrize("prompt", ["", "  \n\t"])
async def test_an_empty_prompt_is_bad_user_input_and_starts_nothing(gql: GraphQLClient, prompt: str) -> None:
    body = await gql.execute(START_RUN, input={"agentId": REFUND, "prompt": prompt})

    assert body["data"] is None, body
    [error] = body["errors"]
    assert (error["extensions"]["code"], error["extensions"]["argument"]) == ("BAD_USER_INPUT", "input.prompt")
    assert error["message"] == "`input.prompt` is empty: give the agent something to do"
    assert (await gql.suspended_runs(REFUND))["totalCount"] == 0
