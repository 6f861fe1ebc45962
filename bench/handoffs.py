"""One approval's thread hand-offs and COMMITs, and its time on memory and SQLite in paired
approvals: ``./dev run python -m bench.handoffs [approvals]``.

The real app called as ASGI in process (``bench.inprocess.call``), one app per store in one event
loop, ``approveToolCall`` → COMPLETED on fresh refund runs (started untimed; run updates held for
the outcome, so the count is the approval's own). Counted per approval, whatever the machine's
load: COMMITs and statements (SQLite's trace, triggers' included) on the SQLite writer's
connection, the WAL frames (pages) its transactions wrote, hand-offs back to the event loop from
the writer's thread and from any other thread (``call_soon_threadsafe``), the event loop's
iterations, and the CPU time of the writer's and the reader's threads (the writer's includes the
trace that counts its statements). Timed: approvals alternate between the stores one by one (the order
swaps every pair), each to its answer (``time.perf_counter``) and its CPU time
(``time.process_time``, every thread of the process); medians, and the median of SQLite - memory
within each pair.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import struct
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.types import ASGIApp

from server.settings import DEMO_AGENTS, Settings

from .inprocess import call
from .queries import APPROVE, START_REFUND
from .serve import create_bench_app

WRITER_THREAD = "runsgate-sqlite-writer"
THREAD_CPU = ("writer thread CPU ms", "reader thread CPU ms")
"""Counts that are CPU milliseconds of a SQLite store's threads (``Counts.counted`` keeps µs)."""


@dataclass
class Counts:
    """What the approvals counted did, summed (``per_approval`` divides)."""

    approvals: int = 0
    counted: Counter[str] = field(default_factory=Counter)

    def per_approval(self) -> dict[str, float]:
        """Each count divided by the approvals (the thread CPU times in ms)."""
        scale = {name: 1000.0 for name in THREAD_CPU}
        return {name: n / self.approvals / scale.get(name, 1.0) for name, n in sorted(self.counted.items())}


def app_on(store: str | None) -> ASGIApp:
    """The bench app on ``store`` (``None``: memory), authentication off, every refund waiting for
    its decision, run updates written with the outcome (intervals beyond the run), the sweeper
    idle (one pass an hour)."""
    settings = Settings(
        agents=DEMO_AGENTS,
        mongodb_uri=None,
        store=store,
        auth=False,
        tool_rules=[],
        run_updates_interval=60,
        run_updates_first_text_delay=60,
        sweep_interval=3600,
    )
    return create_bench_app(settings)


async def suspended(app: ASGIApp, number: int) -> Callable[[], Awaitable[None]]:
    """Start a refund run (suspended); the coroutine function that approves it and checks COMPLETED."""
    body = json.dumps({"query": START_REFUND, "variables": {"prompt": f"Please refund order {1042 + number % 2}"}})
    run = json.loads(await call(app, "/graphql", body.encode()))["data"]["startRun"]
    variables = {"runId": run["runId"], "toolCallId": run["run"]["toolCalls"][0]["toolCallId"]}
    approval = json.dumps({"query": APPROVE, "variables": variables}).encode()

    async def approve() -> None:
        answer = json.loads(await call(app, "/graphql", approval))
        if answer["data"]["approveToolCall"].get("status") != "COMPLETED":
            raise RuntimeError(f"approve did not complete the run: {answer}")

    return approve


def install(loop: asyncio.AbstractEventLoop, current: list[Counts], on: list[bool]) -> None:
    """Count into ``current[0]``, while ``on[0]``: the loop's iterations and each
    ``call_soon_threadsafe`` by the thread that made it (the writer's, or another: the reader's,
    ``asyncio.to_thread``'s)."""
    run_once = loop._run_once  # type: ignore[attr-defined]
    wake = loop.call_soon_threadsafe

    def counted_run_once() -> None:
        if on[0]:
            current[0].counted["event loop iterations"] += 1
        run_once()

    def counted_wake(*args: Any, **kwargs: Any) -> Any:
        if on[0]:
            writer = threading.current_thread().name.startswith(WRITER_THREAD)
            current[0].counted["hand-offs back from the writer" if writer else "hand-offs back from other threads"] += 1
        return wake(*args, **kwargs)

    loop._run_once = counted_run_once  # type: ignore[attr-defined]
    loop.call_soon_threadsafe = counted_wake  # type: ignore[method-assign,assignment]


def wal_frames(shm: Path) -> int:
    """The WAL's last committed frame (``mxFrame`` of the wal-index header in the ``-shm`` file,
    native byte order); 0 after a checkpoint restarted the WAL."""
    with shm.open("rb") as f:
        return int(struct.unpack_from("=I", f.read(20), 16)[0])


def count_transactions(writer: Any, shm: Path, current: list[Counts], on: list[bool]) -> None:
    """Wrap ``writer._run`` (one transaction on the writer's thread): count into ``current[0]``,
    while ``on[0]``, the WAL frames each transaction wrote."""
    run = writer._run

    def counted_run(batch: Any) -> None:
        before = wal_frames(shm)
        run(batch)
        after = wal_frames(shm)
        if on[0]:  # a checkpoint restarted the WAL during it: its frames are all there are
            current[0].counted["WAL frames written"] += after - before if after >= before else after

    writer._run = counted_run


