"""Where the SQLite writer's CPU goes in one approval: ``./dev run python -m bench.writer_cpu [approvals]``.

The apps of ``bench.handoffs`` (memory and SQLite, in process, one event loop), ``approveToolCall``
→ COMPLETED on fresh refund runs started untimed, the stores' approvals alternating one by one.
Nothing is traced (SQLite's trace callback, which ``bench.handoffs`` counts with, costs the
writer's thread about as much CPU as its own Python): the writer's connection is wrapped in a
proxy that times each ``execute`` and ``executemany`` with ``time.thread_time_ns``.

Per approval, load independent: the statements runsgate runs on the writer (each ``execute`` or
``executemany`` once, whatever triggers it fires) by kind, WAL frames written, and the writer
thread's CPU split into the ``COMMIT`` s (the WAL's writes and ``fdatasync``), the other
statements, runsgate's Python inside the writes' bodies, the rest of each transaction's frame
(``Writer._run``) and the thread outside transactions (waiting for work, handing outcomes back).
Timed, paired: CPU of every thread (``time.process_time``) and of the event loop's thread, and
wall time to the answer, memory and SQLite; medians and the median of SQLite - memory within
each pair.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .handoffs import app_on, suspended, thread_cpu_us, wal_frames

KINDS = ("COMMIT", "BEGIN IMMEDIATE", "PRAGMA")
"""Statements counted by their whole text; every other one by its first two words."""


def kind(sql: str) -> str:
    """A statement's kind: ``COMMIT``, ``UPDATE run_snapshots``, ``INSERT INTO run_events``,
    ``SELECT FROM run_snapshots`` (its first table), ..."""
    words = sql.split()
    head = " ".join(words[:2])
    for name in KINDS:
        if head.startswith(name):
            return name
    if words and words[0] in {"INSERT", "DELETE"} and len(words) > 2:
        return " ".join(words[:3])
    if words and words[0] == "SELECT" and "FROM" in words[:-1]:
        return "SELECT FROM " + words[words.index("FROM") + 1]
    return head


class TimedConnection:
    """The writer's ``sqlite3.Connection`` with each ``execute``/``executemany`` counted and timed
    (thread CPU ns) into ``counted`` while ``on[0]``; ``in_body[0]`` says whether a write's body runs.
    Anything else goes to the connection."""

    def __init__(self, db: Any, counted: Counter[str], on: list[bool], in_body: list[bool]) -> None:
        self._db, self._counted, self._on, self._in_body = db, counted, on, in_body

    def _timed(self, method: Callable[..., Any], sql: str, *args: Any) -> Any:
        if not self._on[0]:
            return method(sql, *args)
        began = time.thread_time_ns()
        try:
            return method(sql, *args)
        finally:
            spent = time.thread_time_ns() - began
            name = kind(sql)
            self._counted[f"statement {name}"] += 1
            part = "COMMIT" if name == "COMMIT" else ("statements in bodies" if self._in_body[0] else "BEGIN, PRAGMA")
            self._counted[f"cpu ns {part}"] += spent
            if self._in_body[0]:
                self._counted["cpu ns statements of bodies"] += spent

    def execute(self, sql: str, params: Iterable[Any] = ()) -> Any:
        return self._timed(self._db.execute, sql, params)

    def executemany(self, sql: str, params: Iterable[Any]) -> Any:
        return self._timed(self._db.executemany, sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


def instrument(writer: Any, shm: Path, counted: Counter[str], on: list[bool]) -> None:
    """Wrap ``writer``'s connection (``TimedConnection``), its writes' bodies and its transactions
    (``Writer._run``) to count into ``counted`` while ``on[0]``, with the WAL frames each
    transaction wrote (read from ``shm``; the CPU of reading them is ``cpu ns counting``)."""
    in_body = [False]
    writer._db = TimedConnection(writer._db, counted, on, in_body)
    write, run = writer.write, writer._run

    async def timed_write(body: Callable[[Any], Any]) -> Any:
        def timed_body(db: Any) -> Any:
            in_body[0] = True
            began = time.thread_time_ns()
            try:
                return body(db)
            finally:
                in_body[0] = False
                if on[0]:
                    counted["cpu ns bodies"] += time.thread_time_ns() - began

        return await write(timed_body)

    def timed_run(batch: Any) -> None:
        if not on[0]:
            run(batch)
            return
        counting = time.thread_time_ns()
        before = wal_frames(shm)
        began = time.thread_time_ns()
        run(batch)
        ended = time.thread_time_ns()
        after = wal_frames(shm)  # a checkpoint restarted the WAL during it: its frames are all there are
        counted["WAL frames written"] += after - before if after >= before else after
        counted["cpu ns transactions"] += ended - began
        counted["cpu ns counting"] += time.thread_time_ns() - counting - (ended - began)
        counted["transactions"] += 1

    writer.write, writer._run = timed_write, timed_run


def split(counted: Counter[str], thread_ns: int, approvals: int) -> dict[str, float]:
    """The writer thread's CPU ms per approval by part (``module`` docstring), from ``counted``
    and the thread's whole CPU time ``thread_ns`` over ``approvals``."""
    body_python = counted["cpu ns bodies"] - counted["cpu ns statements of bodies"]
    frame = (
        counted["cpu ns transactions"]
        - counted["cpu ns bodies"]
        - counted["cpu ns COMMIT"]
        - counted["cpu ns BEGIN, PRAGMA"]
    )
    thread_ns -= counted["cpu ns counting"]
    parts = {
        "COMMIT (WAL writes, fdatasync)": counted["cpu ns COMMIT"],
        "statements of the writes' bodies": counted["cpu ns statements of bodies"],
        "BEGIN IMMEDIATE, PRAGMA freelist_count": counted["cpu ns BEGIN, PRAGMA"],
        "runsgate's Python in the bodies": body_python,
        "rest of the transaction (Writer._run)": frame,
        "outside transactions (waits, hand-backs)": thread_ns - counted["cpu ns transactions"],
        "whole thread (less the frames' count)": thread_ns,
    }
    return {name: ns / 1e6 / approvals for name, ns in parts.items()}


