"""Bulk against one-by-one decisions over HTTP:
``./dev run python -m bench.bulk [rounds] [calls] [concurrency] [latency_ms]``.

Against a real ``python -m server serve`` process, on the memory store and then on a SQLite file:
each round starts ``2 * calls`` refund runs of the demo ``refund-agent`` (one call each, untimed),
then times ``calls`` ``approveToolCall`` requests sent one after another and one
``decideToolCalls`` approving the other ``calls`` runs (their order alternates between rounds).
Every approval completes its run (the demo's scripted model answers at once), so both sides do
the same work: record, continue, complete. The figure is the median, over the rounds, of each
round's ratio bulk / sequential (paired rounds: a burst of load on the machine hits both sides of
a round alike), with the median milliseconds of each side. ``concurrency`` sets the server's
``RUNSGATE_BULK_CONCURRENCY`` (its default when omitted or ``-``). ``latency_ms`` (default 0) serves
``bench.agents``' ``refund-agent`` instead of the demo's: the same script and tools, with each
model request taking that long, as a hosted model's does (every run then takes two requests to
suspend and one to complete after its approval).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from server.settings import Settings

from .runner import runsgate_server

AGENT = "refund-agent"
START = """mutation($input: StartRunInput!) { startRun(input: $input) {
  ... on RunOutcome { runId status run { toolCalls { toolCallId } } } } }"""
APPROVE = """mutation($input: ApproveToolCallInput!) { approveToolCall(input: $input) {
  __typename ... on RunOutcome { status } } }"""
DECIDE = """mutation($input: DecideToolCallsInput!) { decideToolCalls(input: $input) {
  results { __typename ... on RunOutcome { status } } } }"""


def _gql(client: httpx.Client, query: str, **variables: Any) -> dict[str, Any]:
    response = client.post("/graphql", content=json.dumps({"query": query, "variables": variables}))
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    if body.get("errors"):
        raise RuntimeError(f"errors: {body['errors']}")
    data: dict[str, Any] = body["data"]
    return data


def _pending(client: httpx.Client, count: int) -> list[tuple[str, str]]:
    """Start ``count`` refund runs; their ``(runId, toolCallId)``."""
    calls = []
    for i in range(count):
        prompt = f"Please refund order {2000 + i}"
        outcome = _gql(client, START, input={"agentId": AGENT, "prompt": prompt})["startRun"]
        assert outcome["status"] == "SUSPENDED", outcome
        calls.append((outcome["runId"], outcome["run"]["toolCalls"][0]["toolCallId"]))
    return calls


def _sequential(client: httpx.Client, calls: list[tuple[str, str]]) -> float:
    begun = time.perf_counter()
    for run_id, call_id in calls:
        answer = _gql(client, APPROVE, input={"agentId": AGENT, "runId": run_id, "toolCallId": call_id})
        assert answer["approveToolCall"]["status"] == "COMPLETED", answer
    return (time.perf_counter() - begun) * 1000


def _bulk(client: httpx.Client, calls: list[tuple[str, str]]) -> float:
    decisions = [{"runId": run_id, "toolCallId": call_id, "kind": "APPROVED"} for run_id, call_id in calls]
    begun = time.perf_counter()
    results = _gql(client, DECIDE, input={"agentId": AGENT, "decisions": decisions})["decideToolCalls"]["results"]
    elapsed = (time.perf_counter() - begun) * 1000
    assert [r["status"] for r in results] == ["COMPLETED"] * len(calls), results
    return elapsed


def measure(
    store: str, rounds: int, calls: int, concurrency: int | None = None, latency_ms: float = 0
) -> dict[str, float]:
    """Paired rounds on one server; median ms of each side and median ratio bulk / sequential."""
    environment = {
        "RUNSGATE_STORE": "",
        "RUNSGATE_TOOL_RULES": "[]",  # every refund waits for its decision, whatever its amount
        "RUNSGATE_BULK_CONCURRENCY": str(concurrency or Settings().bulk_concurrency),
    }
    if latency_ms:
        environment |= {"RUNSGATE_AGENTS": "bench.agents:AGENTS", "BENCH_MODEL_LATENCY": str(latency_ms / 1000)}
    sequential_ms, bulk_ms, ratios = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        environment["RUNSGATE_STORE"] = f"sqlite:///{Path(tmp) / 'bench.db'}" if store == "sqlite" else "memory://"
        with (
            runsgate_server(Path(tmp) / "server.log", 60, workers=1, **environment) as (url, _pid),
            httpx.Client(base_url=url, timeout=120, headers={"content-type": "application/json"}) as client,
        ):
            _bulk(client, _pending(client, 5))  # warm-up: both paths imported and cached
            _sequential(client, _pending(client, 5))
            for round_ in range(rounds):
                one_by_one, together = _pending(client, calls), _pending(client, calls)
                if round_ % 2:
                    bulk = _bulk(client, together)
                    sequential = _sequential(client, one_by_one)
                else:
                    sequential = _sequential(client, one_by_one)
                    bulk = _bulk(client, together)
                sequential_ms.append(sequential)
                bulk_ms.append(bulk)
                ratios.append(bulk / sequential)
    return {
        "sequential_ms": statistics.median(sequential_ms),
        "bulk_ms": statistics.median(bulk_ms),
        "ratio": statistics.median(ratios),
        "ratio_max": max(ratios),
    }


def main(argv: list[str]) -> int:
    rounds = int(argv[0]) if argv else 7
    calls = int(argv[1]) if len(argv) > 1 else 100
    concurrency = int(argv[2]) if len(argv) > 2 and argv[2] != "-" else None
    latency_ms = float(argv[3]) if len(argv) > 3 else 0
    model = f"a model answering in {latency_ms:g} ms" if latency_ms else "the demo's scripted model"
    print(
        f"{calls} approvals: one decideToolCalls vs {calls} sequential approveToolCall, {rounds} paired rounds, {model}"
    )
    print("| store | sequential (ms) | bulk (ms) | bulk / sequential (median of rounds) | worst round |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for store in ("memory", "sqlite"):
        figures = measure(store, rounds, calls, concurrency, latency_ms)
        print(
            f"| {store} | {figures['sequential_ms']:.0f} | {figures['bulk_ms']:.0f} | "
            f"{figures['ratio']:.2f}x | {figures['ratio_max']:.2f}x |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
