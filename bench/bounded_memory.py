"""Bounded memory (issue 26): the server's RSS against what a receiver or a client controls.

Two measurements, each on a fresh ``python -m server serve`` process (authentication off, on
loopback), reading the server's resident memory from ``/proc/<pid>/status``: ``VmRSS`` once it
served its first request, then the peak (``VmHWM``, reset through ``/proc/<pid>/clear_refs``
first) while the load runs.

- **receiver**: a webhook receiver answering every delivery with 200 and a body of N MiB
  (``--response-mib 30,300``), written as fast as the connection takes it; 16 refund runs suspend
  at once, so 16 deliveries are in flight together (the dispatcher's ``max_active``). Prints the
  server's peak growth, and how much of each body the receiver got to send before runsgate
  closed the connection.
- **replay**: a SQLite store holding H events of one agent (``--events 10000,100000``, about
  300 bytes of data each), and one WebSocket with five subscriptions (``--subscriptions 5``)
  replaying all of them with ``afterEventId`` from the start; the client reads every event.
  Prints the server's peak growth and the time to receive them all.

    ./dev run python -m bench.bounded_memory [--response-mib 30,300] [--events 10000,100000] [--subscriptions 5]

Figures: bench/RESULTS.md "Bounded memory (issue 26)".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sqlite3
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from storage import SQLiteSnapshotStore
from storage.sqlite.rows import _INSERT_EVENT, _event_row  # the store's own row layout, to seed quickly
from tests._graphql import ws_connect
from tests._receiver import new_secret
from tests._servers import SERVE, free_port, listening_process, server_env

MIB = 1 << 20
START = "mutation S($input: StartRunInput!) { startRun(input: $input) { __typename ... on RunOutcome { status } } }"
DELIVERED = "query D { webhookDeliveries(first: 100, status: DELIVERED) { edges { node { id } } } }"
REPLAY = (
    "subscription R($agentId: ID!, $after: ID) { suspendedRunEvents(agentId: $agentId, afterEventId: $after) "
    "{ id type runId at data } }"
)
FIRST_EVENT = "0" * 20 + "-" + "0" * 12


@dataclass
class Served:
    url: str
    pid: int


@contextmanager
def serve(log: Path, **variables: str) -> Iterator[Served]:
    """``python -m server serve`` on a free loopback port (authentication off), given up to 3
    minutes to listen: the machine may be busy, which these figures record but do not time."""
    port = free_port()
    env = server_env(RUNSGATE_LOG_LEVEL="WARNING", RUNSGATE_AUTH="off", **variables)
    with listening_process([*SERVE, "--port", str(port)], port, log, env=env, timeout=180, marked=False) as process:
        url = f"http://127.0.0.1:{port}"
        for _ in range(1800):
            try:
                if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        yield Served(url, process.pid)


def memory_kib(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of process ``pid``, KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in {"VmRSS", "VmHWM"}:
            fields[name] = int(value.split()[0])
    return fields


def reset_peak(pid: int) -> None:
    """Make ``VmHWM`` start again from the current RSS (``clear_refs`` 5)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


