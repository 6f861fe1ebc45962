"""Approval policies over HTTP (docs/configuration.md "Tool rules"; docs/api.md): automatic
approval (``autoApprove``), two-person approval (``approvals``), the rules' check at start and
the demo agents' default rules (``runtime.demo.TOOL_RULES``: refunds up to $20 approved
automatically, over $500 by two principals), on the memory store and a SQLite file.

Approvers are API keys (``tests._auth``); each is its own principal (``key:<name>``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from runtime.demo import LEDGER
from server.app import create_app
from server.settings import ApiKeyConfig, ConfigError, Settings, ToolRuleConfig

from .._auth import ADMIN, TestKey
from .._graphql import REFUND, SUPERVISOR, GraphQLClient, document
from .._json_agent import JSON_ECHO

ALICE = TestKey("alice", "rg_test_alice_0123456789abcdefghijklmnopqrstuvwxyz")
BOB = TestKey("bob", "rg_test_bob_0123456789abcdefghijklmnopqrstuvwxyzab")
CAROL = TestKey("carol", "rg_test_carol_0123456789abcdefghijklmnopqrstuvwxyz")
READER = TestKey("reader", "rg_test_reader_0123456789abcdefghijklmnopqrstuvwx", scopes=("runs:read", "runs:decide"))

RUN = """
fragment PolicyRun on SuspendedRun {
  runId
  toolCalls {
    toolCallId toolName args approvalsRequired
    approvals { decidedBy decidedAt }
    decision { kind decidedBy decidedAt }
  }
}"""
OUTCOME = """
fragment PolicyOutcome on DecisionResult {
  __typename
  ... on RunOutcome { runId status output error run { ...PolicyRun } }
  ... on UserError { code message }
  ... on DuplicateApprover { runId toolCallId approvalsRequired }
  ... on ToolCallAlreadyDecided { decision { kind decidedBy } }
}"""
START = (
    """
mutation Start($input: StartRunInput!) {
  startRun(input: $input) {
    __typename
    ... on RunOutcome { runId status output error run { ...PolicyRun } }
    ... on UserError { code message }
  }
}"""
    + RUN
)
APPROVE = (
    """
mutation Approve($input: ApproveToolCallInput!) { approveToolCall(input: $input) { ...PolicyOutcome } }"""
    + OUTCOME
    + RUN
)
DECLINE = (
    """
