"""The rules of the agent whose tool runs apply on every path to a decision (issue 24, parts 2 and 3).

Over HTTP on the memory, SQLite and MongoDB stores:

- a supervisor's delegated call is held to the sub-agent's rules (scope, approvals, deadline),
  and its listing shows what a decision needs (``approvalsRequired``, ``requiredScopes``);
- a deadline's fallback never grants more than the rules grant a person: ``onExpiry: approve``
  declines a call that needs a scope or several approvers.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from runtime.demo import LEDGER

from .._auth import ALL, TestKey
from .._graphql import REFUND, SUPERVISOR, WAIT, GraphQLClient, document
from ._cli import serve_with_only
from .conftest import Serve

PLAIN = TestKey("plain", "rg_test_plain_0123456789abcdefghijklmnopqrstuvwxyz")
"""May decide runs, without ``refunds:approve``."""
ALICE = TestKey("alice", "rg_test_alice_0123456789abcdefghijklmnopqrstuvwxyz", (*ALL, "refunds:approve"))
BOB = TestKey("bob", "rg_test_bob_0123456789abcdefghijklmnopqrstuvwxyzab", (*ALL, "refunds:approve"))

SCOPED = {"tool": "issue_refund", "agentId": "refund-agent", "scope": "refunds:approve"}
TWO_ABOVE_500 = {"tool": "issue_refund", "agentId": "refund-agent", "argument": "amount", "above": 500, "approvals": 2}
LARGE_ORDER = "Please refund order 1045"
"""$640."""

CALLS = document(
    """
