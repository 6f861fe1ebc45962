"""Runs stored at schema version 3 before the stores were split into packages (issue 27) are
listed and decided by today's server.

``tests/data/v3`` holds a SQLite file and a MongoDB database (Extended JSON) written by commit
aee9d3c with ``tests/data/v3/make.py``: a refund waiting for approval, a call answered once, a
supervisor waiting on its delegated sub-run, two refunds of which one has a deadline, and a
refund needing two approvers approved once. Over HTTP each is listed with what it stored, then
approved, declined or answered, and runs to its end.
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

RUN = document(
    """
query Run($agentId: ID!, $runId: ID!) {
  suspendedRun(agentId: $agentId, runId: $runId) {
    runId parentRunId threadId expiresAt
    toolCalls {
      toolCallId modelToolCallId questionId toolName args suspendPayload expiresAt
      approvalsRequired approvals { decidedBy }
      decision { kind }
    }
  }
}"""
)
LIST = document(
    """
query List($agentId: ID!, $filter: SuspendedRunFilter) {
  suspendedRuns(agentId: $agentId, filter: $filter) { totalCount nodes { runId parentRunId } }
}"""
)


@pytest.fixture(params=["sqlite", pytest.param("mongo", marks=pytest.mark.mongo)])
async def upgraded(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Served, dict[str, str]]]:
    """Today's server over a copy of the version-3 store, and the ids of its runs."""
    async with served_over(request, tmp_path, "v3") as upgraded:
        yield upgraded


@pytest.fixture(autouse=True)
def _empty_ledger() -> None:
    LEDGER.clear()


async def _run(gql: GraphQLClient, agent_id: str, run_id: str) -> dict[str, Any]:
    run: dict[str, Any] | None = (await gql.data(RUN, agentId=agent_id, runId=run_id))["suspendedRun"]
    assert run is not None, (agent_id, run_id)
    return run


async def _listed(gql: GraphQLClient, agent_id: str, **run_filter: Any) -> dict[str, Any]:
    listed: dict[str, Any] = (await gql.data(LIST, agentId=agent_id, filter=run_filter))["suspendedRuns"]
    assert listed["totalCount"] == len(listed["nodes"])
    return listed


async def test_the_version_3_runs_are_listed_with_what_they_stored(upgraded: tuple[Served, dict[str, str]]) -> None:
    served, ids = upgraded
    gql = served.client()

    refunds = await _listed(gql, "refund-agent", threadId="v3")
    expiring = await _listed(gql, "refund-agent", expiresBefore="2200-01-01T00:00:00Z")

    # the refund-agent's three runs and the supervisor's sub-run, newest first; two have deadlines
    [sub_run] = [n["runId"] for n in refunds["nodes"] if n["parentRunId"] == ids["supervisor"]]
    assert [n["runId"] for n in refunds["nodes"]] == [ids["two_person"], ids["deadline"], sub_run, ids["refund"]]
    assert [n["runId"] for n in expiring["nodes"]] == [ids["two_person"], ids["deadline"]]
    assert (await _listed(gql, "trip-agent"))["nodes"] == [{"runId": ids["trip"], "parentRunId": None}]
    assert (await _listed(gql, "support-supervisor"))["nodes"] == [{"runId": ids["supervisor"], "parentRunId": None}]
    # and every call keeps its own identity, apart from the model's
    for agent_id, run_id in [("refund-agent", ids["refund"]), ("trip-agent", ids["trip"])]:
        [call] = (await _run(gql, agent_id, run_id))["toolCalls"]
        assert call["toolCallId"] != call["modelToolCallId"]
        assert call["decision"] is None


@pytest.mark.parametrize("named", ["the call", "its question"])
async def test_a_version_3_approval_is_decided(upgraded: tuple[Served, dict[str, str]], named: str) -> None:
    served, ids = upgraded
    gql = served.client()
    run = await _run(gql, "refund-agent", ids["refund"])
    [call] = run["toolCalls"]
    assert (run["expiresAt"], call["expiresAt"], call["approvalsRequired"]) == (None, None, 1)
    question = {"questionId": call["questionId"]} if named == "its question" else {}

    outcome = await gql.approve("refund-agent", ids["refund"], call["toolCallId"], **question)

    assert outcome["status"] == "COMPLETED", outcome
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]
    assert await gql.suspended_run("refund-agent", ids["refund"]) is None


