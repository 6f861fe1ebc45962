"""Two real runsgate processes on one store (docs/guarantees.md).

A module fixture starts ``python -m server serve`` twice against the same fresh store (a SQLite
file, then a MongoDB database),
with ``tests.instances.agents`` as the registry; the tests speak GraphQL over HTTP to both.
The approval tool of ``gate-agent`` appends one line per execution to a shared file, so the
tests count real executions across processes.

Racing decisions must all land while the run is still stored: once a run finishes its
snapshot is deleted and a late decision gets ``RunNotFound``. The race tests therefore give
the tool a short delay (``RACE_TOOL_DELAY``), which keeps the run claimed (``resuming``) while
the losing requests arrive.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests._servers import runsgate_processes, shared_store_env

from .._graphql import GraphQLClient
from ._runs import (
    assert_gone_everywhere,
    decide,
    listing,
    run_events,
    split_results,
    start_run,
    suspended_run,
    token,
    when,
    without_events,
)
from .agents import side_effect_lines

RACE_TOOL_DELAY = 1.5
"""Seconds ``act`` sleeps in the race tests, so every racing request finds the run stored."""


@dataclass
class Cluster:
    a: str
    """Base URL of the first instance."""
    b: str
    """Base URL of the second instance."""
    side_effects: Path

    def lines(self, token: str) -> list[list[str]]:
        """Side-effect lines (``label, toolCallId, pid``) of runs started with ``token``."""
        return side_effect_lines(self.side_effects, token)


@pytest.fixture(scope="module")
def cluster(
    request: pytest.FixtureRequest, shared_store_kind: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Two server processes on the same fresh store, sharing the side-effect file."""
    workdir = tmp_path_factory.mktemp("two-instances")
    side_effects = workdir / "side-effects.log"
    side_effects.touch()
    with runsgate_processes(
        [workdir / "a.log", workdir / "b.log"],
        **shared_store_env(request, shared_store_kind, workdir),
        RUNSGATE_AGENTS="tests.instances.agents:AGENTS",
        RUNSGATE_GRAPHIQL="false",
        RUNSGATE_TEST_SIDE_EFFECTS=str(side_effects),
    ) as (a, b):
        yield Cluster(a, b, side_effects)


@pytest.fixture
async def clients(cluster: Cluster) -> AsyncIterator[tuple[GraphQLClient, GraphQLClient]]:
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
    async with (
        GraphQLClient.at(cluster.a, limits=limits) as a,
        GraphQLClient.at(cluster.b, limits=limits) as b,
    ):
        yield a, b


# -- tests ------------------------------------------------------------------------------------
async def test_fifty_concurrent_approvals_across_instances_one_wins(
    cluster: Cluster, clients: tuple[GraphQLClient, GraphQLClient]
) -> None:
    tok = token()
    started = await start_run(clients[0], tok, calls=1, delay=RACE_TOOL_DELAY)
    run_id, call_id = started["runId"], started["run"]["toolCalls"][0]["toolCallId"]

    results = await asyncio.gather(*(decide(clients[i % 2], "approve", run_id, call_id) for i in range(50)))

    winners, losers = split_results(results)
    assert len(winners) == 1, Counter(r["__typename"] for r in results)
    assert winners[0]["status"] == "COMPLETED", winners[0]
    assert winners[0]["output"] == f"success: did {tok}#1"
    assert len(losers) == 49
    assert {r["__typename"] for r in losers} == {"ToolCallAlreadyDecided"}, Counter(r.get("code") for r in losers)
    assert {(r["runId"], r["toolCallId"], r["code"]) for r in losers} == {
        (run_id, call_id, "TOOL_CALL_ALREADY_DECIDED")
    }
    named = {(r["decision"]["kind"], r["decision"]["decidedAt"]) for r in losers}
    assert len(named) == 1, named
    ((kind, decided_at),) = named
    assert kind == "APPROVED"

    lines = cluster.lines(tok)
    assert len(lines) == 1, lines
    assert lines[0][1] == call_id

    events = await run_events(clients[1], run_id)
    decisions = [e for e in events if e["type"] == "decision"]
    assert len(decisions) == 1, events
    assert decisions[0]["data"]["toolCallId"] == call_id
    assert decisions[0]["data"]["kind"] == "approved"
    assert when(decisions[0]["at"]) == when(decided_at)
    assert [e["type"] for e in events].count("completed") == 1, events
    assert events == await run_events(clients[0], run_id)

    await assert_gone_everywhere(clients, run_id)


