"""Deadlines with a fallback over HTTP (issue 18 part 2; docs/api.md "Deadlines").

A tool rule's ``expiresAfter`` gives each pending approval it covers ``expiresAt``; the run's
``expiresAt`` is the earliest deadline of its waiting calls, kept current; ``expiresBefore``
filters on it; the sweeper records the rule's ``onExpiry`` (``decidedBy: "expiry"``, an
``expired`` event before the ``decision`` event) exactly once, racing fairly with people.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from runtime import StalledRunSweeper
from runtime.demo import LEDGER
from server.app import create_app
from server.settings import ApiKeyConfig, Settings, ToolRuleConfig

from .._auth import ADMIN
from .._graphql import REFUND, REFUND_PROMPT, TWO_REFUNDS_PROMPT, WAIT, WEATHER, WEATHER_PROMPT, GraphQLClient, document

DEADLINES = document(
    """
query Deadlines($agentId: ID!, $filter: SuspendedRunFilter, $first: Int, $after: String, $page: PageInput) {
  suspendedRuns(agentId: $agentId, filter: $filter, first: $first, after: $after, page: $page) {
    totalCount
    pageInfo { hasNextPage endCursor }
    nodes { runId suspendedAt expiresAt toolCalls { toolCallId args expiresAt decision { kind decidedBy reason } } }
  }
}
"""
)

LONG = 3600.0
"""A deadline no test waits for (seconds)."""


def _parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _settings(request: pytest.FixtureRequest, rules: list[dict[str, Any]], *, sweep_interval: float) -> Settings:
    store = f"sqlite:///{request.getfixturevalue('sqlite_path')}" if request.param == "sqlite" else None
    return Settings(
        store=store,
        agents="runtime.demo:AGENTS",
        max_page_size=100,
        api_keys=[ApiKeyConfig.model_validate(ADMIN.entry())],
        tool_rules=[ToolRuleConfig.model_validate(rule) for rule in rules],
        sweep_interval=sweep_interval,
    )


@pytest.fixture(params=["memory", "sqlite"])
def store_kind(request: pytest.FixtureRequest) -> pytest.FixtureRequest:
    return request


AppFactory = Callable[..., Any]


@pytest.fixture
async def serve(store_kind: pytest.FixtureRequest) -> AsyncIterator[AppFactory]:
    """``serve(rules, sweep_interval=...)``: an app with those tool rules, its lifespan running,
    and a client authenticated as ``ADMIN``; closed at the end of the test."""
    opened: list[tuple[Starlette, Any, httpx.AsyncClient]] = []

    async def start(rules: list[dict[str, Any]], *, sweep_interval: float = 0) -> tuple[Starlette, GraphQLClient]:
        app = create_app(_settings(store_kind, rules, sweep_interval=sweep_interval))
        lifespan = app.router.lifespan_context(app)
        await lifespan.__aenter__()
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://test", headers=ADMIN.headers
        )
        opened.append((app, lifespan, client))
        return app, GraphQLClient(client)

    LEDGER.clear()
    yield start
    for _, lifespan, client in reversed(opened):
        await client.aclose()
        await lifespan.__aexit__(None, None, None)
    LEDGER.clear()


async def _runs(gql: GraphQLClient, **arguments: Any) -> dict[str, Any]:
    connection: dict[str, Any] = (await gql.data(DEADLINES, agentId=REFUND, **arguments))["suspendedRuns"]
    return connection


async def _run(gql: GraphQLClient, run_id: str) -> dict[str, Any] | None:
    for node in (await _runs(gql))["nodes"]:
        if node["runId"] == run_id:
            return dict(node)
    return None


async def _until_gone(gql: GraphQLClient, run_id: str) -> None:
    """Poll until the run is gone (the background sweeper finishes it; no event to await)."""
    async with asyncio.timeout(WAIT):
        while await gql.suspended_run(REFUND, run_id) is not None:  # noqa: ASYNC110
            await asyncio.sleep(0.05)


# -- expiresAt ------------------------------------------------------------------------------------


async def test_each_covered_call_gets_its_deadline_and_the_run_the_earliest_kept_current(serve: AppFactory) -> None:
    # given a day for every refund, and ten minutes for refunds above $100
    _, gql = await serve(
        [
            {"tool": "issue_refund", "expiresAfter": 86400},
            {"tool": "issue_refund", "argument": "amount", "above": 100, "expiresAfter": 600},
        ]
    )

    # when a run asks for two refunds ($49.90 and $120)
    started = await gql.suspend(REFUND, TWO_REFUNDS_PROMPT)
    run = await _run(gql, started["runId"])
    assert run is not None
    suspended_at = _parse(run["suspendedAt"])
    small, large = run["toolCalls"]

    # then each call's deadline is its rule's, the run's the earliest (UTC, millisecond precision)
    assert (small["args"]["amount"], large["args"]["amount"]) == (49.9, 120.0)
    assert _parse(small["expiresAt"]) == suspended_at + timedelta(seconds=86400)
    assert _parse(large["expiresAt"]) == suspended_at + timedelta(seconds=600)
    assert _parse(run["expiresAt"]) == suspended_at + timedelta(seconds=600)
    assert run["expiresAt"].endswith("Z") or run["expiresAt"].endswith("+00:00")

    # when the call with the earlier deadline is approved
    outcome = await gql.approve(REFUND, started["runId"], large["toolCallId"])
    assert outcome["status"] == "SUSPENDED", outcome

    # then the run's deadline is the remaining call's
    run = await _run(gql, started["runId"])
    assert run is not None
    assert _parse(run["expiresAt"]) == suspended_at + timedelta(seconds=86400)

    # when the last call is declined, the run finishes and is gone
    outcome = await gql.decline(REFUND, started["runId"], small["toolCallId"], reason="no")
    assert outcome["status"] == "COMPLETED", outcome


async def test_a_call_no_rule_covers_and_runs_of_other_agents_have_no_deadline(serve: AppFactory) -> None:
    # given a deadline for another tool of the refund agent only (a rule naming a tool its agent
    # lacks is refused at start: tests/server/test_policies.py; which agents a rule covers:
    # tests/server/test_deadline_rules.py)
    _, gql = await serve([{"tool": "lookup_order", "agentId": "refund-agent", "expiresAfter": 60}])

    # when the refund agent suspends, and the weather agent too
    started = await gql.suspend(REFUND, REFUND_PROMPT)
    weather = await gql.suspend(WEATHER, WEATHER_PROMPT)

    # then neither run has a deadline
    run = await _run(gql, started["runId"])
    assert run is not None
    assert run["expiresAt"] is None
    assert [call["expiresAt"] for call in run["toolCalls"]] == [None]
    assert weather["runId"]


# -- expiresBefore --------------------------------------------------------------------------------


async def test_expires_before_lists_only_runs_expiring_before_it_with_paging_and_total_count(
    serve: AppFactory,
) -> None:
    # given five runs with a ten-minute deadline (above $100) and three with a day (below)
    _, gql = await serve(
        [
            {"tool": "issue_refund", "expiresAfter": 86400},
            {"tool": "issue_refund", "argument": "amount", "above": 100, "expiresAfter": 600},
        ]
    )
    soon = [(await gql.suspend(REFUND, "Please refund order 1043"))["runId"] for _ in range(5)]
    later = [(await gql.suspend(REFUND, REFUND_PROMPT))["runId"] for _ in range(3)]
    bound = (datetime.now().astimezone() + timedelta(hours=1)).isoformat()

    # when listing the runs expiring within the hour, two per page
    seen: list[str] = []
    after = None
    totals = set()
    while True:
        page = await _runs(gql, filter={"expiresBefore": bound}, first=2, after=after)
        totals.add(page["totalCount"])
        seen += [node["runId"] for node in page["nodes"]]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]

    # then exactly those five, newest first, each once, and the total counts them
    assert seen == list(reversed(soon))
    assert totals == {5}

    # and page/perPage agrees, and a bound before every deadline matches nothing
    page = await _runs(gql, filter={"expiresBefore": bound}, page={"page": 1, "perPage": 3})
    assert [node["runId"] for node in page["nodes"]] == list(reversed(soon))[3:]
    empty = await _runs(gql, filter={"expiresBefore": datetime.now().astimezone().isoformat()})
    assert (empty["totalCount"], empty["nodes"]) == (0, [])
    everything = await _runs(gql, filter={"expiresBefore": "2999-01-01T00:00:00Z"})
    assert everything["totalCount"] == 8
    assert set(later) <= {node["runId"] for node in everything["nodes"]}


# -- the sweeper's fallback -----------------------------------------------------------------------


async def test_an_expired_refund_is_declined_by_expiry_and_the_model_is_told_it_expired(serve: AppFactory) -> None:
    # given refunds expire after a moment, the sweeper looking often
    _, gql = await serve([{"tool": "issue_refund", "expiresAfter": 0.2}], sweep_interval=0.05)

    # when a refund waits past its deadline
    started = await gql.suspend(REFUND, REFUND_PROMPT)
    await _until_gone(gql, started["runId"])

    # then the refund was not issued, the decision is the expiry's, after an expired event
    assert LEDGER == []
    events = await gql.run_events(REFUND, started["runId"])
    kinds = [event["type"] for event in events]
    assert kinds == ["started", "suspended", "expired", "decision", "resumed", "completed"], kinds
    expired, decision = events[2], events[3]
    assert (expired["by"], decision["by"]) == ("expiry", "expiry")
    assert expired["data"]["onExpiry"] == "decline"
    assert decision["data"]["kind"] == "declined"
    assert "expired" in decision["data"]["reason"]
    # the deadline is written as the API writes a DateTime (UTC, milliseconds, Z), also in the reason
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", expired["data"]["expiresAt"]), expired["data"]
    assert f"expired at {expired['data']['expiresAt']} " in decision["data"]["reason"]
    # the model read why: the demo quotes the tool result it got
    output = events[-1]["data"]["output"]
    assert "not issued" in output, output
    assert "approval request for this call expired" in output, output


async def test_on_expiry_approve_approves_only_where_the_rule_says_so(serve: AppFactory) -> None:
    # given refunds above $100 are approved on expiry, every other refund declined on expiry
    _, gql = await serve(
        [
            {"tool": "issue_refund", "argument": "amount", "above": 100, "expiresAfter": 0.2, "onExpiry": "approve"},
            {"tool": "issue_refund", "expiresAfter": 0.2},
        ],
        sweep_interval=0.05,
    )

    # when a run with a $49.90 and a $120 refund waits past both deadlines
    started = await gql.suspend(REFUND, TWO_REFUNDS_PROMPT)
    await _until_gone(gql, started["runId"])

    # then only the $120 refund ran, approved by the expiry
    assert LEDGER == [{"orderId": 1043, "amount": 120.0}]
    decisions = [e for e in await gql.run_events(REFUND, started["runId"]) if e["type"] == "decision"]
    assert sorted((e["data"]["kind"], e["by"]) for e in decisions) == [("approved", "expiry"), ("declined", "expiry")]


async def test_a_call_decided_before_its_deadline_is_never_expired(serve: AppFactory) -> None:
    # given a short deadline and a fast sweeper
    _, gql = await serve([{"tool": "issue_refund", "expiresAfter": 0.5}], sweep_interval=0.05)
    started = await gql.suspend(REFUND, TWO_REFUNDS_PROMPT)
    first, second = (call["toolCallId"] for call in started["toolCalls"])

    # when a person approves one call before the deadline
    assert (await gql.approve(REFUND, started["runId"], first))["status"] == "SUSPENDED"
    await _until_gone(gql, started["runId"])

    # then the expiry declined only the other one
    decisions = {
        e["data"]["toolCallId"]: e for e in await gql.run_events(REFUND, started["runId"]) if e["type"] == "decision"
    }
    assert (decisions[first]["by"], decisions[first]["data"]["kind"]) == (f"key:{ADMIN.name}", "approved")
    assert (decisions[second]["by"], decisions[second]["data"]["kind"]) == ("expiry", "declined")
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]


RACE_ROUNDS = 3


async def test_expiry_racing_fifty_approvals_has_exactly_one_winner_and_the_tool_runs_at_most_once(
    serve: AppFactory,
) -> None:
    # given a deadline that has just passed, the background sweeper off (sweeps made below)
    app, gql = await serve([{"tool": "issue_refund", "expiresAfter": 0.05}])
    manager = app.state.runs
    for _ in range(RACE_ROUNDS):
        LEDGER.clear()
        started = await gql.suspend(REFUND, REFUND_PROMPT)
        call_id = started["toolCalls"][0]["toolCallId"]
        await asyncio.sleep(0.1)

        # when 45 approvals over HTTP and 5 sweepers' expiry passes all go at once
        approvals = [gql.approve(REFUND, started["runId"], call_id) for _ in range(45)]
        sweeps = [StalledRunSweeper(manager, interval=1).sweep_once() for _ in range(5)]
        results = await asyncio.gather(*approvals, *sweeps)
        answers, swept = results[:45], results[45:]

        # then exactly one decision was recorded: either one approval won or one expiry did
        await _until_gone(gql, started["runId"])
        decisions = [e for e in await gql.run_events(REFUND, started["runId"]) if e["type"] == "decision"]
        assert len(decisions) == 1, decisions
        winner = decisions[0]
        human_wins = [a for a in answers if a["__typename"] == "RunOutcome"]
        expiry_wins = [o for outcomes in swept for o in outcomes]
        if winner["by"] == "expiry":
            assert human_wins == []
            assert len(expiry_wins) == 1
            assert LEDGER == []
        else:
            assert len(human_wins) == 1
            assert expiry_wins == []
            assert LEDGER == [{"orderId": 1042, "amount": 49.9}]
        losers = [a for a in answers if a["__typename"] != "RunOutcome"]
        assert {a["__typename"] for a in losers} <= {"ToolCallAlreadyDecided", "RunNotFound"}
        for loser in losers:
            if loser["__typename"] == "ToolCallAlreadyDecided":
                assert loser["decision"]["decidedBy"] == winner["by"]
        events = [e["type"] for e in await gql.run_events(REFUND, started["runId"])]
        assert events.count("expired") == (1 if winner["by"] == "expiry" else 0)


async def test_a_human_decision_after_the_expiry_is_already_decided_naming_the_expiry(serve: AppFactory) -> None:
    # given only refunds above $100 have a deadline, which passed
    app, gql = await serve([{"tool": "issue_refund", "argument": "amount", "above": 100, "expiresAfter": 0.05}])
    started = await gql.suspend(REFUND, TWO_REFUNDS_PROMPT)
    small, large = (call["toolCallId"] for call in started["toolCalls"])
    await asyncio.sleep(0.1)

    # when the sweeper expires the $120 refund, then a person approves it
    outcomes = await StalledRunSweeper(app.state.runs, interval=1).sweep_once()
    late = await gql.approve(REFUND, started["runId"], large)

    # then the expiry's decline stands: the approval is refused naming it, and the run still
    # waits for the $49.90 refund, without a deadline now
    assert [o.status for o in outcomes] == ["suspended"]
    assert late["__typename"] == "ToolCallAlreadyDecided", late
    assert (late["decision"]["kind"], late["decision"]["decidedBy"]) == ("DECLINED", "expiry")
    run = await _run(gql, started["runId"])
    assert run is not None
    assert run["expiresAt"] is None
    assert [c["decision"] and c["decision"]["decidedBy"] for c in run["toolCalls"]] == [None, "expiry"]
    assert (await gql.approve(REFUND, started["runId"], small))["status"] == "COMPLETED"
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]


async def test_an_expires_before_without_an_offset_is_refused_naming_it(serve: AppFactory) -> None:
    _, gql = await serve([{"tool": "issue_refund", "expiresAfter": LONG}])

    data, errors = await gql.errors(DEADLINES, agentId=REFUND, filter={"expiresBefore": "2026-01-01T00:00:00"})

    assert data is None
    assert len(errors) == 1
    assert "no UTC offset" in errors[0]["message"]
