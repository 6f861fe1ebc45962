"""Replay attacks (issue 42, part B): what one principal's WebSockets that never read make the server hold.

A fresh ``python -m server serve`` process per store (authentication off, on loopback, so every
socket is the one principal ``anonymous``), seeded through the API with ``--runs`` refund runs
whose prompt is ``--prompt-kib`` KiB (their ``started`` events hold it). Then, for each count of
``--sockets``, that many WebSockets each send ``--subscriptions`` operations and never read a
message (the client's receive queue holds one message, then TCP's window closes):

- ``events``: ``suspendedRunEvents(afterEventId: <before the oldest>) { id }``, replaying the
  agent's whole log (issue 42, instance 3);
- ``updates``: ``runUpdates`` of runs that completed (each reads its run's events and stored
  update batches).

While they stay open (``--hold`` seconds), ``/healthz`` is asked one request after another and
the server's memory is read from ``/proc/<pid>/status`` (``VmRSS``; the peak is ``VmHWM``, reset
through ``clear_refs`` first); then the sockets close, and after ``--settle`` seconds the RSS is
read again. The same ``/healthz`` loop measures an idle baseline first. Each row is measured
against the idle figures: the targets are ``/healthz`` p99 within 100 ms of idle, and RSS within
64 MiB of idle during and after.

    ./dev run python -m bench.replay_attacks [--stores sqlite,memory] [--runs 600] [--prompt-kib 32]
        [--sockets 1,2,4,8] [--subscriptions 20] [--attacks events,updates] [--hold 10] [--settle 5]
        [--rate N]

Figures: bench/RESULTS.md "Replay attacks (issue 42)".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

from .bounded_memory import Served, memory_kib, reset_peak, serve

MIB = 1024
"""KiB in a MiB (``memory_kib`` reads KiB)."""
AGENT = "refund-agent"
START = (
    "mutation S($input: StartRunInput!) { startRun(input: $input) { __typename "
    "... on RunOutcome { runId status run { toolCalls { toolCallId } } } } }"
)
APPROVE = (
    "mutation A($input: ApproveToolCallInput!) { approveToolCall(input: $input) { __typename "
    "... on RunOutcome { status } } }"
)
EVENTS = (
    "subscription E($agentId: ID!, $after: ID) { suspendedRunEvents(agentId: $agentId, afterEventId: $after) { id } }"
)
UPDATES = "subscription U($agentId: ID!, $runId: ID!) { runUpdates(agentId: $agentId, runId: $runId) { id kind } }"
BEFORE_ALL = "0" * 20 + "-" + "0" * 12
"""An event id before every event: a replay of the whole log."""


@dataclass
class Seeded:
    runs: int
    completed: list[str]
    """Run ids approved to completion (what ``updates`` replays)."""
    seconds: float


def seed(url: str, runs: int, prompt_bytes: int, completed: int) -> Seeded:
    """Start ``runs`` refund runs with a prompt of ``prompt_bytes`` bytes (4 at a time), and
    approve the first ``completed`` of them."""
    started = time.perf_counter()
    lead = "Please refund order 1042. "
    prompt = lead + "x" * (prompt_bytes - len(lead))

    def one(number: int) -> dict[str, Any]:
        variables = {"input": {"agentId": AGENT, "prompt": prompt, "resourceId": f"bench-{number % 10}"}}
        with httpx.Client(base_url=url, timeout=120) as client:
            body = client.post("/graphql", json={"query": START, "variables": variables}).json()
        outcome: dict[str, Any] = body["data"]["startRun"]
        return outcome

    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(one, range(runs)))
    done = []
    with httpx.Client(base_url=url, timeout=120) as client:
        for outcome in outcomes[:completed]:
            call = outcome["run"]["toolCalls"][0]["toolCallId"]
            variables = {"input": {"agentId": AGENT, "runId": outcome["runId"], "toolCallId": call}}
            answer = client.post("/graphql", json={"query": APPROVE, "variables": variables}).json()
            assert answer["data"]["approveToolCall"]["status"] == "COMPLETED", answer
            done.append(outcome["runId"])
    return Seeded(runs=len(outcomes), completed=done, seconds=time.perf_counter() - started)


class HealthProbe:
    """``GET /healthz`` one after another on a thread, keeping each answer's time (ms)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.times: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as client:
            while not self._stop.is_set():
                started = time.perf_counter()
                try:
                    ok = client.get("/healthz").status_code == 200
                except httpx.HTTPError:
                    ok = False
                if ok:
                    self.times.append((time.perf_counter() - started) * 1000)
                else:
                    self.failures += 1
                time.sleep(0.01)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def p99(self) -> float:
        if not self.times:
            return math.nan
        ordered = sorted(self.times)
        return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