# -- receiver ---------------------------------------------------------------------------------------------
class BigAnswers:
    """A loopback receiver answering each request 200 with a ``size``-byte body; ``sent`` holds
    the body bytes each connection accepted before the peer closed it."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.sent: list[int] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self._listener.settimeout(0.2)
        self._stop = threading.Event()
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/hooks"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        chunk = b"x" * MIB
        with connection:
            reader = connection.makefile("rb")
            length = 0
            while (line := reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            reader.read(length)
            sent = 0
            try:
                connection.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {self.size}\r\n\r\n".encode())
                while sent < self.size:
                    part = chunk[: self.size - sent]
                    connection.sendall(part)
                    sent += len(part)
            except OSError:
                pass
            with self._lock:
                self.sent.append(sent)

    def close(self) -> None:
        self._stop.set()
        self._listener.close()


@dataclass
class ReceiverResult:
    response_mib: int
    deliveries: int
    rss_mib: float
    peak_growth_mib: float
    body_sent_mib_max: float
    seconds: float


def measure_receiver(response_mib: int, deliveries: int = 16) -> ReceiverResult:
    receiver = BigAnswers(response_mib * MIB)
    hooks = [{"url": receiver.url, "secret": new_secret(), "events": ["run.suspended"]}]
    try:
        with (
            tempfile.TemporaryDirectory(prefix="runsgate-bench-") as folder,
            serve(
                Path(folder) / "runsgate.log",
                RUNSGATE_WEBHOOKS=json.dumps(hooks),
                RUNSGATE_WEBHOOK_POLL_INTERVAL="0.2",
                RUNSGATE_SUBSCRIPTION_LOOKBACK="1",
                RUNSGATE_SWEEP_INTERVAL="0",
                RUNSGATE_TOOL_RULES="[]",
            ) as server,
        ):
            pid = server.pid
            with httpx.Client(base_url=server.url, timeout=120) as client:
                client.post("/graphql", json={"query": DELIVERED})  # warm up: every module is loaded
                before = memory_kib(pid)["VmRSS"]
                reset_peak(pid)
                started = time.perf_counter()
                for _ in range(deliveries):
                    variables = {"input": {"agentId": "refund-agent", "prompt": "Please refund order 1042"}}
                    assert client.post("/graphql", json={"query": START, "variables": variables}).status_code == 200
                while True:
                    edges = client.post("/graphql", json={"query": DELIVERED}).json()["data"]["webhookDeliveries"]
                    if len(edges["edges"]) >= deliveries or time.perf_counter() - started > 600:
                        break
                    time.sleep(0.2)
                seconds = time.perf_counter() - started
                peak = memory_kib(pid)["VmHWM"]
    finally:
        receiver.close()
    return ReceiverResult(
        response_mib=response_mib,
        deliveries=len(edges["edges"]),
        rss_mib=before / 1024,
        peak_growth_mib=(peak - before) / 1024,
        body_sent_mib_max=max(receiver.sent or [0]) / MIB,
        seconds=seconds,
    )


# -- replay ---------------------------------------------------------------------------------------------------
def seed_events(path: Path, count: int, agent_id: str = "refund-agent") -> None:
    """``count`` events of ``agent_id``, an hour old and older (before any lookback), ~300 bytes of data each."""

    async def create() -> None:
        store = SQLiteSnapshotStore(path)
        await store.open()
        await store.close()

    asyncio.run(create())
    base = datetime.now(UTC) - timedelta(hours=1)
    base_ns = int(base.timestamp() * 1e9)
    rows = []
    for number in range(count):
        at = base - timedelta(milliseconds=count - number)
        rows.append(
            _event_row(
                {
                    "_id": f"{base_ns - (count - number) * 1000:020d}-{uuid.uuid4().hex[:12]}",
                    "runId": f"run-{number // 5:08d}",
                    "agentId": agent_id,
                    "threadId": "bench-thread",
                    "resourceId": "bench",
                    "type": "decision",
                    "at": at,
                    "by": "key:bench",
                    "data": {"toolCallId": f"call-{number}", "kind": "approved", "reason": "r" * 200},
                }
            )
        )
    with sqlite3.connect(path) as connection:
        connection.executemany(_INSERT_EVENT, rows)


@dataclass
class ReplayResult:
    events: int
    subscriptions: int
    received: int
    rss_mib: float
    peak_growth_mib: float
    seconds: float


async def _replay(url: str, events: int, subscriptions: int) -> int:
    received = 0
    async with ws_connect(url) as ws:
        operations = [
            await ws.subscribe(REPLAY, {"agentId": "refund-agent", "after": FIRST_EVENT}) for _ in range(subscriptions)
        ]
        counts = dict.fromkeys(operations, 0)
        while min(counts.values()) < events:
            message = await ws.receive()
            assert message["type"] == "next", message
            counts[message["id"]] += 1
            received += 1
    return received


def measure_replay(events: int, subscriptions: int = 5) -> ReplayResult:
    with tempfile.TemporaryDirectory(prefix="runsgate-bench-") as folder:
        database = Path(folder) / "runsgate.db"
        seed_events(database, events)
        with serve(
            Path(folder) / "runsgate.log", RUNSGATE_STORE=f"sqlite:///{database}", RUNSGATE_SWEEP_INTERVAL="0"
        ) as server:
            pid = server.pid
            asyncio.run(_replay(server.url, 1, 1))  # warm up: a replay's first event
            before = memory_kib(pid)["VmRSS"]
            reset_peak(pid)
            started = time.perf_counter()
            received = asyncio.run(_replay(server.url, events, subscriptions))
            seconds = time.perf_counter() - started
            peak = memory_kib(pid)["VmHWM"]
    return ReplayResult(
        events=events,
        subscriptions=subscriptions,
        received=received,
        rss_mib=before / 1024,
        peak_growth_mib=(peak - before) / 1024,
        seconds=seconds,
    )


@contextmanager
def _section(title: str) -> Iterator[None]:
    print(f"\n{title}", flush=True)
    yield


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--response-mib", default="30,300", help="body sizes of the receiver's answers, MiB")
    parser.add_argument("--events", default="10000,100000", help="history lengths to replay")
    parser.add_argument("--subscriptions", type=int, default=5, help="subscriptions on the one socket")
    args = parser.parse_args()
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"load average before: {' '.join(load)}")
    with _section("receiver answering 200 with a large body, 16 deliveries in flight"):
        print("| answer body | deliveries | server RSS before | peak growth | most of a body sent | seconds |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for size in [int(part) for part in args.response_mib.split(",") if part.strip()]:
            r = measure_receiver(size)
            print(
                f"| {r.response_mib} MiB | {r.deliveries} | {r.rss_mib:.0f} MiB | {r.peak_growth_mib:+.1f} MiB "
                f"| {r.body_sent_mib_max:.1f} MiB | {r.seconds:.1f} |",
                flush=True,
            )
    with _section(f"{args.subscriptions} subscriptions on one socket replaying the history with afterEventId"):
        print("| history | events received | server RSS before | peak growth | seconds |")
        print("| ---: | ---: | ---: | ---: | ---: |")
        for count in [int(part) for part in args.events.split(",") if part.strip()]:
            p = measure_replay(count, args.subscriptions)
            print(
                f"| {p.events:,} events | {p.received:,} | {p.rss_mib:.0f} MiB | {p.peak_growth_mib:+.1f} MiB "
                f"| {p.seconds:.1f} |",
                flush=True,
            )
    print(f"\nload average after: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")


if __name__ == "__main__":
    main()
