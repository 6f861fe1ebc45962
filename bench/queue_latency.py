"""Latency of the live reviewers' queue across instances (docs/api.md "The reviewers' queue, live").

Starts FerretDB and two runsgate processes on one database, subscribes to ``reviewQueueEvents`` on
instance A (Python ``websockets``, graphql-transport-ws) and, on instance B, starts refund runs one
after the other, then approves each; measures the seconds from sending ``startRun`` to the
question's ``ENTERED`` message on A, and from sending the approval to its ``LEFT``. Prints the
median and maximum per poll interval.

    ./dev run python -m bench.queue_latency [--runs 20] [--intervals 1,0.2]
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.subscription_latency import report
from tests._graphql import REFUND, REFUND_PROMPT, GraphQLClient, GraphQLWebSocket, ws_connect

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
    report(__doc__.splitlines()[0], measure, ("ENTERED", "LEFT"))


if __name__ == "__main__":
    main()
