"""Runs stored by the version before call identities (schema version 2) are decided after the upgrade (issue 24).

``tests/data/v2`` holds a SQLite file and a MongoDB database (Extended JSON) written by commit
8e4a4dd with ``tests/data/v2/make.py``: a refund waiting for approval, a trip-agent call answered
once and waiting for its second answer, and a supervisor waiting on the refund sub-run it
delegated. Over HTTP, each is decided by today's server: the model's ids stand as the calls'
identities, the answer given before the upgrade is replayed, and the supervisor finds the sub-run
it started (whose id derives from the model's id), not a second one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runtime.demo import LEDGER

from .._graphql import GraphQLClient, document
from ._stored_data import served_over
from .conftest import Served

CALLS = document(
    """
query Calls($agentId: ID!, $runId: ID!) {
  suspendedRun(agentId: $agentId, runId: $runId) {
    runId parentRunId toolCalls { toolCallId modelToolCallId questionId toolName args suspendPayload }
  }
}"""
)


@pytest.fixture(params=["sqlite", pytest.param("mongo", marks=pytest.mark.mongo)])
async def upgraded(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Served, dict[str, str]]]:
    """Today's server over a copy of the version-2 store, and the ids of its runs."""
    async with served_over(request, tmp_path, "v2") as upgraded:
        yield upgraded


@pytest.fixture(autouse=True)
def _empty_ledger() -> None:
    LEDGER.clear()


async def _sub_runs(gql: GraphQLClient, supervisor_run_id: str) -> list[dict[str, Any]]:
    edges = (await gql.suspended_runs("refund-agent"))["edges"]
    return [edge["node"] for edge in edges if edge["node"]["parentRunId"] == supervisor_run_id]


async def _calls(gql: GraphQLClient, agent_id: str, run_id: str) -> list[dict[str, Any]]:
    run = (await gql.data(CALLS, agentId=agent_id, runId=run_id))["suspendedRun"]
    assert run is not None, (agent_id, run_id)
    calls: list[dict[str, Any]] = run["toolCalls"]
    return calls


async def test_a_version_2_approval_is_decided(upgraded: tuple[Served, dict[str, str]]) -> None:
    served, ids = upgraded
    gql = served.client()
    [call] = await _calls(gql, "refund-agent", ids["refund"])
    assert call["toolCallId"] == call["modelToolCallId"]  # the model's id stands as its identity

    outcome = await gql.approve("refund-agent", ids["refund"], call["toolCallId"])

    assert outcome["status"] == "COMPLETED", outcome
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]


async def test_a_version_2_call_with_answers_gets_its_next_answer(upgraded: tuple[Served, dict[str, str]]) -> None:
    served, ids = upgraded
    gql = served.client()
    [call] = await _calls(gql, "trip-agent", ids["trip"])
    assert call["suspendPayload"] == {"question": "C or F?"}

    # an answer naming only the call names its first question, answered before the upgrade
    first = await gql.resume("trip-agent", ids["trip"], {"units": "C"}, toolCallId=call["toolCallId"])
    assert first["__typename"] == "ToolCallAlreadyDecided", first
    assert first["decision"]["kind"] == "RESUMED"

    outcome = await gql.resume(
        "trip-agent", ids["trip"], {"units": "C"}, toolCallId=call["toolCallId"], questionId=call["questionId"]
    )

    assert outcome["status"] == "COMPLETED", outcome
    assert "Paris" in outcome["output"], outcome["output"]
    assert "'C'" in outcome["output"], outcome["output"]


async def test_a_version_2_supervisor_finds_its_sub_run(upgraded: tuple[Served, dict[str, str]]) -> None:
    served, ids = upgraded
    gql = served.client()
    [call] = await _calls(gql, "support-supervisor", ids["supervisor"])
    inner = await _sub_runs(gql, ids["supervisor"])
    assert len(inner) == 1

    outcome = await gql.approve("support-supervisor", ids["supervisor"], call["toolCallId"])

    # the refund ran once, in the sub-run stored before the upgrade, which finished
    assert outcome["status"] == "COMPLETED", outcome
    assert LEDGER == [{"orderId": 1043, "amount": 120.0}]
    events = await gql.run_events("refund-agent", inner[0]["runId"])
    assert [e["type"] for e in events][-1] == "completed"
    assert [e["type"] for e in events].count("started") == 1
    assert await _sub_runs(gql, ids["supervisor"]) == []