async def measure(
    approvals: int = 200, warm_up: int = 20
) -> tuple[dict[str, float], dict[str, float], dict[str, list[float]]]:
    """Per approval on SQLite: statement counts (and ``transactions``, ``WAL frames written``),
    the writer thread's CPU split (``split``); and each approval's timings (keys ``"memory
    wall"``, ``"sqlite cpu"``, ``"sqlite loop cpu"``, ...), the stores' approvals alternating."""
    counted: Counter[str] = Counter()
    timings: dict[str, list[float]] = {
        f"{s} {k}": [] for s in ("memory", "sqlite") for k in ("wall", "cpu", "loop cpu")
    }
    on = [False]
    with tempfile.TemporaryDirectory(prefix="bench-writer-cpu-") as tmp:
        apps = {"memory": app_on(None), "sqlite": app_on(f"sqlite:///{Path(tmp) / 'bench.db'}")}
        async with (
            apps["memory"].router.lifespan_context(apps["memory"]),  # type: ignore[attr-defined]
            apps["sqlite"].router.lifespan_context(apps["sqlite"]),  # type: ignore[attr-defined]
        ):
            writer = apps["sqlite"].state.store._writer  # type: ignore[attr-defined]
            instrument(writer, Path(tmp) / "bench.db-shm", counted, on)
            for app in apps.values():
                for number in range(warm_up):
                    await (await suspended(app, number))()
            pending = {name: [await suspended(app, n) for n in range(approvals)] for name, app in apps.items()}
            await asyncio.sleep(0.1)  # what the starts left behind runs before the count
            thread_ns = 0
            for number in range(approvals):
                for name in ("memory", "sqlite") if number % 2 == 0 else ("sqlite", "memory"):
                    on[0] = name == "sqlite"
                    spent = thread_cpu_us(writer._thread)
                    cpu, loop_cpu, wall = time.process_time(), time.thread_time(), time.perf_counter()
                    await pending[name][number]()
                    timings[f"{name} wall"].append((time.perf_counter() - wall) * 1000)
                    timings[f"{name} cpu"].append((time.process_time() - cpu) * 1000)
                    timings[f"{name} loop cpu"].append((time.thread_time() - loop_cpu) * 1000)
                    await asyncio.sleep(0.001)  # what the approval left to background tasks runs (and counts)
                    if on[0]:
                        thread_ns += (thread_cpu_us(writer._thread) - spent) * 1000
                    on[0] = False
            counts = {
                name[len("statement ") :]: n / approvals for name, n in counted.items() if name.startswith("statement ")
            }
            for name in ("transactions", "WAL frames written"):
                counts[name] = counted[name] / approvals
    return counts, split(counted, thread_ns, approvals), timings


def report(counts: dict[str, float], cpu: dict[str, float], timings: dict[str, list[float]]) -> list[str]:
    """Markdown lines: the counts, the writer's CPU split, the paired timings."""
    lines = ["| per approval on SQLite | count |", "| --- | ---: |"]
    lines += [f"| {name} | {n:.2f} |" for name, n in sorted(counts.items())]
    lines += ["", "| writer thread CPU per approval | ms |", "| --- | ---: |"]
    lines += [f"| {name} | {ms:.3f} |" for name, ms in cpu.items()]
    median = {name: statistics.median(times) for name, times in timings.items()}
    lines.append("")
    for kind_, label in (
        ("wall", "approve -> completed"),
        ("cpu", "CPU, every thread"),
        ("loop cpu", "CPU, event loop thread"),
    ):
        mem, sql = timings[f"memory {kind_}"], timings[f"sqlite {kind_}"]
        gap = statistics.median(s - m for m, s in zip(mem, sql, strict=True))
        lines.append(
            f"- {label} p50, {len(mem)} paired approvals: memory {median[f'memory {kind_}']:.2f} ms, SQLite "
            f"{median[f'sqlite {kind_}']:.2f} ms; SQLite - memory within each pair, median: {gap:.2f} ms"
        )
    return lines


def main(argv: list[str]) -> int:
    counts, cpu, timings = asyncio.run(measure(int(argv[0]) if argv else 200))
    print("\n".join(report(counts, cpu, timings)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