@dataclass
class Row:
    store: str
    attack: str
    sockets: int
    operations: int
    held: Held
    rss_idle_mib: float
    peak_mib: float
    after_mib: float
    p99_idle_ms: float
    p99_ms: float
    healthz_answers: int


async def _open_sockets(url: str, count: int) -> list[ClientConnection]:
    sockets = []
    for _ in range(count):
        socket = await connect(
            url.replace("http", "ws", 1) + "/graphql",
            subprotocols=["graphql-transport-ws"],  # type: ignore[list-item]
            max_queue=1,
            max_size=None,
        )
        await socket.send(json.dumps({"type": "connection_init"}))
        sockets.append(socket)
    return sockets


@dataclass
class Held:
    """What the server said it held at most while the sockets were open (its ``/metrics``; zeros
    from a server without these gauges)."""

    sockets: float = 0.0
    operations: float = 0.0
    held_bytes: float = 0.0


async def _gauges(http: httpx.AsyncClient, held: Held) -> None:
    text = (await http.get("/metrics")).text
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == "runsgate_websockets":
            held.sockets = max(held.sockets, float(value))
        elif name == "runsgate_websocket_operations":
            held.operations = max(held.operations, float(value))
        elif name == "runsgate_subscription_held_bytes":
            held.held_bytes = max(held.held_bytes, float(value))


async def _attack(
    url: str, attack: str, sockets: int, subscriptions: int, runs: list[str], hold: float, pid: int
) -> tuple[int, float, Held]:
    """Open the sockets, send the operations, hold them for ``hold`` seconds without reading;
    the operations sent, the peak RSS (MiB) and what the server said it held meanwhile."""
    opened = await _open_sockets(url, sockets)
    sent = 0
    peak = 0.0
    held = Held()
    try:
        for number, socket in enumerate(opened):
            for operation in range(subscriptions):
                if attack == "events":
                    payload = {"query": EVENTS, "variables": {"agentId": AGENT, "after": BEFORE_ALL}}
                else:
                    run = runs[(number * subscriptions + operation) % len(runs)]
                    payload = {"query": UPDATES, "variables": {"agentId": AGENT, "runId": run}}
                await socket.send(json.dumps({"id": str(operation), "type": "subscribe", "payload": payload}))
                sent += 1
        deadline = time.monotonic() + hold
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            while time.monotonic() < deadline:
                await asyncio.sleep(0.5)
                peak = max(peak, memory_kib(pid)["VmHWM"] / MIB)
                await _gauges(http, held)
    finally:
        for socket in opened:
            socket.transport.abort()  # as a client that goes away: no closing handshake to wait for
    return sent, peak, held


def measure(store: str, args: argparse.Namespace) -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="runsgate-bench-") as folder:
        variables = {"RUNSGATE_SWEEP_INTERVAL": "0", "RUNSGATE_SUBSCRIPTION_POLL_INTERVAL": "1"}
        if args.rate is not None:
            variables["RUNSGATE_MAX_SUBSCRIPTION_RATE_PER_PRINCIPAL"] = str(args.rate)
        if store == "sqlite":
            variables["RUNSGATE_STORE"] = f"sqlite:///{Path(folder) / 'runsgate.db'}"
        with serve(Path(folder) / "runsgate.log", **variables) as server:
            most = max(args.sockets) * args.subscriptions
            seeded = seed(server.url, args.runs, args.prompt_kib * 1024, min(args.runs, most))
            print(
                f"{store}: {seeded.runs} runs seeded ({len(seeded.completed)} completed) in {seeded.seconds:.0f} s",
                flush=True,
            )
            rows += _rows(server, store, seeded, args)
    return rows