async def test_a_version_3_call_answered_once_gets_its_next_answer(upgraded: tuple[Served, dict[str, str]]) -> None:
    served, ids = upgraded
    gql = served.client()
    [call] = (await _run(gql, "trip-agent", ids["trip"]))["toolCalls"]
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


@pytest.mark.parametrize("named", ["the call", "its question"])
async def test_a_version_3_supervisor_continues_its_sub_run(
    upgraded: tuple[Served, dict[str, str]], named: str
) -> None:
    served, ids = upgraded
    gql = served.client()
    [call] = (await _run(gql, "support-supervisor", ids["supervisor"]))["toolCalls"]
    [sub_run] = [
        n["runId"] for n in (await _listed(gql, "refund-agent"))["nodes"] if n["parentRunId"] == ids["supervisor"]
    ]
    question = {"questionId": call["questionId"]} if named == "its question" else {}

    outcome = await gql.approve("support-supervisor", ids["supervisor"], call["toolCallId"], **question)

    # the refund ran once, in the sub-run stored before the upgrade, which finished
    assert outcome["status"] == "COMPLETED", outcome
    assert LEDGER == [{"orderId": 1043, "amount": 120.0}]
    events = await gql.run_events("refund-agent", sub_run)
    assert [e["type"] for e in events][-1] == "completed"
    assert [e["type"] for e in events].count("started") == 1
    assert await gql.suspended_run("refund-agent", sub_run) is None


async def test_a_version_3_deadline_moves_when_its_call_is_decided(upgraded: tuple[Served, dict[str, str]]) -> None:
    served, ids = upgraded
    gql = served.client()
    run = await _run(gql, "refund-agent", ids["deadline"])
    without, with_deadline = run["toolCalls"]
    assert (without["args"]["order_id"], with_deadline["args"]["order_id"]) == (1042, 1043)
    assert without["expiresAt"] is None
    assert with_deadline["expiresAt"] is not None
    assert run["expiresAt"] == with_deadline["expiresAt"]

    # when the call with the deadline is approved, the run has none left
    first = await gql.approve("refund-agent", ids["deadline"], with_deadline["toolCallId"])
    assert first["status"] == "SUSPENDED", first
    assert (await _run(gql, "refund-agent", ids["deadline"]))["expiresAt"] is None
    assert (await _listed(gql, "refund-agent", expiresBefore="2200-01-01T00:00:00Z"))["nodes"] == [
        {"runId": ids["two_person"], "parentRunId": None}
    ]

    # and once the other is declined, the run ends with only the approved refund issued
    last = await gql.decline("refund-agent", ids["deadline"], without["toolCallId"], reason="duplicate")
    assert last["status"] == "COMPLETED", last
    assert LEDGER == [{"orderId": 1043, "amount": 120.0}]
    assert "duplicate" in last["output"], last["output"]


async def test_a_version_3_call_approved_once_of_two_needs_one_more(upgraded: tuple[Served, dict[str, str]]) -> None:
    served, ids = upgraded
    gql = served.client()
    [call] = (await _run(gql, "refund-agent", ids["two_person"]))["toolCalls"]
    assert call["approvalsRequired"] == 2
    assert call["approvals"] == [{"decidedBy": "key:alice"}]
    assert call["decision"] is None

    outcome = await gql.approve("refund-agent", ids["two_person"], call["toolCallId"])

    # the second approver's approval is the last one needed: the refund is issued
    assert outcome["status"] == "COMPLETED", outcome
    assert LEDGER == [{"orderId": 1045, "amount": 640.0}]
    events = await gql.run_events("refund-agent", ids["two_person"])
    assert [(e["type"], e["by"]) for e in events if e["type"] in {"approval", "decision"}] == [
        ("approval", "key:alice"),
        ("approval", "key:test-admin"),
        ("decision", "key:test-admin"),
    ]
