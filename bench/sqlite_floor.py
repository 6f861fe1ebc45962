"""SQLite's own floor for an approval's writes: ``./dev run python -m bench.sqlite_floor [approvals]``.

The apps of ``bench.handoffs`` (memory and SQLite, in process, one event loop), ``approveToolCall``
→ COMPLETED on runs started untimed. Before the timed approvals the SQLite file is copied twice
(``sqlite3``'s backup: the same pages, runs and free list). Then, approval by approval:

- the memory and the SQLite app approve run ``i`` (the order swaps every approval), timed to the
  answer; the SQLite writer's connection is wrapped (``Recorder``), which keeps each transaction's
  statements and parameters, ``BEGIN IMMEDIATE`` to ``COMMIT``, as the writer ran them, its rows
  changed (``total_changes``, the triggers' included) and its wall and thread CPU time, and
  ``Writer.write`` is timed from its call to its caller running again (the hand-offs);
- the transactions recorded in that turn are replayed on a bare ``sqlite3`` connection to each of
  three copies in this thread (no runsgate code, the order rotating; ``replays``): the store's
  files as they were (its pragmas, so its ``synchronous`` and checkpoints), the same with
  ``synchronous = NORMAL`` (the SQLite work without the commits' ``fdatasync``), and a backup
  without checkpoints, whose ``-wal`` file's growth counts each transaction's WAL frames; wall
  and thread CPU per transaction;
- a 4 KiB append and ``fdatasync`` in the same folder (the disk's flush alone).

Medians per approval; ``runsgate's share`` is SQLite - memory less the bare replay's two
transactions, within each approval.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .handoffs import app_on, suspended
from .writer_cpu import kind

WAL_HEADER = 32
"""Bytes of a WAL file's header; each frame is a page and a 24-byte frame header."""


@dataclass
class Transaction:
    """One write transaction: its statements ``(method, sql, parameters)`` in order (``method``
    ``execute`` or ``executemany``), ``BEGIN IMMEDIATE`` to ``COMMIT`` or ``ROLLBACK``, the rows its
    statements and their triggers changed, and its wall and thread CPU milliseconds."""

    statements: list[tuple[str, str, Any]] = field(default_factory=list)
    changes: int = 0
    committed: bool = False
    wall_ms: float = 0.0
    cpu_ms: float = 0.0
    span: tuple[float, float] = (0.0, 0.0)
    """``time.perf_counter`` at its ``BEGIN IMMEDIATE`` and after its ``COMMIT``."""
    times: list[float] = field(default_factory=list)
    """Wall milliseconds of each statement's call (the replay's: with its rows fetched)."""