def _rows(server: Served, store: str, seeded: Seeded, args: argparse.Namespace) -> list[Row]:
    rows = []
    httpx.get(f"{server.url}/healthz", timeout=30)
    time.sleep(1)
    idle_rss = memory_kib(server.pid)["VmRSS"] / MIB
    with HealthProbe(server.url) as idle:
        time.sleep(args.hold)
    for attack in args.attacks:
        for sockets in args.sockets:
            reset_peak(server.pid)
            with HealthProbe(server.url) as probe:
                sent, peak, held = asyncio.run(
                    _attack(server.url, attack, sockets, args.subscriptions, seeded.completed, args.hold, server.pid)
                )
            time.sleep(args.settle)
            after = memory_kib(server.pid)["VmRSS"] / MIB
            rows.append(
                Row(
                    store=store,
                    attack=attack,
                    sockets=sockets,
                    operations=sent,
                    held=held,
                    rss_idle_mib=idle_rss,
                    peak_mib=peak,
                    after_mib=after,
                    p99_idle_ms=idle.p99(),
                    p99_ms=probe.p99(),
                    healthz_answers=len(probe.times),
                )
            )
            print(_line(rows[-1]), flush=True)
    return rows


HEADER = (
    "| store | attack | sockets | operations sent | in flight (server) | held (server) | RSS idle | peak during "
    "| after close | /healthz p99 idle | p99 during | answers |\n"
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
)


def _line(row: Row) -> str:
    return (
        f"| {row.store} | {row.attack} | {row.sockets} | {row.operations} | {row.held.operations:.0f} "
        f"| {row.held.held_bytes / (1 << 20):.1f} MiB | {row.rss_idle_mib:.0f} MiB "
        f"| {row.peak_mib - row.rss_idle_mib:+.1f} MiB | {row.after_mib - row.rss_idle_mib:+.1f} MiB "
        f"| {row.p99_idle_ms:.1f} ms | {row.p99_ms:.1f} ms | {row.healthz_answers} |"
    )


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _numbers(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


@contextmanager
def _timed(title: str) -> Iterator[None]:
    started = time.perf_counter()
    print(title, flush=True)
    yield
    print(f"({time.perf_counter() - started:.0f} s)", flush=True)


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--stores", default="sqlite,memory", help="stores to measure: sqlite, memory")
    parser.add_argument("--runs", type=int, default=600, help="runs seeded")
    parser.add_argument("--prompt-kib", type=int, default=32, help="prompt of each run, KiB")
    parser.add_argument("--sockets", type=_numbers, default=[1, 2, 4, 8], help="socket counts, comma-separated")
    parser.add_argument("--subscriptions", type=int, default=20, help="operations per socket")
    parser.add_argument("--attacks", default="events,updates", help="events, updates")
    parser.add_argument("--hold", type=float, default=10.0, help="seconds the sockets stay open unread")
    parser.add_argument("--rate", type=int, help="RUNSGATE_MAX_SUBSCRIPTION_RATE_PER_PRINCIPAL (default: the server's)")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after closing before RSS is read")
    args = parser.parse_args(argv)
    args.attacks = [a for a in args.attacks.split(",") if a]
    print(f"uptime before: {uptime()}", flush=True)
    rows: list[Row] = []
    for store in [s for s in args.stores.split(",") if s]:
        with _timed(f"\n{store}"):
            rows += measure(store, args)
    print(f"\nuptime after: {uptime()}\n\n{HEADER}")
    for row in rows:
        print(_line(row))
    return rows


if __name__ == "__main__":
    main()
