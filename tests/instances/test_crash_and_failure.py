"""Crashes and failures across real processes (docs/guarantees.md).

- A server killed with SIGKILL in the middle of a slow tool: the other instance's sweeper
  takes the run over once the claim expires and finishes it; the decision is kept.
- A server killed after it answered a ``waitFor: RECORDED`` approval (``RESUMING``) and before
  the continuation it queued ended: the other instance's sweeper finishes the run.
- A model that raises after the approved tool ran: the run stays listed with its decisions and
  ``lastError``; ``retryRun`` on the other instance completes it without running the tool again.
- A newer ``schemaVersion`` in the store: the server refuses to start, saying why.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pymongo import MongoClient

from storage import SCHEMA_VERSION
from tests._servers import (
    ROOT,
    SERVE,
    RunsgateServer,
    free_port,
    runsgate_servers,
    server_env,
    shared_store_env,
    with_database,
)

from .. import _processes
from .._graphql import DETAILED_RESULTS, GraphQLClient
from ._runs import decide, listing, run_events, start_run, suspended_run, token
from .agents import side_effect_lines

CLAIM_TTL = 3.0
"""Seconds, in the crash test: short, so a dead instance's claim expires quickly."""
SLOW_TOOL = 4.0
"""Seconds ``act`` sleeps in the crash test: long enough to kill its instance midway."""


@dataclass
class Pair:
    a: RunsgateServer
    b: RunsgateServer
    side_effects: Path
    model_down: Path

    def lines(self, tok: str) -> list[list[str]]:
        """Side-effect lines (``label, toolCallId, pid``) of runs started with ``tok``."""
        return side_effect_lines(self.side_effects, tok)


@pytest.fixture
def pair(request: pytest.FixtureRequest, shared_store_kind: str, tmp_path: Path) -> Iterator[Pair]:
    """Two fresh instances on one fresh store (a SQLite file, then a MongoDB database) with a fast
    sweeper; claims last ``CLAIM_TTL`` seconds in tests marked ``short_claims``, else 60 s (so a
    loaded machine never loses one)."""
    claim_ttl = CLAIM_TTL if request.node.get_closest_marker("short_claims") else 60.0
    side_effects, model_down = tmp_path / "side-effects.log", tmp_path / "model-down"
    side_effects.touch()
    with runsgate_servers(
        [tmp_path / "a.log", tmp_path / "b.log"],
        **shared_store_env(request, shared_store_kind, tmp_path),
        RUNSGATE_AGENTS="tests.instances.agents:AGENTS",
        RUNSGATE_GRAPHIQL="false",
        RUNSGATE_CLAIM_TTL=str(claim_ttl),
        RUNSGATE_SWEEP_INTERVAL="0.5",
        RUNSGATE_TEST_SIDE_EFFECTS=str(side_effects),
        RUNSGATE_TEST_MODEL_DOWN=str(model_down),
    ) as (a, b):
        yield Pair(a, b, side_effects, model_down)


@pytest.fixture
async def clients(pair: Pair) -> AsyncIterator[tuple[GraphQLClient, GraphQLClient]]:
    async with GraphQLClient.at(pair.a.url) as a, GraphQLClient.at(pair.b.url) as b:
        yield a, b


async def _until(predicate: Any, seconds: float, what: str) -> Any:
    """Poll ``predicate()`` (async) every 0.1 s until it returns something truthy.

    Polling is the point here: the state lives in other processes, no event can be awaited.
    """
    try:
        async with asyncio.timeout(seconds):
            while not (value := await predicate()):  # noqa: ASYNC110
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"not within {seconds} s: {what}") from None
    return value


@pytest.mark.short_claims
async def test_a_server_killed_after_answering_a_recorded_approval_leaves_the_run_to_the_other(
    pair: Pair, clients: tuple[GraphQLClient, GraphQLClient]
) -> None:
    a, b = clients
    tok = token()
    started = await start_run(a, tok, calls=1, delay=SLOW_TOOL)
    run_id, call_id = started["runId"], started["run"]["toolCalls"][0]["toolCallId"]

    # given A answered a recorded approval, then ran the slow tool in the background
    answered = await decide(a, "approve", run_id, call_id, wait_for="RECORDED")
    assert (answered["__typename"], answered["status"]) == ("RunOutcome", "RESUMING"), answered

    async def resuming() -> bool:
        run = await suspended_run(b, run_id)
        return run is not None and run["status"] == "RESUMING"

    await _until(resuming, 10, "the run is claimed by A")
    await asyncio.sleep(0.5)  # A is inside act's sleep

    # when A dies before the continuation ends
    pair.a.process.send_signal(signal.SIGKILL)
    pair.a.process.wait(timeout=10)

    # then B takes the run over and finishes it; the decision is kept
    async def finished() -> list[dict[str, Any]] | None:
        events = await run_events(b, run_id)
        return events if events[-1]["type"] == "completed" else None

    events = await _until(finished, CLAIM_TTL + SLOW_TOOL + 20, "B completes the run")
    assert await suspended_run(b, run_id) is None
    kinds = [e["type"] for e in events]
    assert kinds == ["started", "suspended", "decision", "resumed", "takeover", "resumed", "completed"], kinds
    assert (events[2]["data"]["toolCallId"], events[2]["data"]["kind"]) == (call_id, "approved")
    assert [(row[1], row[2]) for row in pair.lines(tok)] == [(call_id, str(pair.b.process.pid))]


