"""Latency of subscription events across instances (docs/api.md "Subscriptions").

Starts FerretDB and two runsgate processes on one database, subscribes on instance A (Python
``websockets``, graphql-transport-ws) and starts refund runs one after the other on instance B;
for each run, measures the seconds from sending ``startRun`` to receiving the run's ``started``
and ``suspended`` events on A. Prints the median and maximum per poll interval.

    ./dev run python -m bench.subscription_latency [--runs 20] [--intervals 1,0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from tests._graphql import EVENTS, start_refund_run, ws_connect
from tests._servers import ferretdb, runsgate_processes, with_database


async def measure(a: str, b: str, runs: int) -> list[tuple[float, float]]:
    """(started, suspended) latencies in seconds, one pair per run."""
    results = []
    async with ws_connect(a) as ws:
        operation = await ws.subscribe(EVENTS, {"agentId": "refund-agent", "filter": {"resourceId": "bench"}})
        # warm up until the subscription is registered (the protocol does not acknowledge it)
        while True:
            warm = await start_refund_run(b, resource_id="bench", thread_id=None)
            try:
                await asyncio.wait_for(ws.events_until(operation, (warm, "suspended")), 5)
                break
            except TimeoutError:
                continue
        arrivals: dict[tuple[str, str], float] = {}
        arrived = asyncio.Condition()

        async def receive() -> None:
            while True:
                message = await ws.receive()
                event = message["payload"]["data"]["suspendedRunEvents"]
                async with arrived:
                    arrivals.setdefault((event["runId"], event["type"]), time.perf_counter())
                    arrived.notify_all()

        receiver = asyncio.ensure_future(receive())
        for _ in range(runs):
            sent = time.perf_counter()
            run_id = await start_refund_run(b, resource_id="bench", thread_id=None)
            key = (run_id, "suspended")
            async with arrived:
                await asyncio.wait_for(arrived.wait_for(functools.partial(arrivals.__contains__, key)), 30)
            results.append((arrivals[(run_id, "started")] - sent, arrivals[(run_id, "suspended")] - sent))
        receiver.cancel()
    return results


Measure = Callable[[str, str, int], Coroutine[Any, Any, list[tuple[float, float]]]]
"""``measure(a, b, runs)``: ``runs`` pairs of seconds, instance A's URL and instance B's."""


def report(description: str, measure: Measure, names: tuple[str, str]) -> None:
    """Parse ``--runs`` and ``--intervals``; for each poll interval, start FerretDB's two runsgate
    processes on one fresh database, ``measure`` them, and print the median and maximum of each
    side of the pairs, named ``names``."""
    parser = argparse.ArgumentParser(description=description)
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
            sides = [
                f"{name} after median {statistics.median(seconds):.3f} s (max {max(seconds):.3f} s)"
                for name, seconds in zip(names, zip(*pairs, strict=True), strict=True)
            ]
            print(f"poll interval {interval} s, {args.runs} runs: {', '.join(sides)}")


def main() -> None:
    report(__doc__.splitlines()[0], measure, ("started event", "suspended event"))


if __name__ == "__main__":
    main()