async def test_approve_and_decline_racing_across_instances(
    cluster: Cluster, clients: tuple[GraphQLClient, GraphQLClient]
) -> None:
    tok = token()
    started = await start_run(clients[1], tok, calls=1, delay=RACE_TOOL_DELAY)
    run_id, call_id = started["runId"], started["run"]["toolCalls"][0]["toolCallId"]

    # 25 approvals and 25 declines, each kind split over both instances, interleaved.
    requests = []
    for i in range(50):
        kind = "approve" if i % 2 == 0 else "decline"
        client = clients[(i // 2) % 2]
        requests.append(decide(client, kind, run_id, call_id, reason="not today"))
    results = await asyncio.gather(*requests)

    winners, losers = split_results(results)
    assert len(winners) == 1, Counter(r["__typename"] for r in results)
    assert len(losers) == 49
    assert {r["__typename"] for r in losers} == {"ToolCallAlreadyDecided"}
    named = {(r["decision"]["kind"], r["decision"]["decidedAt"], r["decision"]["reason"]) for r in losers}
    assert len(named) == 1, named
    ((kind, _, reason),) = named
    assert winners[0]["status"] == "COMPLETED", winners[0]

    lines = cluster.lines(tok)
    if kind == "DECLINED":
        assert reason == "not today"
        assert lines == []
        assert "not today" in winners[0]["output"]
        assert "did" not in winners[0]["output"]
    else:
        assert kind == "APPROVED"
        assert reason is None
        assert len(lines) == 1, lines
        assert winners[0]["output"] == f"success: did {tok}#1"

    events = await run_events(clients[0], run_id)
    assert [e["type"] for e in events].count("decision") == 1, events
    assert [e["type"] for e in events].count("completed") == 1, events
    await assert_gone_everywhere(clients, run_id)


TWO_CALL_ROUNDS = 12
"""Runs raced in the two-calls test; each is one chance for the race to go wrong."""


async def _two_calls_round(cluster: Cluster, clients: tuple[GraphQLClient, GraphQLClient], round_: int) -> list[str]:
    """One run with two pending calls, each approved at once on another instance; the problems seen."""
    tok = token()
    started = await start_run(clients[round_ % 2], tok, calls=2)
    run_id = started["runId"]
    first, second = (call["toolCallId"] for call in started["run"]["toolCalls"])

    results = await asyncio.gather(
        decide(clients[0], "approve", run_id, first), decide(clients[1], "approve", run_id, second)
    )
    problems: list[str] = []
    if [r["__typename"] for r in results] != ["RunOutcome", "RunOutcome"]:
        return [f"run {run_id}: not two RunOutcomes: {results}"]
    statuses = sorted(r["status"] for r in results)
    if statuses != ["COMPLETED", "SUSPENDED"]:
        problems.append(f"run {run_id}: outcome statuses {statuses}, want one COMPLETED")
    else:
        completed = next(r for r in results if r["status"] == "COMPLETED")
        if completed["output"] != f"success: did {tok}#1; success: did {tok}#2":
            problems.append(f"run {run_id}: output {completed['output']!r}")

    lines = sorted((row[0], row[1]) for row in cluster.lines(tok))
    if lines != [(f"{tok}#1", first), (f"{tok}#2", second)]:
        problems.append(f"run {run_id}: side effects {lines}, want one per call")

    events = await run_events(clients[round_ % 2], run_id)
    types = [e["type"] for e in events]
    if types.count("completed") != 1 or "failed" in types:
        problems.append(f"run {run_id}: events {types}, want exactly one completed")
    decisions = sorted((e["data"]["toolCallId"], e["data"]["kind"]) for e in events if e["type"] == "decision")
    if decisions != sorted([(first, "approved"), (second, "approved")]):
        problems.append(f"run {run_id}: decision events {decisions}")

    for name, client in zip("ab", clients, strict=True):
        stored = await suspended_run(client, run_id)
        if stored is not None:
            decided = [(c["toolCallId"], (c["decision"] or {}).get("kind")) for c in stored["toolCalls"]]
            problems.append(f"run {run_id}: still listed on {name} as {stored['status']} with decisions {decided}")
    return problems


async def test_two_calls_approved_at_once_on_different_instances_continue_once(
    cluster: Cluster, clients: tuple[GraphQLClient, GraphQLClient]
) -> None:
    rounds = await asyncio.gather(*(_two_calls_round(cluster, clients, round_) for round_ in range(TWO_CALL_ROUNDS)))
    problems = [problem for round_problems in rounds for problem in round_problems]
    assert problems == [], "\n".join(problems)


async def test_idempotency_key_across_instances(cluster: Cluster, clients: tuple[GraphQLClient, GraphQLClient]) -> None:
    a, b = clients
    key = f"k1-{uuid.uuid4().hex[:6]}"
    tok = token()
    started = await start_run(a, tok, calls=2)
    run_id = started["runId"]
    first, second = (call["toolCallId"] for call in started["run"]["toolCalls"])

    on_a = await decide(a, "approve", run_id, first, key=key)
    assert on_a["__typename"] == "RunOutcome", on_a
    assert on_a["status"] == "SUSPENDED", on_a
    on_b = await decide(b, "approve", run_id, first, key=key)
    assert without_events(on_b) == without_events(on_a)

    # The other call, without a key, finishes the run: the first call ran exactly once.
    done = await decide(b, "approve", run_id, second)
    assert done["status"] == "COMPLETED", done
    assert sorted(row[1] for row in cluster.lines(tok)) == sorted([first, second])

    # Replays keep answering the first result, after the run finished, on both instances.
    # (``run.events`` is read live from the audit log, so it grows; the rest is the stored answer.)
    assert without_events(await decide(b, "approve", run_id, first, key=key)) == without_events(on_a)
    assert without_events(await decide(a, "approve", run_id, first, key=key)) == without_events(on_a)
    assert len(cluster.lines(tok)) == 2

    for client in clients:
        reused = await decide(client, "approve", run_id, second, key=key)
        assert reused["__typename"] == "IdempotencyKeyReused", reused
        assert reused["code"] == "IDEMPOTENCY_KEY_REUSED"
        assert reused["idempotencyKey"] == key
    assert len(cluster.lines(tok)) == 2

    # Simple-case variant: a one-call run, key on A then B, side effect once.
    tok2 = token()
    single = await start_run(b, tok2, calls=1)
    call = single["run"]["toolCalls"][0]["toolCallId"]
    key2 = f"k1-{uuid.uuid4().hex[:6]}"
    on_a = await decide(a, "approve", single["runId"], call, key=key2)
    assert on_a["status"] == "COMPLETED", on_a
    assert await decide(b, "approve", single["runId"], call, key=key2) == on_a
    assert len(cluster.lines(tok2)) == 1
    reused = await decide(b, "approve", single["runId"], "no-such-call", key=key2)
    assert reused["__typename"] == "IdempotencyKeyReused", reused


async def test_listing_is_the_same_from_both_instances(
    cluster: Cluster, clients: tuple[GraphQLClient, GraphQLClient]
) -> None:
    a, b = clients
    thread = f"thread-{uuid.uuid4().hex[:8]}"
    on_a = [await start_run(a, token(), calls=2, thread=thread) for _ in range(2)]
    on_b = await start_run(b, token(), calls=1, thread=thread)
    run_ids = {run["runId"] for run in [*on_a, on_b]}

    listed_a, listed_b = await listing(a, thread), await listing(b, thread)
    assert listed_a == listed_b
    assert listed_a["totalCount"] == 3
    assert {node["runId"] for node in listed_a["nodes"]} == run_ids
    for run_id in run_ids:
        one_a, one_b = await suspended_run(a, run_id), await suspended_run(b, run_id)
        assert one_a is not None
        assert one_a == one_b

    # A decision made on B shows up identically from A.
    target = on_a[0]
    outcome = await decide(b, "approve", target["runId"], target["run"]["toolCalls"][0]["toolCallId"])
    assert outcome["status"] == "SUSPENDED"
    listed_a, listed_b = await listing(a, thread), await listing(b, thread)
    assert listed_a == listed_b
    node = next(e["node"] for e in listed_a["edges"] if e["node"]["runId"] == target["runId"])
    assert node["toolCalls"][0]["decision"]["kind"] == "APPROVED"
    assert node == outcome["run"]
    # The whole agent listing (no filter) agrees too.
    assert await listing(a) == await listing(b)