class Recorder:
    """The SQLite writer's ``sqlite3.Connection`` with each transaction recorded into
    ``transactions`` (statements outside one are run, not kept); anything else goes to the
    connection."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.transactions: list[Transaction] = []
        self._open: Transaction | None = None
        self._began = (0, 0.0, 0.0)

    def _run(self, method: str, sql: str, params: Any) -> Any:
        if sql == "BEGIN IMMEDIATE":
            began = (self.db.total_changes, time.perf_counter(), time.thread_time())
            result = self.db.execute(sql, params)
            self._open, self._began = Transaction(), began
            statement = began[1]
        else:
            statement = time.perf_counter()
            result = getattr(self.db, method)(sql, params)
        current = self._open
        if current is None:
            return result
        current.times.append((time.perf_counter() - statement) * 1000)
        current.statements.append((method, sql, params))
        if sql in ("COMMIT", "ROLLBACK"):
            changes, wall, cpu = self._began
            current.wall_ms = (time.perf_counter() - wall) * 1000
            current.cpu_ms = (time.thread_time() - cpu) * 1000
            current.changes, current.committed = self.db.total_changes - changes, sql == "COMMIT"
            current.span = (wall, wall + current.wall_ms / 1000)
            self.transactions.append(current)
            self._open = None
        return result

    def execute(self, sql: str, params: Any = ()) -> Any:
        return self._run("execute", sql, params)

    def executemany(self, sql: str, params: Iterable[Any]) -> Any:
        return self._run("executemany", sql, list(params))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


class Replay:
    """A bare ``sqlite3`` connection to a copy of the store's file (``pragmas`` run on it after WAL
    is on); the WAL frames each transaction adds to the ``-wal`` file (exact only without
    checkpoints, which let the WAL start again from its beginning)."""

    def __init__(self, path: Path, pragmas: list[str]) -> None:
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None)
        for pragma in ["PRAGMA journal_mode = WAL", *pragmas]:
            self.db.execute(pragma).fetchall()
        self.wal = Path(f"{path}-wal")
        self.frame = int(self.db.execute("PRAGMA page_size").fetchone()[0]) + 24
        self.transactions: list[Transaction] = []
        self.frames: list[int] = []

    def _wal_bytes(self) -> int:
        return max(self.wal.stat().st_size if self.wal.exists() else 0, WAL_HEADER)

    def run(self, recorded: Transaction) -> Transaction:
        """Run ``recorded``'s statements with their parameters (every row of a statement with
        columns fetched); its replay, also kept in ``transactions`` (its WAL frames in ``frames``)."""
        db, wal_bytes, changes = self.db, self._wal_bytes(), self.db.total_changes
        done = Transaction(list(recorded.statements), committed=recorded.statements[-1][1] == "COMMIT")
        wall, cpu = time.perf_counter(), time.thread_time()
        for method, sql, params in recorded.statements:
            statement = time.perf_counter()
            if method == "executemany":
                db.executemany(sql, params)
            else:
                cursor = db.execute(sql, params)
                if cursor.description is not None:
                    cursor.fetchall()
            done.times.append((time.perf_counter() - statement) * 1000)
        done.wall_ms = (time.perf_counter() - wall) * 1000
        done.cpu_ms = (time.thread_time() - cpu) * 1000
        done.changes = db.total_changes - changes
        self.transactions.append(done)
        self.frames.append((self._wal_bytes() - wal_bytes) // self.frame)
        return done


def backup(source: Path, target: Path) -> None:
    """``source``'s database (its WAL's commits included) into a new file ``target``, page by page,
    with no WAL of its own yet."""
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


def copy_files(source: Path, target: Path) -> None:
    """``source`` and its ``-wal`` file, byte for byte, to ``target`` (no write may be running): the
    copy's WAL is as long and as far into its cycle as the store's, so it reaches its checkpoints
    at the same commits; SQLite rebuilds the wal-index from it."""
    for suffix in ("", "-wal"):
        if Path(f"{source}{suffix}").exists():
            shutil.copyfile(f"{source}{suffix}", f"{target}{suffix}")


def table_rows(path: Path) -> dict[str, int]:
    """Rows of each table of the database at ``path``."""
    db = sqlite3.connect(path)
    try:
        names = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {name: int(db.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]) for name in names}
    finally:
        db.close()


def fdatasync_once(fd: int) -> float:
    """Milliseconds of ``os.fdatasync`` after appending 4 KiB to the open file ``fd``."""
    os.write(fd, b"x" * 4096)
    began = time.perf_counter()
    os.fdatasync(fd)
    return (time.perf_counter() - began) * 1000


STORE_AS_IS = "the store's pragmas"
NORMAL = "synchronous = NORMAL"
NO_CHECKPOINT = "no checkpoints (frames counted)"


def replays(path: Path, pragmas: list[str]) -> dict[str, Replay]:
    """Copies of the store's file at ``path`` and their connections: ``STORE_AS_IS`` (its files as
    they are, its connections' ``pragmas``), ``NORMAL`` (the same but ``synchronous = NORMAL``) and
    ``NO_CHECKPOINT`` (a backup, ``pragmas`` and ``wal_autocheckpoint = 0``)."""
    folder = path.parent
    copy_files(path, folder / "as-is.db")
    copy_files(path, folder / "normal.db")
    backup(path, folder / "no-checkpoint.db")
    return {
        STORE_AS_IS: Replay(folder / "as-is.db", pragmas),
        NORMAL: Replay(folder / "normal.db", [*pragmas, "PRAGMA synchronous = NORMAL"]),
        NO_CHECKPOINT: Replay(folder / "no-checkpoint.db", [*pragmas, "PRAGMA wal_autocheckpoint = 0"]),
    }


@dataclass
class Floor:
    """What ``measure`` saw: per approval (lists in approval order) the approvals' walls, the
    store's transactions and each replay's; the store's and each replay's transactions in order;
    the rows of each table at the end."""

    timings: dict[str, list[float]] = field(default_factory=dict)
    store: list[Transaction] = field(default_factory=list)
    replays: dict[str, Replay] = field(default_factory=dict)
    per_approval: list[int] = field(default_factory=list)
    """Transactions recorded in each approval's turn."""
    rows: dict[str, dict[str, int]] = field(default_factory=dict)
    writes: list[tuple[float, float]] = field(default_factory=list)
    """Each ``Writer.write`` on SQLite: ``time.perf_counter`` at its call and when its caller ran again."""


def time_writes(writer: Any, writes: list[tuple[float, float]]) -> Callable[[], None]:
    """Wrap ``writer.write`` to append each write's call and return time to ``writes``; the function
    that unwraps it."""
    write = writer.write

    async def timed(body: Callable[[Any], Any]) -> Any:
        called = time.perf_counter()
        try:
            return await write(body)
        finally:
            writes.append((called, time.perf_counter()))

    writer.write = timed
    return lambda: vars(writer).pop("write", None)


