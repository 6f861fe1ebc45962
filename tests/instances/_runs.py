"""Runs of ``gate-agent`` (``tests.instances.agents``) over the shared GraphQL client, for the
multi-process tests: start, decide and read them, with the run's last error and events."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from .._graphql import DETAILED_RESULTS, DETAILED_SUSPENDED_RUN, DETAILED_SUSPENDED_RUNS, GraphQLClient

AGENT = "gate-agent"


async def start_run(
    client: GraphQLClient,
    token: str,
    calls: int,
    delay: float = 0.0,
    thread: str | None = None,
    agent: str = AGENT,
) -> dict[str, Any]:
    """Start a run of ``calls`` approval calls that sleep ``delay`` seconds; its suspended outcome."""
    data = await client.data(
        DETAILED_RESULTS["startRun"],
        input={"agentId": agent, "prompt": f"{token} {calls} {delay}", "threadId": thread},
    )
    outcome: dict[str, Any] = data["startRun"]
    assert outcome["__typename"] == "RunOutcome", outcome
    assert outcome["status"] == "SUSPENDED", outcome
    assert len(outcome["run"]["toolCalls"]) == calls
    return outcome


async def decide(
    client: GraphQLClient,
    kind: str,
    run_id: str,
    tool_call_id: str,
    *,
    key: str | None = None,
    reason: str | None = None,
    agent: str = AGENT,
    wait_for: str | None = None,
) -> dict[str, Any]:
    """``approveToolCall`` (``kind`` "approve") or ``declineToolCall``: the union member returned
    (``wait_for``: the input's ``waitFor``, omitted when ``None``)."""
    inputs: dict[str, Any] = {"agentId": agent, "runId": run_id, "toolCallId": tool_call_id}
    if key is not None:
        inputs["idempotencyKey"] = key
    if wait_for is not None:
        inputs["waitFor"] = wait_for
    if kind == "approve":
        mutation = "approveToolCall"
    else:
        mutation = "declineToolCall"
        inputs["reason"] = reason
    result: dict[str, Any] = (await client.data(DETAILED_RESULTS[mutation], input=inputs))[mutation]
    return result


async def run_events(client: GraphQLClient, run_id: str, agent: str = AGENT) -> list[dict[str, Any]]:
    return await client.run_events(agent, run_id)


async def suspended_run(client: GraphQLClient, run_id: str, agent: str = AGENT) -> dict[str, Any] | None:
    run: dict[str, Any] | None = (await client.data(DETAILED_SUSPENDED_RUN, agentId=agent, runId=run_id))[
        "suspendedRun"
    ]
    return run


async def listing(client: GraphQLClient, thread: str | None = None, agent: str = AGENT) -> dict[str, Any]:
    filter_ = {"threadId": thread} if thread else None
    connection: dict[str, Any] = (await client.data(DETAILED_SUSPENDED_RUNS, agentId=agent, filter=filter_))[
        "suspendedRuns"
    ]
    return connection


def token() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


def when(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def assert_gone_everywhere(clients: tuple[GraphQLClient, GraphQLClient], run_id: str) -> None:
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
