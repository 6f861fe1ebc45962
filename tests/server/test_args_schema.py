"""``SuspendedToolCall.argsSchema`` over HTTP: the tool's parameters JSON Schema for an approval
of a function tool (pydantic-ai's ``parameters_json_schema``), null for a call waiting for resume
data and for a supervisor's delegated call; the same from ``startRun``, ``suspendedRun`` and the
``suspendedRuns`` listing."""

from __future__ import annotations

from typing import Any

from .._graphql import REFUND, REFUND_PROMPT, SUPERVISOR, WEATHER, WEATHER_PROMPT, GraphQLClient

CALLS = "toolCalls { toolName requiresApproval argsSchema }"
START = f"""
mutation($input: StartRunInput!) {{
  startRun(input: $input) {{ __typename ... on RunOutcome {{ runId status run {{ {CALLS} }} }} }}
}}"""
RUN = f"query($agentId: ID!, $runId: ID!) {{ suspendedRun(agentId: $agentId, runId: $runId) {{ {CALLS} }} }}"
LIST = f"query($agentId: ID!) {{ suspendedRuns(agentId: $agentId, first: 10) {{ nodes {{ runId {CALLS} }} }} }}"


async def _calls(gql: GraphQLClient, agent_id: str, prompt: str) -> list[list[dict[str, Any]]]:
    """The run's calls as ``startRun``, ``suspendedRun`` and ``suspendedRuns`` list them."""
    started = (await gql.data(START, input={"agentId": agent_id, "prompt": prompt}))["startRun"]
    assert started["status"] == "SUSPENDED", started
    run_id = started["runId"]
    one = (await gql.data(RUN, agentId=agent_id, runId=run_id))["suspendedRun"]
    listed = [n for n in (await gql.data(LIST, agentId=agent_id))["suspendedRuns"]["nodes"] if n["runId"] == run_id]
    return [started["run"]["toolCalls"], one["toolCalls"], listed[0]["toolCalls"]]


async def test_a_pending_refund_approval_publishes_the_tools_parameters_schema(gql: GraphQLClient) -> None:
    # given a refund waiting for approval
    views = await _calls(gql, REFUND, REFUND_PROMPT)

    # then every view gives issue_refund's schema: an object with order_id and amount, both required
    for calls in views:
        assert [(c["toolName"], c["requiresApproval"]) for c in calls] == [("issue_refund", True)]
        schema = calls[0]["argsSchema"]
        assert schema["type"] == "object"
        assert {"order_id", "amount"} <= set(schema["properties"])
        assert schema["properties"]["amount"]["type"] == "number"
        assert set(schema["required"]) >= {"order_id", "amount"}
    assert views[0] == views[1] == views[2]


async def test_a_call_waiting_for_resume_data_has_no_args_schema(gql: GraphQLClient) -> None:
    # given the weather agent's call waiting for resume data
    for calls in await _calls(gql, WEATHER, WEATHER_PROMPT):
        # then it has no arguments schema
        assert calls, calls
        assert all(not c["requiresApproval"] and c["argsSchema"] is None for c in calls), calls


async def test_a_supervisors_delegated_call_has_no_args_schema(gql: GraphQLClient) -> None:
    # given a supervisor whose call stands for its sub-agent's refund approval
    for calls in await _calls(gql, SUPERVISOR, REFUND_PROMPT):
        # then the supervisor's call has none (its arguments are the supervisor tool's, not the refund's)
        assert calls, calls
        assert all(c["argsSchema"] is None for c in calls), calls