query Calls($agentId: ID!, $runId: ID!) {
  suspendedRun(agentId: $agentId, runId: $runId) {
    runId expiresAt
    toolCalls {
      toolCallId toolName args approvalsRequired requiredScopes expiresAt
      approvals { decidedBy } decision { kind decidedBy }
    }
  }
}"""
)


@pytest.fixture(autouse=True)
def _empty_ledger() -> None:
    LEDGER.clear()


async def _calls(gql: GraphQLClient, agent_id: str, run_id: str) -> list[dict[str, Any]]:
    run = (await gql.data(CALLS, agentId=agent_id, runId=run_id))["suspendedRun"]
    assert run is not None, (agent_id, run_id)
    calls: list[dict[str, Any]] = run["toolCalls"]
    return calls


async def _until_gone(gql: GraphQLClient, agent_id: str, run_id: str) -> None:
    async with asyncio.timeout(WAIT):
        while await gql.suspended_run(agent_id, run_id) is not None:  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def test_a_supervisors_delegated_call_shows_what_the_sub_agents_rules_need(serve: Serve) -> None:
    # given scope and two-person rules for refund-agent's issue_refund
    served = await serve(keys=[PLAIN, ALICE, BOB], tool_rules=[SCOPED, TWO_ABOVE_500])

    # when a supervisor delegates a $640 refund
    run = await served.client(PLAIN).suspend(SUPERVISOR, LARGE_ORDER)

    # then its call shows the sub-agent's rules
    [call] = await _calls(served.client(), SUPERVISOR, run["runId"])
    assert call["toolName"] == "issue_refund"
    assert call["approvalsRequired"] == 2
    assert call["requiredScopes"] == ["refunds:approve"]
    # and so does the sub-run's own call
    [inner] = (await served.client().suspended_runs(REFUND))["nodes"]
    [inner_call] = await _calls(served.client(), REFUND, inner["runId"])
    assert (inner_call["approvalsRequired"], inner_call["requiredScopes"]) == (2, ["refunds:approve"])


async def test_a_supervisors_delegated_call_is_held_to_the_sub_agents_scope(serve: Serve) -> None:
    # given a key without refunds:approve, and a supervisor waiting on a $640 refund
    served = await serve(keys=[PLAIN, ALICE, BOB], tool_rules=[SCOPED, TWO_ABOVE_500])
    plain = served.client(PLAIN)
    run = await plain.suspend(SUPERVISOR, LARGE_ORDER)
    [call] = run["toolCalls"]

    # when that key approves the supervisor's call
    refused = await plain.approve(SUPERVISOR, run["runId"], call["toolCallId"])

    # then it is Forbidden, naming the scope, and nothing was recorded or refunded
    assert refused["__typename"] == "Forbidden", refused
    assert LEDGER == []
    [after] = await _calls(served.client(), SUPERVISOR, run["runId"])
    assert (after["decision"], after["approvals"]) == (None, [])


async def test_a_supervisors_delegated_call_needs_the_sub_agents_approvers(serve: Serve) -> None:
    # given a supervisor waiting on a $640 refund that refund-agent's rules give two approvers
    served = await serve(keys=[ALICE, BOB], tool_rules=[SCOPED, TWO_ABOVE_500])
    alice, bob = served.client(ALICE), served.client(BOB)
    run = await alice.suspend(SUPERVISOR, LARGE_ORDER)
    call_id = run["toolCalls"][0]["toolCallId"]

    # when one approver approves, the refund waits for the second
    first = await alice.approve(SUPERVISOR, run["runId"], call_id)
    assert first["status"] == "SUSPENDED", first
    assert LEDGER == []
    [waiting] = await _calls(served.client(), SUPERVISOR, run["runId"])
    assert [a["decidedBy"] for a in waiting["approvals"]] == ["key:alice"]

    # and the second approval issues it, once
    second = await bob.approve(SUPERVISOR, run["runId"], call_id)
    assert second["status"] == "COMPLETED", second
    assert LEDGER == [{"orderId": 1045, "amount": 640.0}]


async def test_a_supervisors_delegated_call_gets_the_sub_agents_deadline(serve: Serve) -> None:
    # given refund-agent's refunds expire after a moment
    served = await serve(
        tool_rules=[{"tool": "issue_refund", "agentId": "refund-agent", "expiresAfter": 0.3}], sweep_interval=0.05
    )
    gql = served.client()

    # when a supervisor's delegated refund waits past it
    run = await gql.suspend(SUPERVISOR, "Please refund order 1042")
    assert run["toolCalls"][0]["toolName"] == "issue_refund"
    await _until_gone(gql, SUPERVISOR, run["runId"])

    # then the expiry declined it: nothing refunded
    assert LEDGER == []
    decisions = [e for e in await gql.run_events(SUPERVISOR, run["runId"]) if e["type"] == "decision"]
    assert [(e["by"], e["data"]["kind"]) for e in decisions] == [("expiry", "declined")]


def test_a_rule_naming_the_supervisor_for_the_sub_agents_tool_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = '[{"name": "via-supervisor", "tool": "issue_refund", "agentId": "support-supervisor", "scope": "x:y"}]'
    status = serve_with_only(monkeypatch, tmp_path, {"RUNSGATE_TOOL_RULES": rules, "RUNSGATE_AUTH": "off"})
    assert status == 2
    message = capsys.readouterr().err
    assert "via-supervisor" in message, message
    assert "refund-agent" in message, message  # whose tool it is, and so whose rules apply


@pytest.mark.parametrize("restricting", [SCOPED, TWO_ABOVE_500], ids=["scope", "two-approvers"])
async def test_an_expiry_never_approves_what_a_person_alone_could_not(
    serve: Serve, restricting: dict[str, Any]
) -> None:
    # given a rule restricting $640 refunds, and refunds approved on expiry
    expire = {"tool": "issue_refund", "expiresAfter": 0.3, "onExpiry": "approve"}
    served = await serve(tool_rules=[restricting, expire], sweep_interval=0.05)
    gql = served.client()

    # when a $640 refund waits past its deadline, unattended
    run = await gql.suspend(REFUND, LARGE_ORDER)
    await _until_gone(gql, REFUND, run["runId"])

    # then the fallback declined it: no refund
    assert LEDGER == []
    decisions = [e for e in await gql.run_events(REFUND, run["runId"]) if e["type"] == "decision"]
    assert [(e["by"], e["data"]["kind"]) for e in decisions] == [("expiry", "declined")]


async def test_an_expiry_still_approves_an_unrestricted_call(serve: Serve) -> None:
    # given refunds approved on expiry and a scope rule only above $500
    scoped_large = {**SCOPED, "argument": "amount", "above": 500}
    served = await serve(
        tool_rules=[scoped_large, {"tool": "issue_refund", "expiresAfter": 0.3, "onExpiry": "approve"}],
        sweep_interval=0.05,
    )
    gql = served.client()

    # when a $49.90 refund waits past its deadline
    run = await gql.suspend(REFUND, "Please refund order 1042")
    await _until_gone(gql, REFUND, run["runId"])

    # then the expiry approved it
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]
