"""GraphQL over HTTP for the multi-process tests: queries, mutations and their selections."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, cast

import httpx

AGENT = "gate-agent"

# -- GraphQL ----------------------------------------------------------------------------------
DECISION = "kind decidedAt decidedBy reason"
RUN_FIELDS = f"""
  id runId agentId status threadId resourceId parentRunId createdAt suspendedAt
  toolCalls {{ toolCallId toolName args requiresApproval suspendPayload resumeSchema
               decision {{ {DECISION} }} }}
  lastError {{ type message at }}
  events {{ id type at by data }}
"""
RESULT = f"""
  __typename
  ... on RunOutcome {{ runId agentId status output error run {{ {RUN_FIELDS} }} }}
  ... on UserError {{ code message }}
  ... on ToolCallAlreadyDecided {{ runId toolCallId decision {{ {DECISION} }} }}
  ... on IdempotencyKeyReused {{ idempotencyKey }}
"""
START_RESULT = f"""
  __typename
  ... on RunOutcome {{ runId agentId status output error run {{ {RUN_FIELDS} }} }}
  ... on UserError {{ code message }}
"""


async def gql(client: httpx.AsyncClient, query: str, **variables: Any) -> dict[str, Any]:
    response = await client.post("/graphql", json={"query": query, "variables": variables})
    assert response.status_code == 200, response.text
    body = response.json()
    assert "errors" not in body, body
    return cast(dict[str, Any], body["data"])


async def start_run(
    client: httpx.AsyncClient,
    token: str,
    calls: int,
    delay: float = 0.0,
    thread: str | None = None,
    agent: str = AGENT,
) -> dict[str, Any]:
    data = await gql(
        client,
        f"mutation($input: StartRunInput!) {{ startRun(input: $input) {{ {START_RESULT} }} }}",
        input={"agentId": agent, "prompt": f"{token} {calls} {delay}", "threadId": thread},
    )
    outcome: dict[str, Any] = data["startRun"]
    assert outcome["__typename"] == "RunOutcome", outcome
    assert outcome["status"] == "SUSPENDED", outcome
    assert len(outcome["run"]["toolCalls"]) == calls
    return outcome


async def decide(
    client: httpx.AsyncClient,
    kind: str,
    run_id: str,
    tool_call_id: str,
    *,
    key: str | None = None,
    reason: str | None = None,
    agent: str = AGENT,
) -> dict[str, Any]:
    inputs: dict[str, Any] = {"agentId": agent, "runId": run_id, "toolCallId": tool_call_id}
    if key is not None:
        inputs["idempotencyKey"] = key
    if kind == "approve":
        mutation, input_type = "approveToolCall", "ApproveToolCallInput"
    else:
        mutation, input_type = "declineToolCall", "DeclineToolCallInput"
        inputs["reason"] = reason
    data = await gql(
        client,
        f"mutation($input: {input_type}!) {{ {mutation}(input: $input) {{ {RESULT} }} }}",
        input=inputs,
    )
    return cast(dict[str, Any], data[mutation])


async def run_events(client: httpx.AsyncClient, run_id: str, agent: str = AGENT) -> list[dict[str, Any]]:
    data = await gql(
        client,
        "query($a: ID!, $r: ID!) { runEvents(agentId: $a, runId: $r) { id type at by data } }",
        a=agent,
        r=run_id,
    )
    return cast(list[dict[str, Any]], data["runEvents"])


async def suspended_run(client: httpx.AsyncClient, run_id: str, agent: str = AGENT) -> dict[str, Any] | None:
    data = await gql(
        client,
        f"query($a: ID!, $r: ID!) {{ suspendedRun(agentId: $a, runId: $r) {{ {RUN_FIELDS} }} }}",
        a=agent,
        r=run_id,
    )
    return cast(dict[str, Any] | None, data["suspendedRun"])


async def listing(client: httpx.AsyncClient, thread: str | None = None, agent: str = AGENT) -> dict[str, Any]:
    data = await gql(
        client,
        f"""query($a: ID!, $f: SuspendedRunFilter) {{
              suspendedRuns(agentId: $a, filter: $f) {{
                totalCount
                pageInfo {{ hasNextPage hasPreviousPage startCursor endCursor }}
                edges {{ cursor node {{ {RUN_FIELDS} }} }}
                nodes {{ runId }}
              }} }}""",
        a=agent,
        f={"threadId": thread} if thread else None,
    )
    return cast(dict[str, Any], data["suspendedRuns"])


def token() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


def when(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def assert_gone_everywhere(clients: tuple[httpx.AsyncClient, httpx.AsyncClient], run_id: str) -> None:
    for client in clients:
        assert await suspended_run(client, run_id) is None
        assert run_id not in [node["runId"] for node in (await listing(client))["nodes"]]


def without_events(outcome: dict[str, Any]) -> dict[str, Any]:
    """The outcome without ``run.events`` (resolved live from the event log, not replayed)."""
    if outcome.get("run") is None:
        return outcome
    return {**outcome, "run": {k: v for k, v in outcome["run"].items() if k != "events"}}


def split_results(results: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    winners = [r for r in results if r["__typename"] == "RunOutcome"]
    losers = [r for r in results if r["__typename"] != "RunOutcome"]
    return winners, losers
