"""Run updates and decisions that do not wait (issue 29 part 4), against real server processes.

Each measurement starts fresh ``python -m server serve`` processes (authentication off, on
loopback, ``RUNSGATE_AGENTS=bench.agents:AGENTS``) and drives them over HTTP and WebSocket:

- **first delta, same instance**: ``refund-agent-streamed`` (its scripted model streams: 200 ms
  to the first token, 20 ms per token after it) on the memory store; a ``runUpdates``
  subscriber, then a ``waitFor: RECORDED`` approval. Time from the HTTP answer to the first
  ``TEXT`` update, per run (``--runs``), p50 and max.
- **first delta, across instances**: the same with two processes on one SQLite file, the
  subscriber on B, the approval on A (``RUNSGATE_RUN_UPDATES_POLL_INTERVAL``, default 0.25 s,
  and ``RUNSGATE_RUN_UPDATES_INTERVAL``, 0.1 s).
- **batch**: ``decideToolCalls`` of ``--batch`` (100) approvals on ``refund-agent`` with a 50 ms
  model (``BENCH_MODEL_LATENCY``), answered with ``RECORDED`` and with ``OUTCOME``, alternately
  (``--rounds`` of each), on the memory store: the time to the HTTP answer.
- **memory per stream**: ``--streams`` (500) ``runUpdates`` subscriptions held open on runs
  waiting for decisions, over 10 WebSockets; the server's ``VmRSS`` before and after, divided by
  the streams.

    ./dev run python -m bench.run_updates [--runs 20] [--batch 100] [--rounds 3] [--streams 500]

Figures: bench/RESULTS.md "Run updates (issue 29)".
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests._graphql import ws_connect

from .bounded_memory import Served, memory_kib, serve

STREAMED = "refund-agent-streamed"
SLOW = "refund-agent"
PROMPT = "Please refund order 1042"
START = (
    "mutation S($input: StartRunInput!) { startRun(input: $input) { __typename "
    "... on RunOutcome { runId status run { toolCalls { toolCallId } } } } }"
)
APPROVE = (
    "mutation A($input: ApproveToolCallInput!) { approveToolCall(input: $input) { __typename "
    "... on RunOutcome { status } } }"
)
DECIDE = (
    "mutation D($input: DecideToolCallsInput!) { decideToolCalls(input: $input) { results { __typename "
    "... on RunOutcome { status } } } }"
)
UPDATES = "subscription U($agentId: ID!, $runId: ID!) { runUpdates(agentId: $agentId, runId: $runId) { id kind } }"
ENV = {"RUNSGATE_AGENTS": "bench.agents:AGENTS", "RUNSGATE_GRAPHIQL": "false"}


async def _post(http: httpx.AsyncClient, url: str, query: str, **variables: Any) -> dict[str, Any]:
    response = await http.post(f"{url}/graphql", json={"query": query, "variables": variables})
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    assert "errors" not in body, body
    data: dict[str, Any] = body["data"]
    return data


async def _suspended(http: httpx.AsyncClient, url: str, agent: str) -> tuple[str, str]:
    outcome = (await _post(http, url, START, input={"agentId": agent, "prompt": PROMPT}))["startRun"]
    assert outcome["status"] == "SUSPENDED", outcome
    return outcome["runId"], outcome["run"]["toolCalls"][0]["toolCallId"]


async def _first_delta(decide_url: str, watch_url: str) -> float:
    """Seconds from a RECORDED approval's HTTP answer (on ``decide_url``) to the first TEXT update
    a subscriber on ``watch_url`` receives."""
    async with httpx.AsyncClient(timeout=60) as http, ws_connect(watch_url) as ws:
        run_id, call_id = await _suspended(http, decide_url, STREAMED)
        operation = await ws.subscribe(UPDATES, {"agentId": STREAMED, "runId": run_id})
        await asyncio.sleep(0.3)  # the subscription is registered before the decision
        answered = await _post(
            http,
            decide_url,
            APPROVE,
            input={"agentId": STREAMED, "runId": run_id, "toolCallId": call_id, "waitFor": "RECORDED"},
        )
        at = time.perf_counter()
        assert answered["approveToolCall"]["status"] == "RESUMING", answered
        while True:
            message = await ws.receive()
            assert (message["id"], message["type"]) == (operation, "next"), message
            if message["payload"]["data"]["runUpdates"]["kind"] == "TEXT":
                first = time.perf_counter() - at
                break
        while (await ws.receive())["type"] != "complete":
            pass
        return first


async def _deltas(decide_url: str, watch_url: str, runs: int) -> list[float]:
    return [await _first_delta(decide_url, watch_url) for _ in range(runs)]


async def _batch(url: str, size: int, wait_for: str) -> float:
    """Seconds to the answer of one ``decideToolCalls`` of ``size`` approvals, then waits until
    every run finished (so rounds do not overlap)."""
    async with httpx.AsyncClient(timeout=600) as http:
        runs = [await _suspended(http, url, SLOW) for _ in range(size)]
        decisions = [{"runId": r, "toolCallId": c, "kind": "APPROVED"} for r, c in runs]
        started = time.perf_counter()
        data = await _post(http, url, DECIDE, input={"agentId": SLOW, "decisions": decisions, "waitFor": wait_for})
        took = time.perf_counter() - started
        statuses = {r["status"] for r in data["decideToolCalls"]["results"]}
        assert statuses == ({"RESUMING"} if wait_for == "RECORDED" else {"COMPLETED"}), statuses
        query = "query Q($a: ID!, $r: ID!) { suspendedRun(agentId: $a, runId: $r) { runId } }"
        for run_id, _ in runs:
            # another process's state: nothing to await but a poll
            while (await _post(http, url, query, a=SLOW, r=run_id))["suspendedRun"] is not None:  # noqa: ASYNC110
                await asyncio.sleep(0.1)
        return took


async def _streams(served: Served, count: int, sockets: int = 10) -> tuple[int, int]:
    """``VmRSS`` (KiB) before and after ``count`` open ``runUpdates`` streams."""
    async with httpx.AsyncClient(timeout=60) as http:
        runs = [await _suspended(http, served.url, STREAMED) for _ in range(count)]
    async with AsyncExitStack() as stack:
        opened = [await stack.enter_async_context(ws_connect(served.url)) for _ in range(sockets)]
        before = memory_kib(served.pid)["VmRSS"]
        for index, (run_id, _) in enumerate(runs):
            await opened[index % sockets].subscribe(UPDATES, {"agentId": STREAMED, "runId": run_id})
        await asyncio.sleep(3)  # every stream registered and waiting
        after = memory_kib(served.pid)["VmRSS"]
    return before, after


@contextmanager
def _one(log: Path, **variables: str) -> Iterator[Served]:
    with serve(log, **ENV, **variables) as served:
        yield served


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.run_updates")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--streams", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        with _one(tmp / "one.log") as one:
            same = asyncio.run(_deltas(one.url, one.url, args.runs))
        print(
            f"first delta, same instance: p50 {_ms(statistics.median(same))}, max {_ms(max(same))} ({args.runs} runs)"
        )
        store = {"RUNSGATE_STORE": f"sqlite:///{tmp / 'shared.db'}"}
        with _one(tmp / "a.log", **store) as a, _one(tmp / "b.log", **store) as b:
            across = asyncio.run(_deltas(a.url, b.url, args.runs))
        print(
            f"first delta, across instances (poll 0.25 s): p50 {_ms(statistics.median(across))}, "
            f"max {_ms(max(across))} ({args.runs} runs)"
        )
        with _one(tmp / "batch.log", BENCH_MODEL_LATENCY="0.05") as batch:
            recorded, outcome = [], []
            for _ in range(args.rounds):
                recorded.append(asyncio.run(_batch(batch.url, args.batch, "RECORDED")))
                outcome.append(asyncio.run(_batch(batch.url, args.batch, "OUTCOME")))
        r, o = statistics.median(recorded), statistics.median(outcome)
        print(
            f"decideToolCalls of {args.batch}, 50 ms model: RECORDED {_ms(r)}, OUTCOME {_ms(o)}, "
            f"ratio {r / o:.3f} (medians of {args.rounds} rounds each)"
        )
        # every stream held open, whatever one principal (`anonymous`) may have by default
        many = str(max(args.streams, 1))
        with _one(
            tmp / "streams.log", RUNSGATE_MAX_WS_OPERATIONS=many, RUNSGATE_MAX_WS_OPERATIONS_PER_PRINCIPAL=many
        ) as held:
            before, after = asyncio.run(_streams(held, args.streams))
        print(
            f"memory: {args.streams} open streams, VmRSS {before / 1024:,.1f} -> {after / 1024:,.1f} MiB, "
            f"{(after - before) / args.streams:,.1f} KiB per stream"
        )


if __name__ == "__main__":
    main()
