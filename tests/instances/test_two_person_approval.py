"""Two-person approval and automatic approval on two real runsgate processes sharing one store
(a SQLite file, then a MongoDB database), authentication on (docs/guarantees.md).

``gate-agent``'s ``act`` appends one line per execution to a shared file, so the tests count
real executions across processes. The rules: an ``act`` with ``delay`` above 0.5 needs two
distinct approvers; one with ``delay`` 0 is approved automatically (``instant-acts``).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests._servers import runsgate_processes, shared_store_env

from .._auth import ADMIN, TestKey, api_keys_json
from .._graphql import EVENTS, GraphQLClient, ws_connect
from ._runs import AGENT, decide, run_events, start_run, token
from .agents import side_effect_lines

ALICE = TestKey("alice", "rg_test_alice_0123456789abcdefghijklmnopqrstuvwxyz")
BOB = TestKey("bob", "rg_test_bob_0123456789abcdefghijklmnopqrstuvwxyzab")
CAROL = TestKey("carol", "rg_test_carol_0123456789abcdefghijklmnopqrstuvwxyz")

RULES = [
    {"tool": "act", "argument": "delay", "above": 0.5, "approvals": 2},
    {"name": "instant-acts", "tool": "act", "argument": "delay", "atMost": 0, "autoApprove": True},
]
RACE_TOOL_DELAY = 1.5
"""Seconds ``act`` sleeps, so every racing request finds the run still stored."""


@dataclass
class Cluster:
    a: str
    b: str
    side_effects: Path


@pytest.fixture(scope="module")
def cluster(
    request: pytest.FixtureRequest, shared_store_kind: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("two-person")
    side_effects = workdir / "side-effects.log"
    side_effects.touch()
    with runsgate_processes(
        [workdir / "a.log", workdir / "b.log"],
        **shared_store_env(request, shared_store_kind, workdir),
        RUNSGATE_AGENTS="tests.instances.agents:AGENTS",
        RUNSGATE_AUTH="on",
        RUNSGATE_API_KEYS=api_keys_json(ADMIN, ALICE, BOB, CAROL),
        RUNSGATE_TOOL_RULES=json.dumps(RULES),
        RUNSGATE_GRAPHIQL="false",
        RUNSGATE_SUBSCRIPTION_POLL_INTERVAL="0.1",
        RUNSGATE_TEST_SIDE_EFFECTS=str(side_effects),
    ) as (a, b):
        yield Cluster(a, b, side_effects)


@pytest.fixture
async def as_() -> AsyncIterator[Any]:
    """``as_(key, url)``: a client of ``url`` authenticated as ``key`` (closed after the test)."""
    opened: list[httpx.AsyncClient] = []

    def client(key: TestKey, url: str) -> GraphQLClient:
        limits = httpx.Limits(max_connections=50, max_keepalive_connections=50)
        http = httpx.AsyncClient(base_url=url, headers=key.headers, timeout=30, limits=limits)
        opened.append(http)
        return GraphQLClient(http)

    yield client
    for http in opened:
        await http.aclose()


async def test_the_last_approval_racing_on_two_instances_runs_the_tool_once(cluster: Cluster, as_: Any) -> None:
    # given a call needing two approvers, approved by alice
    tok = token()
    started = await start_run(as_(ADMIN, cluster.a), tok, calls=1, delay=RACE_TOOL_DELAY)
    run_id, call = started["runId"], started["run"]["toolCalls"][0]
    first = await decide(as_(ALICE, cluster.a), "approve", run_id, call["toolCallId"])
    assert first["status"] == "SUSPENDED", first

    # when bob and carol approve at once, ten times each, on both instances
    attempts = [
        decide(as_(key, url), "approve", run_id, call["toolCallId"])
        for _ in range(5)
        for key in (BOB, CAROL)
        for url in (cluster.a, cluster.b)
    ]
    results = await asyncio.gather(*attempts)

    # then exactly one approval became the decision, every other attempt was told so
    completed = [r for r in results if r["__typename"] == "RunOutcome"]
    assert len(completed) == 1, Counter(r["__typename"] for r in results)
    assert completed[0]["status"] == "COMPLETED"
    assert {r["__typename"] for r in results if r not in completed} == {"ToolCallAlreadyDecided"}

    # and the tool ran once, after two approval events and one decision, on either instance
    assert len(side_effect_lines(cluster.side_effects, tok)) == 1
    events = await run_events(as_(ADMIN, cluster.b), run_id)
    approvals = [e["by"] for e in events if e["type"] == "approval"]
    assert approvals[0] == "key:alice"
    assert len(approvals) == 2
    assert approvals[1] in {"key:bob", "key:carol"}
    decisions = [e for e in events if e["type"] == "decision"]
    assert [d["by"] for d in decisions] == [approvals[1]]


async def test_subscribers_receive_policy_decisions_and_each_approval(cluster: Cluster, as_: Any) -> None:
    # given a subscriber on instance a, resumed after a marker run's last event
    marker = await start_run(as_(ADMIN, cluster.b), token(), calls=1, delay=0.6)
    after = (await run_events(as_(ADMIN, cluster.b), marker["runId"]))[-1]["id"]
    async with ws_connect(cluster.a, header=f"Bearer {ADMIN.key}") as ws:
        operation = await ws.subscribe(EVENTS, {"agentId": AGENT, "afterEventId": after})

        # when one run is approved by a policy at start, and another by two people on instance b
        instant = await as_(ADMIN, cluster.b).data(
            "mutation S($input: StartRunInput!) { startRun(input: $input) { ... on RunOutcome { runId status } } }",
            input={"agentId": AGENT, "prompt": f"{token()} 1 0"},
        )
        assert instant["startRun"]["status"] == "COMPLETED", instant
        two = await start_run(as_(ADMIN, cluster.b), token(), calls=1, delay=0.6)
        call_id = two["run"]["toolCalls"][0]["toolCallId"]
        await decide(as_(ALICE, cluster.b), "approve", two["runId"], call_id)
        await decide(as_(BOB, cluster.b), "approve", two["runId"], call_id)

        received = await ws.events_until(operation, (two["runId"], "completed"))

    # then the subscriber saw the policy's decision and each approval, as they were recorded
    instant_id = instant["startRun"]["runId"]
    assert [(e["type"], e["by"]) for e in received if e["runId"] == instant_id and e["type"] == "decision"] == [
        ("decision", "policy:instant-acts")
    ]
    assert [(e["type"], e["by"]) for e in received if e["runId"] == two["runId"]][2:5] == [
        ("approval", "key:alice"),
        ("approval", "key:bob"),
        ("decision", "key:bob"),
    ]
