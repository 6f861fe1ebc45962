"""Latency of the live reviewers' queue across instances (docs/api.md "The reviewers' queue, live").

Starts FerretDB and two runsgate processes on one database, subscribes to ``reviewQueueEvents`` on
instance A (Python ``websockets``, graphql-transport-ws) and, on instance B, starts refund runs one
after the other, then approves each; measures the seconds from sending ``startRun`` to the
question's ``ENTERED`` message on A, and from sending the approval to its ``LEFT``. Prints the
median and maximum per poll interval.

    ./dev run python -m bench.queue_latency [--runs 20] [--intervals 1,0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tests._graphql import REFUND, REFUND_PROMPT, GraphQLClient, GraphQLWebSocket, ws_connect
from tests._servers import ferretdb, runsgate_processes, with_database

QUEUE = """subscription Queue { reviewQueueEvents(filter: {resourceId: "bench"}) {
  change runId toolCallId item { toolName } } }"""


async def _until(ws: GraphQLWebSocket, run_id: str, change: str) -> None:
    while True:
        message: dict[str, Any] = (await ws.receive())["payload"]["data"]["reviewQueueEvents"]
        if (message["runId"], message["change"]) == (run_id, change):
            return


async def measure(a: str, b: str, runs: int) -> list[tuple[float, float]]:
    """(entered, left) latencies in seconds, one pair per run."""
    results = []
    async with ws_connect(a) as ws, GraphQLClient.at(b) as gql:
        await ws.subscribe(QUEUE, {})
        while True:  # warm up until the subscription is registered (the protocol does not say)
            warm = await gql.suspend(REFUND, REFUND_PROMPT, resourceId="bench")
            try:
                await asyncio.wait_for(_until(ws, warm["runId"], "ENTERED"), 5)
                break
            except TimeoutError:
                continue
        for _ in range(runs):
            sent = time.perf_counter()
            run = await gql.suspend(REFUND, REFUND_PROMPT, resourceId="bench")
            await asyncio.wait_for(_until(ws, run["runId"], "ENTERED"), 30)
            entered = time.perf_counter() - sent
            sent = time.perf_counter()
            await gql.approve(REFUND, run["runId"], run["toolCalls"][0]["toolCallId"])
            await asyncio.wait_for(_until(ws, run["runId"], "LEFT"), 30)
            results.append((entered, time.perf_counter() - sent))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--intervals", default="1,0.2")
    args = parser.parse_args()
    with ferretdb() as server, tempfile.TemporaryDirectory() as tmp:
        for interval in args.intervals.split(","):
            logs = [Path(tmp) / f"a-{interval}.log", Path(tmp) / f"b-{interval}.log"]
            with runsgate_processes(
                logs, MONGODB_URI=with_database(server), RUNSGATE_SUBSCRIPTION_POLL_INTERVAL=interval
            ) as (a, b):
                pairs = asyncio.run(measure(a, b, args.runs))
            entered, left = [p[0] for p in pairs], [p[1] for p in pairs]
            print(
                f"poll interval {interval} s, {args.runs} runs: ENTERED after median "
                f"{statistics.median(entered):.3f} s (max {max(entered):.3f} s), LEFT after median "
                f"{statistics.median(left):.3f} s (max {max(left):.3f} s)"
            )


if __name__ == "__main__":
    main()