@pytest.mark.short_claims
async def test_a_server_killed_in_the_middle_of_a_slow_tool_is_taken_over_by_the_other(
    pair: Pair, clients: tuple[GraphQLClient, GraphQLClient]
) -> None:
    a, b = clients
    tok = token()
    started = await start_run(a, tok, calls=1, delay=SLOW_TOOL)
    run_id, call_id = started["runId"], started["run"]["toolCalls"][0]["toolCallId"]

    # given A approved the call and is running the slow tool under its claim
    approving = asyncio.create_task(decide(a, "approve", run_id, call_id))

    async def resuming() -> bool:
        run = await suspended_run(b, run_id)
        return run is not None and run["status"] == "RESUMING"

    await _until(resuming, 10, "the run is claimed by A")
    await asyncio.sleep(0.5)  # A is inside act's sleep

    # when A dies without a chance to clean up
    pair.a.process.send_signal(signal.SIGKILL)
    pair.a.process.wait(timeout=10)
    with pytest.raises(httpx.TransportError):
        await approving

    # then B takes the run over after the claim expired and finishes it
    async def finished() -> list[dict[str, Any]] | None:
        events = await run_events(b, run_id)
        return events if events[-1]["type"] == "completed" else None

    events = await _until(finished, CLAIM_TTL + SLOW_TOOL + 20, "B completes the run")
    assert await suspended_run(b, run_id) is None
    assert run_id not in [n["runId"] for n in (await listing(b))["nodes"]]
    lines = pair.lines(tok)
    assert [(row[1], row[2]) for row in lines] == [(call_id, str(pair.b.process.pid))]  # A died before its effect
    kinds = [e["type"] for e in events]
    assert kinds == ["started", "suspended", "decision", "resumed", "takeover", "resumed", "completed"], kinds
    decision = events[2]
    assert (decision["data"]["toolCallId"], decision["data"]["kind"]) == (call_id, "approved")
    takeover = events[4]
    assert takeover["data"]["previousClaim"]["by"] == events[3]["data"]["instanceId"]
    assert takeover["by"] == events[5]["data"]["instanceId"] != takeover["data"]["previousClaim"]["by"]
    assert events[6]["data"]["output"] == f"success: did {tok}#1"


async def test_a_model_that_raises_keeps_the_run_listed_and_retry_completes_it(
    pair: Pair, clients: tuple[GraphQLClient, GraphQLClient]
) -> None:
    a, b = clients
    agent = "fragile-agent"
    tok = token()
    pair.model_down.touch()
    started = await start_run(a, tok, calls=1, agent=agent)
    run_id, call_id = started["runId"], started["run"]["toolCalls"][0]["toolCallId"]

    # when the call is approved on B and the model fails after the tool ran
    failed = await decide(b, "approve", run_id, call_id, agent=agent)

    # then the outcome says so, and the run stays listed on both instances with decision and error
    assert (failed["__typename"], failed["status"]) == ("RunOutcome", "FAILED"), failed
    assert failed["error"] == "RuntimeError: model provider is down"
    for client in (a, b):
        nodes = (await listing(client, agent=agent))["edges"]
        (listed,) = [edge["node"] for edge in nodes if edge["node"]["runId"] == run_id]
        assert listed["status"] == "SUSPENDED"
        assert (listed["lastError"]["type"], listed["lastError"]["message"]) == (
            "RuntimeError",
            "model provider is down",
        )
        assert listed["toolCalls"][0]["decision"]["kind"] == "APPROVED"
    assert len(pair.lines(tok)) == 1
    # and the sweeper leaves a failed run alone
    await asyncio.sleep(1.5)
    assert (await suspended_run(a, run_id, agent=agent)) is not None

    # when the provider is back and the run is retried on A
    pair.model_down.unlink()
    data = await a.data(DETAILED_RESULTS["retryRun"], input={"agentId": agent, "runId": run_id})

    # then it completes with the tool's first result: the tool ran once
    done = data["retryRun"]
    assert (done["__typename"], done["status"], done["output"]) == ("RunOutcome", "COMPLETED", f"done: did {tok}#1")
    assert len(pair.lines(tok)) == 1
    assert await suspended_run(b, run_id, agent=agent) is None
    kinds = [e["type"] for e in await run_events(b, run_id, agent=agent)]
    assert kinds == ["started", "suspended", "decision", "resumed", "failed", "resumed", "completed"], kinds


@pytest.mark.mongo
def test_the_server_refuses_to_start_on_a_newer_schema_version(mongodb_server: str, tmp_path: Path) -> None:
    uri = with_database(mongodb_server)
    with MongoClient(uri) as client:
        client.get_default_database()["run_snapshots"].insert_one(
            {"_id": "from-the-future", "agentId": "refund-agent", "schemaVersion": SCHEMA_VERSION + 1}
        )

    result = _processes.run(
        [*SERVE, "--port", str(free_port())],
        cwd=ROOT,
        env=server_env(MONGODB_URI=uri, RUNSGATE_LOG_LEVEL="INFO", RUNSGATE_AUTH="off"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert f"runsgate cannot start: the store holds run snapshots of schema version {SCHEMA_VERSION + 1}" in output
    assert "upgrade runsgate" in output
    with MongoClient(uri) as client:
        assert client.get_default_database()["run_snapshots"].count_documents({}) == 1