def thread_cpu_us(thread: threading.Thread) -> int:
    """CPU time of ``thread`` so far, in µs."""
    assert thread.ident is not None
    return time.clock_gettime_ns(time.pthread_getcpuclockid(thread.ident)) // 1000


def uninstall(loop: asyncio.AbstractEventLoop) -> None:
    """Take ``install``'s counters off ``loop``."""
    for name in ("_run_once", "call_soon_threadsafe"):
        vars(loop).pop(name, None)


async def measure(approvals: int = 200, warm_up: int = 20) -> tuple[dict[str, Counts], dict[str, list[float]]]:
    """Counts per store of ``approvals`` approvals, and each approval's wall and CPU milliseconds
    (keys ``"memory wall"``, ``"sqlite cpu"``, ...), the stores' approvals alternating."""
    counts = {"memory": Counts(), "sqlite": Counts()}
    timings: dict[str, list[float]] = {f"{s} {kind}": [] for s in counts for kind in ("wall", "cpu")}
    on = [False]
    with tempfile.TemporaryDirectory(prefix="bench-handoffs-") as tmp:
        apps = {"memory": app_on(None), "sqlite": app_on(f"sqlite:///{Path(tmp) / 'bench.db'}")}
        async with (
            apps["memory"].router.lifespan_context(apps["memory"]),  # type: ignore[attr-defined]
            apps["sqlite"].router.lifespan_context(apps["sqlite"]),  # type: ignore[attr-defined]
        ):
            store = apps["sqlite"].state.store  # type: ignore[attr-defined]
            writer = store._writer
            current = [counts["sqlite"]]

            def statement(sql: str) -> None:
                if on[0]:
                    current[0].counted["statements on the writer"] += 1
                    if sql.strip().upper() == "COMMIT":
                        current[0].counted["COMMITs"] += 1

            await writer.call(lambda db: db.set_trace_callback(statement))
            count_transactions(writer, Path(tmp) / "bench.db-shm", current, on)
            threads = dict(zip(THREAD_CPU, (writer._thread, store._reader._thread), strict=True))
            loop = asyncio.get_running_loop()
            install(loop, current, on)
            try:
                for app in apps.values():
                    for number in range(warm_up):
                        await (await suspended(app, number))()
                pending = {name: [await suspended(app, n) for n in range(approvals)] for name, app in apps.items()}
                await asyncio.sleep(0.1)  # what the starts left behind runs before the count
                for number in range(approvals):
                    for name in ("memory", "sqlite") if number % 2 == 0 else ("sqlite", "memory"):
                        current[0] = counts[name]
                        on[0] = True
                        spent = {key: thread_cpu_us(thread) for key, thread in threads.items()}
                        cpu, wall = time.process_time(), time.perf_counter()
                        await pending[name][number]()
                        timings[f"{name} wall"].append((time.perf_counter() - wall) * 1000)
                        timings[f"{name} cpu"].append((time.process_time() - cpu) * 1000)
                        await asyncio.sleep(0.001)  # what the approval left to background tasks runs (and counts)
                        on[0] = False
                        if name == "sqlite":
                            for key, thread in threads.items():
                                counts[name].counted[key] += thread_cpu_us(thread) - spent[key]
                        counts[name].approvals += 1
            finally:
                uninstall(loop)
    return counts, timings


def report(counts: dict[str, Counts], timings: dict[str, list[float]]) -> list[str]:
    """Markdown lines: the counts per approval of each store, then the paired timings."""
    names = sorted({name for c in counts.values() for name in c.counted})
    lines = ["| per approval | " + " | ".join(counts) + " |", "| --- |" + " ---: |" * len(counts)]
    for name in names:
        cells = " | ".join(f"{c.per_approval().get(name, 0.0):.2f}" for c in counts.values())
        lines.append(f"| {name} | {cells} |")
    median = {name: statistics.median(times) for name, times in timings.items()}
    gap = statistics.median(s - m for m, s in zip(timings["memory wall"], timings["sqlite wall"], strict=True))
    cpu_gap = statistics.median(s - m for m, s in zip(timings["memory cpu"], timings["sqlite cpu"], strict=True))
    lines += [
        "",
        f"- approve -> completed p50, {len(timings['memory wall'])} paired approvals in process: memory "
        f"{median['memory wall']:.2f} ms, SQLite {median['sqlite wall']:.2f} ms; SQLite - memory within each "
        f"pair, median: {gap:.2f} ms",
        f"- CPU time p50 (every thread): memory {median['memory cpu']:.2f} ms, SQLite {median['sqlite cpu']:.2f} ms; "
        f"SQLite - memory within each pair, median: {cpu_gap:.2f} ms",
    ]
    return lines


def main(argv: list[str]) -> int:
    counts, timings = asyncio.run(measure(int(argv[0]) if argv else 200))
    print("\n".join(report(counts, timings)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