mutation Decline($input: DeclineToolCallInput!) { declineToolCall(input: $input) { ...PolicyOutcome } }"""
    + OUTCOME
    + RUN
)
GET_RUN = (
    "query Run($agentId: ID!, $runId: ID!) { suspendedRun(agentId: $agentId, runId: $runId) { ...PolicyRun } }" + RUN
)
EVENTS = document(
    "query Events($agentId: ID!, $runId: ID!) { runEvents(agentId: $agentId, runId: $runId) { ...EventFields } }"
)

SMALL_HOLDS = {"name": "small-holds", "tool": "hold", "argument": "value", "atMost": 20, "autoApprove": True}


def _settings(kind: str, sqlite_path: Path, **fields: Any) -> Settings:
    return Settings(
        store=f"sqlite:///{sqlite_path}" if kind == "sqlite" else None,
        agents=fields.pop("agents", "runtime.demo:AGENTS"),
        api_keys=[ApiKeyConfig.model_validate(k.entry()) for k in (ADMIN, ALICE, BOB, CAROL, READER)],
        **fields,
    )


@pytest.fixture(params=["memory", "sqlite"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def _empty_ledger() -> None:
    LEDGER.clear()


class Server:
    """One app (its lifespan running) and a client per API key."""

    def __init__(self, app: Starlette) -> None:
        self.app = app

    def client(self, key: TestKey) -> GraphQLClient:
        http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url="http://test", headers=key.headers
        )
        return GraphQLClient(http)

    async def start(self, agent_id: str, prompt: str, key: TestKey = ADMIN) -> dict[str, Any]:
        result: dict[str, Any] = (await self.client(key).data(START, input={"agentId": agent_id, "prompt": prompt}))[
            "startRun"
        ]
        assert result["__typename"] == "RunOutcome", result
        return result

    async def approve(self, key: TestKey, run_id: str, call_id: str, agent_id: str = REFUND, **extra: Any) -> Any:
        fields = {"agentId": agent_id, "runId": run_id, "toolCallId": call_id, **extra}
        return (await self.client(key).data(APPROVE, input=fields))["approveToolCall"]

    async def decline(self, key: TestKey, run_id: str, call_id: str, agent_id: str = REFUND) -> Any:
        fields = {"agentId": agent_id, "runId": run_id, "toolCallId": call_id, "reason": "no"}
        return (await self.client(key).data(DECLINE, input=fields))["declineToolCall"]

    async def run(self, run_id: str, agent_id: str = REFUND) -> Any:
        return (await self.client(ADMIN).data(GET_RUN, agentId=agent_id, runId=run_id))["suspendedRun"]

    async def events(self, run_id: str, agent_id: str = REFUND) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = (await self.client(ADMIN).data(EVENTS, agentId=agent_id, runId=run_id))[
            "runEvents"
        ]
        return events


@pytest.fixture
async def demo(store_kind: str, sqlite_path: Path) -> AsyncIterator[Server]:
    """The demo agents with their default rules (RUNSGATE_TOOL_RULES unset)."""
    app = create_app(_settings(store_kind, sqlite_path))
    async with app.router.lifespan_context(app):
        yield Server(app)


@pytest.fixture
async def echo(store_kind: str, sqlite_path: Path) -> AsyncIterator[Server]:
    """``json-echo`` (a ``hold`` tool taking any JSON ``value``) with ``SMALL_HOLDS``."""
    settings = _settings(
        store_kind,
        sqlite_path,
        agents="tests._json_agent:AGENTS",
        tool_rules=[ToolRuleConfig.model_validate(SMALL_HOLDS)],
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        yield Server(app)


# -- automatic approval --------------------------------------------------------------------------


async def test_a_refund_of_at_most_20_dollars_completes_at_start_decided_by_the_policy(demo: Server) -> None:
    # when order 1044 ($15.50) is refunded under the demo's default rules
    outcome = await demo.start(REFUND, "Please refund order 1044")

    # then the run completed without waiting: the refund was issued once, nothing is listed
    assert outcome["status"] == "COMPLETED", outcome
    assert "Refund of $15.50 for order 1044 issued" in outcome["output"]
    assert LEDGER == [{"orderId": 1044, "amount": 15.5}]
    assert await demo.run(outcome["runId"]) is None

    # and the trail records the policy's decision, never a suspension
    events = await demo.events(outcome["runId"])
    assert [e["type"] for e in events] == ["started", "decision", "resumed", "completed"]
    decision = events[1]
    assert decision["by"] == "policy:small-refunds"
    assert decision["data"]["kind"] == "approved"
    assert decision["data"]["toolName"] == "issue_refund"
    assert decision["data"]["rule"] == "small-refunds"


async def test_only_the_small_refund_is_approved_by_the_policy_the_other_waits_for_a_person(demo: Server) -> None:
    # when one run asks to refund 1044 ($15.50) and 1042 ($49.90) together
    outcome = await demo.start(REFUND, "Please refund orders 1044 and 1042")

    # then it waits, for 1042 only: 1044's call is listed as decided by the policy
    assert outcome["status"] == "SUSPENDED", outcome
    run = outcome["run"]
    small, large = run["toolCalls"]
    assert small["args"]["order_id"] == 1044
    assert small["decision"]["kind"] == "APPROVED"
    assert small["decision"]["decidedBy"] == "policy:small-refunds"
    assert large["args"]["order_id"] == 1042
    assert large["decision"] is None
    assert LEDGER == []
    events = await demo.events(run["runId"])
    assert [(e["type"], e["by"]) for e in events[1:]] == [
        ("suspended", "key:test-admin"),
        ("decision", "policy:small-refunds"),
    ]
    assert events[1]["data"]["toolCallIds"] == [large["toolCallId"]]

    # and when a person approves 1042, both refunds are issued, once each
    done = await demo.approve(ALICE, run["runId"], large["toolCallId"])
    assert done["status"] == "COMPLETED", done
    assert sorted(entry["orderId"] for entry in LEDGER) == [1042, 1044]


async def test_a_refund_above_the_limit_waits(demo: Server) -> None:
    outcome = await demo.start(REFUND, "Please refund order 1043")  # $120

    assert outcome["status"] == "SUSPENDED"
    (call,) = outcome["run"]["toolCalls"]
    assert call["decision"] is None
    assert call["approvalsRequired"] == 1
    assert call["approvals"] == []
    assert LEDGER == []


@pytest.mark.parametrize("value", ['"5"', "true", "null", "50", '{"amount": 5}'])
async def test_a_value_that_is_not_provably_at_most_the_limit_never_auto_approves(echo: Server, value: str) -> None:
    outcome = await echo.start(JSON_ECHO, json.dumps({"hold": json.loads(value)}))

    assert outcome["status"] == "SUSPENDED", outcome
    (call,) = outcome["run"]["toolCalls"]
    assert call["decision"] is None
    assert "decision" not in [e["type"] for e in await echo.events(outcome["runId"], JSON_ECHO)]


@pytest.mark.parametrize("value", ["20", "-3", "7.5"])
async def test_a_number_at_most_the_limit_auto_approves(echo: Server, value: str) -> None:
    outcome = await echo.start(JSON_ECHO, json.dumps({"hold": json.loads(value)}))

    assert outcome["status"] == "COMPLETED", outcome
    assert outcome["output"] == {"held": json.loads(value)}


# -- rules checked at start ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ({"tool": "issue_refnud", "scope": "refunds:approve"}, "names tool 'issue_refnud', which is not a tool of any"),
        (
            {"tool": "issue_refund", "agentId": "support-supervisor", "expiresAfter": 60},
            "names tool 'issue_refund', which is not a tool of agent 'support-supervisor'",
        ),
        ({"tool": "issue_refund", "agentId": "refund-agnet", "expiresAfter": 60}, "names agent 'refund-agnet'"),
        (
            {"tool": "issue_refund", "argument": "amonut", "above": 5, "approvals": 2},
            "names argument 'amonut', which is not a parameter of tool 'issue_refund'",
        ),
        (
            {"name": "x", "tool": "lookup_order", "argument": "order_id", "atMost": 5, "autoApprove": True},
            None,  # a real tool and argument: accepted
        ),
    ],
)
async def test_a_rule_naming_an_unknown_tool_or_argument_is_refused_at_start(
    sqlite_path: Path, rule: dict[str, Any], expected: str | None
) -> None:
    app = create_app(_settings("memory", sqlite_path, tool_rules=[ToolRuleConfig.model_validate(rule)]))
    if expected is None:
        async with app.router.lifespan_context(app):
            return
    with pytest.raises(ConfigError) as refused:
        async with app.router.lifespan_context(app):
            pytest.fail("the app started")
    assert "RUNSGATE_TOOL_RULES" in str(refused.value)
    assert expected in str(refused.value)


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ({"tool": "issue_refund", "argument": "amount", "atMost": 20, "autoApprove": True}, "needs a name"),
        ({"name": "n", "tool": "issue_refund", "autoApprove": True}, "needs a condition (argument and atMost)"),
        ({"tool": "issue_refund", "approvals": 0}, "greater than or equal to 1"),
        ({"tool": "issue_refund", "argument": "amount", "atMost": 3}, "atMost without autoApprove"),
    ],
)
def test_an_incomplete_policy_rule_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, rule: dict[str, Any], expected: str
) -> None:
    from server.settings import load_settings

    monkeypatch.setenv("RUNSGATE_TOOL_RULES", json.dumps([rule]))
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert "RUNSGATE_TOOL_RULES" in str(refused.value)
    assert expected in str(refused.value)


async def test_an_explicit_empty_rule_list_replaces_the_demo_defaults(store_kind: str, sqlite_path: Path) -> None:
    app = create_app(_settings(store_kind, sqlite_path, tool_rules=[]))
    async with app.router.lifespan_context(app):
        outcome = await Server(app).start(REFUND, "Please refund order 1044")
    assert outcome["status"] == "SUSPENDED"
    assert LEDGER == []


# -- two-person approval -------------------------------------------------------------------------


async def _large_refund(demo: Server) -> tuple[str, str]:
    outcome = await demo.start(REFUND, "Please refund order 1045")  # $640
    assert outcome["status"] == "SUSPENDED", outcome
    (call,) = outcome["run"]["toolCalls"]
    assert call["approvalsRequired"] == 2
    assert call["approvals"] == []
    return outcome["runId"], call["toolCallId"]


async def test_a_refund_over_500_dollars_runs_after_two_distinct_approvals(demo: Server) -> None:
    run_id, call_id = await _large_refund(demo)

    # when alice approves: recorded, the run still waits, nothing ran
    first = await demo.approve(ALICE, run_id, call_id)
    assert first["__typename"] == "RunOutcome"
    assert first["status"] == "SUSPENDED"
    (call,) = first["run"]["toolCalls"]
    assert [a["decidedBy"] for a in call["approvals"]] == ["key:alice"]
    assert call["decision"] is None
    assert LEDGER == []

    # and bob approves: the refund is issued, once
    second = await demo.approve(BOB, run_id, call_id)
    assert second["status"] == "COMPLETED", second
    assert LEDGER == [{"orderId": 1045, "amount": 640.0}]

    # and the trail has one approval event each, then the decision (by the last approver)
    events = await demo.events(run_id)
    assert [(e["type"], e["by"]) for e in events if e["type"] in {"approval", "decision"}] == [
        ("approval", "key:alice"),
        ("approval", "key:bob"),
        ("decision", "key:bob"),
    ]
    approvals = [e["data"] for e in events if e["type"] == "approval"]
    assert [(a["approvals"], a["approvalsRequired"], a["toolCallId"]) for a in approvals] == [
        (1, 2, call_id),
        (2, 2, call_id),
    ]


async def test_the_same_principal_approving_twice_gets_duplicate_approver_and_changes_nothing(demo: Server) -> None:
    run_id, call_id = await _large_refund(demo)
    await demo.approve(ALICE, run_id, call_id)
    before = await demo.run(run_id)

    again = await demo.approve(ALICE, run_id, call_id)

    assert again["__typename"] == "DuplicateApprover", again
    assert again["code"] == "DUPLICATE_APPROVER"
    assert (again["runId"], again["toolCallId"], again["approvalsRequired"]) == (run_id, call_id, 2)
    assert "key:alice already approved" in again["message"]
    assert await demo.run(run_id) == before
    assert [e["type"] for e in await demo.events(run_id)].count("approval") == 1
    assert LEDGER == []


async def test_one_decline_after_an_approval_ends_it(demo: Server) -> None:
    run_id, call_id = await _large_refund(demo)
    await demo.approve(ALICE, run_id, call_id)

    declined = await demo.decline(BOB, run_id, call_id)

    assert declined["status"] == "COMPLETED", declined
    assert "not issued" in declined["output"]
    assert LEDGER == []
    late = await demo.approve(CAROL, run_id, call_id)
    assert late["__typename"] == "ToolCallAlreadyDecided", late  # the run finished: its events name the decline
    assert late["decision"]["kind"] == "DECLINED"
    assert LEDGER == []


async def test_an_approval_replayed_with_its_idempotency_key_returns_the_same_answer(demo: Server) -> None:
    run_id, call_id = await _large_refund(demo)

    first = await demo.approve(ALICE, run_id, call_id, idempotencyKey="alice-1")
    replay = await demo.approve(ALICE, run_id, call_id, idempotencyKey="alice-1")

    assert first["status"] == "SUSPENDED"
    assert replay == first
    assert [e["type"] for e in await demo.events(run_id)].count("approval") == 1
    done = await demo.approve(BOB, run_id, call_id, idempotencyKey="bob-1")
    assert done["status"] == "COMPLETED"
    assert await demo.approve(BOB, run_id, call_id, idempotencyKey="bob-1") == done
    assert LEDGER == [{"orderId": 1045, "amount": 640.0}]


async def test_concurrent_approvals_by_two_principals_record_both_and_run_the_tool_once(demo: Server) -> None:
    run_id, call_id = await _large_refund(demo)

    results = await asyncio.gather(
        demo.approve(ALICE, run_id, call_id), demo.approve(BOB, run_id, call_id), demo.approve(ALICE, run_id, call_id)
    )

    # one approval waited, one completed the run; the other of alice's was refused, whichever
    # state it read (her first approval, the decision, or the run already gone)
    kinds = sorted(r.get("status") or r["__typename"] for r in results)
    assert kinds.count("COMPLETED") == 1, kinds
    assert kinds.count("SUSPENDED") == 1, kinds
    (refused,) = [k for k in kinds if k not in {"COMPLETED", "SUSPENDED"}]
    assert refused in {"DuplicateApprover", "ToolCallAlreadyDecided", "RunNotFound"}, kinds
    assert LEDGER == [{"orderId": 1045, "amount": 640.0}]
    events = await demo.events(run_id)
    assert sorted(e["by"] for e in events if e["type"] == "approval") == ["key:alice", "key:bob"]


async def test_per_tool_scopes_still_apply_to_each_approver(store_kind: str, sqlite_path: Path) -> None:
    rules = [
        {"tool": "issue_refund", "argument": "amount", "above": 500, "approvals": 2},
        {"tool": "issue_refund", "scope": "refunds:approve"},
    ]
    settings = _settings(store_kind, sqlite_path, tool_rules=[ToolRuleConfig.model_validate(r) for r in rules])
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        server = Server(app)
        run_id, call_id = await _large_refund(server)

        refused = await server.approve(READER, run_id, call_id)

        assert refused["__typename"] == "Forbidden"
        assert (await server.run(run_id))["toolCalls"][0]["approvals"] == []


# -- through a supervisor ----------------------------------------------------------------------


async def test_a_small_refund_through_the_supervisor_completes_at_start(demo: Server) -> None:
    outcome = await demo.start(SUPERVISOR, "Please refund order 1044")

    assert outcome["status"] == "COMPLETED", outcome
    assert LEDGER == [{"orderId": 1044, "amount": 15.5}]


async def test_a_large_refund_through_the_supervisor_needs_two_approvers_on_the_supervisors_call(
    demo: Server,
) -> None:
    outcome = await demo.start(SUPERVISOR, "Please refund order 1045")
    assert outcome["status"] == "SUSPENDED", outcome
    (call,) = outcome["run"]["toolCalls"]
    assert (call["toolName"], call["approvalsRequired"]) == ("issue_refund", 2)
    run_id = outcome["runId"]

    first = await demo.approve(ALICE, run_id, call["toolCallId"], agent_id=SUPERVISOR)
    assert first["status"] == "SUSPENDED", first
    assert LEDGER == []

    second = await demo.approve(BOB, run_id, call["toolCallId"], agent_id=SUPERVISOR)
    assert second["status"] == "COMPLETED", second
    assert LEDGER == [{"orderId": 1045, "amount": 640.0}]


async def test_the_arguments_of_a_call_needing_two_approvals_cannot_be_edited(demo: Server) -> None:
    run_id, call_id = await _large_refund(demo)
    before = await demo.run(run_id)

    edited = await demo.approve(ALICE, run_id, call_id, editedArgs={"order_id": 1045, "amount": 600})

    assert edited["__typename"] == "Forbidden", edited
    assert "approve it without editedArgs" in edited["message"]
    assert await demo.run(run_id) == before
    assert "approval" not in [e["type"] for e in await demo.events(run_id)]
    assert LEDGER == []


async def test_an_edit_that_would_need_two_approvals_is_forbidden(demo: Server) -> None:
    # given a $120 refund, which needs one approval
    outcome = await demo.start(REFUND, "Please refund order 1043")
    assert outcome["status"] == "SUSPENDED", outcome
    (call,) = outcome["run"]["toolCalls"]
    assert call["approvalsRequired"] == 1
    before = await demo.run(outcome["runId"])

    # when it is approved with an amount above the two-approver limit
    edited = await demo.approve(
        ALICE, outcome["runId"], call["toolCallId"], editedArgs={"order_id": 1043, "amount": 700}
    )

    # then nothing is recorded: one approver cannot raise it past two-person approval
    assert edited["__typename"] == "Forbidden", edited
    assert "needs several approvals" in edited["message"]
    assert await demo.run(outcome["runId"]) == before
    assert LEDGER == []


async def test_rules_read_an_edit_as_the_tools_validator_reads_it(demo: Server) -> None:
    # given a $120 refund, which needs one approval
    outcome = await demo.start(REFUND, "Please refund order 1043")
    (call,) = outcome["run"]["toolCalls"]

    # when the amount is edited to "25", text the tool's validator does not read as a number
    text = await demo.approve(
        ALICE, outcome["runId"], call["toolCallId"], editedArgs={"order_id": 1043, "amount": "25"}
    )

    # then the edit is refused, not compared with the rule's limit as a string
    assert text["__typename"] == "InvalidToolArguments", text

    # and when it is edited to the integer 25, which the validator reads as the float 25.0
    edited = await demo.approve(
        ALICE, outcome["runId"], call["toolCallId"], editedArgs={"order_id": 1043, "amount": 25}
    )

    # then it is below the two-approver limit, and the refund runs with it
    assert edited["__typename"] == "RunOutcome", edited
    assert edited["status"] == "COMPLETED"
    assert LEDGER == [{"orderId": 1043, "amount": 25.0}]