async def measure(approvals: int = 200, warm_up: int = 20) -> Floor:
    """``approvals`` approvals on each app and their replays (module docstring)."""
    floor = Floor(timings={name: [] for name in ("memory", "sqlite", "fdatasync")})
    with tempfile.TemporaryDirectory(prefix="bench-sqlite-floor-") as tmp:
        folder = Path(tmp)
        path = folder / "bench.db"
        apps = {"memory": app_on(None), "sqlite": app_on(f"sqlite:///{path}")}
        async with (
            apps["memory"].router.lifespan_context(apps["memory"]),  # type: ignore[attr-defined]
            apps["sqlite"].router.lifespan_context(apps["sqlite"]),  # type: ignore[attr-defined]
        ):
            store = apps["sqlite"].state.store  # type: ignore[attr-defined]
            writer = store._writer
            for app in apps.values():
                for number in range(warm_up):
                    await (await suspended(app, number))()
            pending = {name: [await suspended(app, n) for n in range(approvals)] for name, app in apps.items()}
            await asyncio.sleep(0.1)  # what the starts left behind runs before the copies
            floor.replays = replays(path, store._pragmas())
            recorder = writer._db = Recorder(writer._db)
            unwrap = time_writes(writer, floor.writes)
            fd = os.open(folder / "fsync-probe", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                for number in range(approvals):
                    for name in ("memory", "sqlite") if number % 2 == 0 else ("sqlite", "memory"):
                        began = time.perf_counter()
                        await pending[name][number]()
                        floor.timings[name].append((time.perf_counter() - began) * 1000)
                        await asyncio.sleep(0.001)  # what the approval left to background tasks runs here
                    recorded = recorder.transactions[len(floor.store) :]
                    floor.store += recorded
                    floor.per_approval.append(len(recorded))
                    names = list(floor.replays)
                    for name in names[number % 3 :] + names[: number % 3]:
                        for transaction in recorded:
                            floor.replays[name].run(transaction)
                    floor.timings["fdatasync"].append(fdatasync_once(fd))
            finally:
                os.close(fd)
                writer._db = recorder.db
                unwrap()
                for replay in floor.replays.values():
                    replay.db.close()
            floor.rows = {"store": table_rows(path)} | {
                name: table_rows(replay.path) for name, replay in floor.replays.items()
            }
    return floor


def _grouped(transactions: list[Transaction], per_approval: list[int]) -> list[list[Transaction]]:
    groups, start = [], 0
    for count in per_approval:
        groups.append(transactions[start : start + count])
        start += count
    return groups


def _p50(values: Iterable[float]) -> float:
    return float(statistics.median(list(values)))


def _pair(groups: list[list[Transaction]], what: Callable[[Transaction], float]) -> list[float]:
    """Per approval, ``what`` summed over its transactions."""
    return [sum(what(t) for t in group) for group in groups]


def _called(transaction: Transaction) -> float:
    return sum(transaction.times)


def report(floor: Floor) -> list[str]:
    """Markdown lines: the per-approval medians of ``floor`` (module docstring)."""
    memory, sqlite = floor.timings["memory"], floor.timings["sqlite"]
    gap = [s - m for m, s in zip(memory, sqlite, strict=True)]
    store = _grouped(floor.store, floor.per_approval)
    store_wall = _pair(store, lambda t: t.wall_ms)
    lines = [
        f"- {len(gap)} approvals per store, alternating; transactions per approval on SQLite: "
        f"{statistics.mean(floor.per_approval):.2f}, statements per transaction: "
        f"{statistics.mean(len(t.statements) for t in floor.store):.1f}",
        f"- approve -> completed in process, p50: memory {_p50(memory):.2f} ms, SQLite {_p50(sqlite):.2f} ms; "
        f"**SQLite - memory within each approval, median: {_p50(gap):.3f} ms**",
        f"- the store's own transactions on its writer's thread (BEGIN IMMEDIATE..COMMIT), per approval p50: "
        f"wall {_p50(store_wall):.3f} ms, thread CPU {_p50(_pair(store, lambda t: t.cpu_ms)):.3f} ms",
        f"- fdatasync of a 4 KiB append in the same folder, p50 of {len(floor.timings['fdatasync'])}: "
        f"{_p50(floor.timings['fdatasync']):.3f} ms",
        "",
        "| bare replay of the same transactions, per approval p50 | " + " | ".join(floor.replays) + " |",
        "| --- |" + " ---: |" * len(floor.replays),
    ]
    labels = (
        "both transactions, wall ms",
        "both transactions, CPU ms",
        "each transaction's wall ms (decision / completion)",
        "each transaction's WAL frames (decision / completion)",
        "rows changed per approval",
    )
    rows: dict[str, list[str]] = {label: [] for label in labels}
    walls: dict[str, list[float]] = {}
    for name, replay in floor.replays.items():
        groups = _grouped(replay.transactions, floor.per_approval)
        frames = _grouped([Transaction(wall_ms=n) for n in replay.frames], floor.per_approval)
        walls[name] = _pair(groups, lambda t: t.wall_ms)
        twos, frame_twos = [g for g in groups if len(g) == 2], [g for g in frames if len(g) == 2]
        values = [
            f"{_p50(walls[name]):.3f}",
            f"{_p50(_pair(groups, lambda t: t.cpu_ms)):.3f}",
            " / ".join(f"{_p50(g[k].wall_ms for g in twos):.3f}" for k in range(2)) if twos else "-",
            " / ".join(f"{_p50(g[k].wall_ms for g in frame_twos):g}" for k in range(2))
            if frame_twos and name == NO_CHECKPOINT
            else "-",
            f"{_p50(_pair(groups, lambda t: t.changes)):g} (the store's: {_p50(_pair(store, lambda t: t.changes)):g})",
        ]
        for label, value in zip(labels, values, strict=True):
            rows[label].append(value)
    lines += [f"| {label} | " + " | ".join(values) + " |" for label, values in rows.items()]
    durable = walls[STORE_AS_IS]
    share = [g - r for g, r in zip(gap, durable, strict=True)]
    inside = [s - r for s, r in zip(store_wall, durable, strict=True)]
    called = _pair(_grouped(floor.replays[STORE_AS_IS].transactions, floor.per_approval), _called)
    lines += [
        "",
        f"- SQLite and the disk for these writes (the bare replay with {STORE_AS_IS}), per approval "
        f"p50: {_p50(durable):.3f} ms; of it the commits' flushes (that replay - {NORMAL}'s, median of "
        f"differences): {_p50(a - b for a, b in zip(durable, walls[NORMAL], strict=True)):.3f} ms",
        f"- **runsgate's share (SQLite - memory - the bare replay, within each approval), median: "
        f"{_p50(share):.3f} ms**, of which (medians of each part, which need not add up):",
        f"  - inside the store's transactions (their wall - the replay's): {_p50(inside):.3f} ms; of it "
        f"runsgate's Python between the statements (their wall - their statements' calls): "
        f"{_p50(_pair(store, lambda t: t.wall_ms - sum(t.times))):.3f} ms, the same statements' calls - "
        f"the replay's: {_p50(a - b for a, b in zip(_pair(store, _called), called, strict=True)):.3f} ms",
    ]
    if len(floor.writes) == len(floor.store):
        handed = [
            ((t.span[0] - w[0]) * 1000, (w[1] - t.span[1]) * 1000)
            for t, w in zip(floor.store, floor.writes, strict=True)
        ]
        groups = _grouped([Transaction(wall_ms=a, cpu_ms=b) for a, b in handed], floor.per_approval)
        hand_offs = _pair(groups, lambda t: t.wall_ms + t.cpu_ms)
        lines += [
            f"  - the writes' hand-offs (Writer.write to BEGIN, COMMIT to its caller running again): "
            f"{_p50(hand_offs):.3f} ms (to the thread {_p50(_pair(groups, lambda t: t.wall_ms)):.3f}, "
            f"back {_p50(_pair(groups, lambda t: t.cpu_ms)):.3f})",
            f"  - the rest (SQLite's store on the loop above memory's: its reads, their decoding, waits): "
            f"{_p50(g - s - h for g, s, h in zip(gap, store_wall, hand_offs, strict=True)):.3f} ms",
        ]
    return lines


def statements(floor: Floor) -> list[str]:
    """Markdown lines: each kind of statement's wall p50 (µs) in the store and in each replay."""
    sources = {"the store": floor.store} | {name: replay.transactions for name, replay in floor.replays.items()}
    times: dict[str, dict[str, list[float]]] = {}
    for source, transactions in sources.items():
        for transaction in transactions:
            for (_, sql, _), ms in zip(transaction.statements, transaction.times, strict=True):
                times.setdefault(kind(sql), {}).setdefault(source, []).append(ms * 1000)
    lines = [
        "| statement, wall p50 µs | " + " | ".join(sources) + " |",
        "| --- |" + " ---: |" * len(sources),
    ]
    for name, of in times.items():
        lines.append(f"| {name} | " + " | ".join(f"{_p50(of.get(s, [0.0])):.0f}" for s in sources) + " |")
    return lines


def main(argv: list[str]) -> int:
    floor = asyncio.run(measure(int(argv[0]) if argv else 200))
    print("\n".join([*report(floor), "", *statements(floor)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
