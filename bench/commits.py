"""Commits and fsyncs of one approval over HTTP: ``./dev run python -m bench.commits [--stores ...]
[--approvals N] [--update-interval S]``.

For each store (``memory``, ``sqlite``, ``documentdb``: FerretDB 2.5 on DocumentDB, ``ferretdb``:
FerretDB 1.24 on SQLite, each started here) it
serves ``python -m bench.commits serve`` (``bench.serve`` with counters installed from outside the
store: every store method call, every SQLite statement by ``set_trace_callback``, every MongoDB
command by PyMongo command monitoring, into a trace file) and sends ``approveToolCall`` (→
COMPLETED) on fresh refund runs, with and without an ``idempotencyKey``. ``strace -f -e
trace=fsync,fdatasync`` is attached to the server (and to PostgreSQL's or FerretDB 1.24's processes)
for each approval.
Each store call of the approval is one row: its SQL or MongoDB writes, commits, reads and fsyncs.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import functools
import inspect
import itertools
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

TRACE_ENV = "BENCH_TRACE_FILE"
OUTSIDE = "(no store call open in its task)"
"""Where a statement or command goes that its task ran outside any store call."""
MONGO_WRITES = {"insert", "update", "delete", "findAndModify", "findandmodify", "commitTransaction"}

# -- inside the server process ----------------------------------------------------------------------
_depth: contextvars.ContextVar[int] = contextvars.ContextVar("bench_store_depth", default=0)
_call: contextvars.ContextVar[str] = contextvars.ContextVar("bench_store_call", default="-")
"""The task of the outermost store call open; the SQLite writer runs each write's function in a
copy of its caller's context (``storage/sqlite/writer.py``), so its statements carry it."""
_step: contextvars.ContextVar[str] = contextvars.ContextVar("bench_store_step", default="")
"""The outermost store call open, one token per call: a task it starts copies it, so a command
sent behind the call (after it returned) still counts in it."""
_steps = itertools.count(1)


def _logger(path: str) -> Callable[..., None]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def log(*fields: str) -> None:
        os.write(fd, ("\t".join([f"{time.time():.6f}", *fields]) + "\n").encode())

    return log


def _task() -> str:
    import asyncio

    with contextlib.suppress(RuntimeError):
        return str(id(asyncio.current_task()))
    return "-"


def _wrapped(log: Callable[..., None], name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    async def call(*args: Any, **kwargs: Any) -> Any:
        depth = _depth.get()
        token = _depth.set(depth + 1)
        call_token = _call.set(_task()) if depth == 0 else None
        step_token = _step.set(str(next(_steps))) if depth == 0 else None
        log("call", _task(), str(depth), name, _step.get())
        try:
            return await method(*args, **kwargs)
        finally:
            log("done", _task(), str(depth), name)
            if call_token is not None:
                _call.reset(call_token)
            if step_token is not None:
                _step.reset(step_token)
            _depth.reset(token)

    return call


def install(path: str) -> None:
    """Count into ``path``: each public coroutine method of the three stores (call and return, its
    asyncio task and nesting depth); each SQLite statement when SQLite runs it (a trace callback
    set by a wrapped ``sqlite3.connect``; connections numbered in opening order), with the store
    call whose write ran it on the writer's thread (``_call``), and each statement a task queues
    on an aiosqlite connection (the reader: ``Connection._execute`` wrapped); each MongoDB command
    started, with its task and request id, and the time each took to its reply (PyMongo's
    ``duration_micros``: the round trip, the server's work included)."""
    import aiosqlite
    from pymongo import monitoring

    import storage

    log = _logger(path)
    names = [name for name in dir(storage.SnapshotStore) if not name.startswith("_")]
    for cls in (storage.MemorySnapshotStore, storage.SQLiteSnapshotStore, storage.MongoSnapshotStore):
        for name in names:
            method = getattr(cls, name, None)
            if method is not None and inspect.iscoroutinefunction(method):
                setattr(cls, name, _wrapped(log, name, method))

    numbers = itertools.count(1)
    numbered: dict[int, str] = {}
    connect = sqlite3.connect

    def traced_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = connect(*args, **kwargs)
        number = numbered[id(conn)] = str(next(numbers))
        conn.set_trace_callback(lambda sql: log("sql", number, _call.get(), " ".join(sql.split())[:160]))
        return conn

    sqlite3.connect = traced_connect  # type: ignore[assignment]  # aiosqlite looks it up on each connect
    execute = cast(Callable[..., Awaitable[Any]], aiosqlite.Connection._execute)

    async def queued(self: aiosqlite.Connection, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if args and isinstance(args[0], str):
            log("sqlq", _task(), numbered.get(id(self._conn), "?"), " ".join(args[0].split())[:160])
        return await execute(self, fn, *args, **kwargs)

    aiosqlite.Connection._execute = queued  # type: ignore[method-assign]

    class Commands(monitoring.CommandListener):
        def started(self, event: monitoring.CommandStartedEvent) -> None:
            target = event.command.get(event.command_name)
            task = _call.get()  # the store call's, in the tasks it gathers too (their context is a copy)
            log(
                "mongo",
                _task() if task == "-" else task,
                event.command_name,
                target if isinstance(target, str) else "",
                str(event.request_id),
                _step.get(),
            )

        def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
            log("mongoend", str(event.request_id), str(event.duration_micros))

        def failed(self, event: monitoring.CommandFailedEvent) -> None:
            log("mongoend", str(event.request_id), str(event.duration_micros))

    monitoring.register(Commands())


def serve(argv: list[str]) -> int:
    """``bench.serve``'s main with the counters of ``install`` (file named by ``BENCH_TRACE_FILE``)."""
    install(os.environ[TRACE_ENV])
    from .serve import main

    return main(argv)


# -- the counting side ----------------------------------------------------------------------------------
@dataclass
class Step:
    """One outermost store call of an approval (or what ran outside any)."""

    name: str
    start: float
    end: float
    writes: Counter[str] = field(default_factory=Counter)
    commits: int = 0
    reads: int = 0
    fsyncs: Counter[str] = field(default_factory=Counter)
    commands: Counter[str] = field(default_factory=Counter)
    """Every MongoDB command, reads and writes, by ``"<command> <collection>"``."""
    micros: Counter[str] = field(default_factory=Counter)
    """The round-trip microseconds of ``commands``, summed by the same key."""


def _sql_summary(step: Step, sql: str) -> None:
    words = sql.split()
    verb = words[0].upper() if words else ""
    if verb == "COMMIT":
        step.commits += 1
    elif verb in ("SELECT", "WITH"):
        step.reads += 1
    elif verb in ("INSERT", "UPDATE", "DELETE", "REPLACE"):
        upper = [w.upper() for w in words]
        table = ""
        for marker in ("INTO", "UPDATE", "FROM"):
            if marker in upper[:4]:
                table = words[upper.index(marker) + 1]
                break
        step.writes[f"{verb} {table}"] += 1


def steps(trace_lines: list[str], fsync_lines: list[tuple[float, str]]) -> list[Step]:
    """The approval's store calls (each task's outermost ones), in order of their start, from the
    trace file's lines written during it. Each SQL statement counts in the call open in its task,
    each MongoDB command in the call that sent it (even after that call returned). Each fsync
    (``(time, file)``) goes to the call whose write ran last before it: the last ``COMMIT`` SQLite
    ran (matched, per connection in order, to the task that queued it) or the last MongoDB write
    command started. Whatever no call holds goes to a last step, ``OUTSIDE``."""
    found: list[Step] = []
    outside = Step(OUTSIDE, 0, 0)
    open_calls: dict[str, Step] = {}
    last_write: dict[str, Step] = {}
    writes_run: list[tuple[float, Step]] = []
    started: dict[str, tuple[Step, str]] = {}
    by_token: dict[str, Step] = {}
    for line in trace_lines:
        at, kind, *rest = line.rstrip("\n").split("\t")
        if kind == "call" and rest[1] == "0":
            open_calls[rest[0]] = Step(rest[2], float(at), float("inf"))
            found.append(open_calls[rest[0]])
            if len(rest) > 3:
                by_token[rest[3]] = open_calls[rest[0]]
        elif kind == "done" and rest[1] == "0" and rest[0] in open_calls:
            open_calls.pop(rest[0]).end = float(at)
        elif kind == "sqlq":  # a read queued on the reader (aiosqlite)
            _sql_summary(open_calls.get(rest[0], outside), rest[2])
        elif kind == "sql" and rest[1] != "-":  # a write's statement on the writer's thread
            step = last_write[rest[0]] = open_calls.get(rest[1], outside)
            _sql_summary(step, rest[2])
        elif kind == "sql" and rest[2].split()[:1] == ["COMMIT"]:
            # the transaction's frame: its commit counts for the last write it ran
            step = last_write.get(rest[0], outside)
            step.commits += 1
            writes_run.append((float(at), step))
        elif kind == "mongo":  # in the call that sent it, even behind it (``_step``)
            step = by_token.get(rest[4], outside) if len(rest) > 4 and rest[4] else open_calls.get(rest[0], outside)
            command, collection = rest[1], rest[2]
            step.commands[f"{command} {collection}".strip()] += 1
            if len(rest) > 3:
                started[rest[3]] = (step, f"{command} {collection}".strip())
            if command in MONGO_WRITES:
                step.commits += 1
                step.writes[f"{command} {collection}"] += 1
                writes_run.append((float(at), step))
            elif command in ("find", "aggregate", "count", "getMore", "distinct"):
                step.reads += 1
        elif kind == "mongoend" and rest[0] in started:
            step, key = started.pop(rest[0])
            step.micros[key] += int(rest[1])
    for synced, path in fsync_lines:
        before = [step for ran, step in writes_run if ran <= synced]
        (before[-1] if before else outside).fsyncs[path] += 1
    if outside.writes or outside.commits or outside.reads or outside.fsyncs:
        found.append(outside)
    return found


def _parse_strace(text: str) -> list[tuple[float, str]]:
    """``(epoch seconds, file)`` of each fsync/fdatasync in ``strace -f -ttt -y`` output."""
    found = []
    for line in text.splitlines():
        if "fsync(" not in line and "fdatasync(" not in line:
            continue
        parts = line.split()
        stamp = parts[1] if parts[0].isdigit() else parts[0]
        call = line[line.index(stamp) + len(stamp) :].strip()
        name = call.split("(")[0]
        path = call[call.find("<") + 1 : call.find(">")] if "<" in call else "?"
        found.append((float(stamp), f"{name} {'/'.join(Path(path).parts[-2:])}"))
    return found


@contextmanager
def fsync_trace(pids: list[int], out: Path) -> Iterator[Callable[[], list[tuple[float, str]]]]:
    """``strace -f -e trace=fsync,fdatasync`` attached to ``pids`` (with their threads and later
    children) while the block runs; yields a function giving the fsyncs seen, after the block.

    Raises:
        RuntimeError: strace exited at once (it could not attach).
    """
    command = ["strace", "-f", "-qq", "-ttt", "-y", "-e", "trace=fsync,fdatasync", "-o", str(out)]
    for pid in pids:
        command += ["-p", str(pid)]
    tracer = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached by then (every thread of each pid)
    if tracer.poll() is not None:  # it could not attach: counting nothing would read as no fsync
        raise RuntimeError(f"strace exited with {tracer.returncode}: {shlex.join(command)}")
    seen: list[tuple[float, str]] = []
    try:
        yield lambda: seen
    finally:
        time.sleep(0.2)
        tracer.send_signal(signal.SIGINT)
        tracer.wait(timeout=30)
        seen.extend(_parse_strace(out.read_text() if out.exists() else ""))


def children(pid: int) -> list[int]:
    """Every live process whose parent is ``pid`` (from ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    found.append(int(entry.name))
    return found


@dataclass
class Approval:
    """What one approval did: its store calls (``steps``), totals."""

    store: str
    keyed: bool
    steps: list[Step]

    @property
    def commits(self) -> int:
        return sum(s.commits for s in self.steps)

    @property
    def fsyncs(self) -> int:
        return sum(sum(s.fsyncs.values()) for s in self.steps)

    @property
    def reads(self) -> int:
        return sum(s.reads for s in self.steps)

    @property
    def commands(self) -> int:
        """Every MongoDB command of the approval, reads included."""
        return sum(sum(s.commands.values()) for s in self.steps)


def suspended_run(client: Any, keyed: bool) -> tuple[str, str, dict[str, Any]]:
    """Start a refund run (suspended); its ``(runId, toolCallId, approveToolCall input)``, the input
    with a fresh ``idempotencyKey`` when ``keyed``."""
    from .bulk import AGENT, START, _gql

    outcome = _gql(client, START, input={"agentId": AGENT, "prompt": "Please refund order 1042"})["startRun"]
    assert outcome["status"] == "SUSPENDED", outcome
    run_id, call_id = outcome["runId"], outcome["run"]["toolCalls"][0]["toolCallId"]
    request = {"agentId": AGENT, "runId": run_id, "toolCallId": call_id}
    if keyed:
        request["idempotencyKey"] = uuid.uuid4().hex
    return run_id, call_id, request


def count(store: str, url: str, trace: Path, pids: list[int], keyed: bool, scratch: Path) -> Approval:
    """One approval on a fresh run, with the trace file's lines and the fsyncs written during it."""
    import httpx

    from .bulk import APPROVE, _gql

    with httpx.Client(base_url=url, timeout=120, headers={"content-type": "application/json"}) as client:
        _, _, request = suspended_run(client, keyed)
        time.sleep(0.3)  # what the start left behind (events, run updates) lands before the window
        with fsync_trace(pids, scratch / f"strace-{uuid.uuid4().hex}.txt") as seen:
            offset = trace.stat().st_size
            answer = _gql(client, APPROVE, input=request)["approveToolCall"]
            time.sleep(0.2)
        assert answer["status"] == "COMPLETED", answer
        with trace.open() as lines:
            lines.seek(offset)
            window = lines.readlines()
    return Approval(store, keyed, steps(window, seen()))


@contextmanager
def counted_server(
    store: str,
    scratch: Path,
    mongodb_uri: str | None,
    update_interval: float | None = None,
    first_text_delay: float | None = None,
) -> Iterator[tuple[str, int, Path]]:
    """A ``python -m bench.commits serve`` process on ``store`` (``update_interval`` and
    ``first_text_delay``: its ``RUNSGATE_RUN_UPDATES_INTERVAL`` and ``..._FIRST_TEXT_DELAY``,
    ``None`` the default); yields its URL, pid and trace file."""
    from tests._servers import free_port, listening_process

    from .runner import _env

    trace = scratch / f"trace-{store}.tsv"
    trace.touch()
    port = free_port()
    variables = {TRACE_ENV: str(trace), "RUNSGATE_TOOL_RULES": "[]", "RUNSGATE_SWEEP_INTERVAL": "3600"}
    if update_interval is not None:
        variables["RUNSGATE_RUN_UPDATES_INTERVAL"] = str(update_interval)
    if first_text_delay is not None:
        variables["RUNSGATE_RUN_UPDATES_FIRST_TEXT_DELAY"] = str(first_text_delay)
    if store == "sqlite":
        variables["RUNSGATE_STORE"] = f"sqlite:///{scratch / 'bench.db'}"
    elif store in ("documentdb", "ferretdb"):
        assert mongodb_uri is not None
        variables["MONGODB_URI"] = mongodb_uri
    else:
        variables["RUNSGATE_STORE"] = "memory://"
    command = [sys.executable, "-m", "bench.commits", "serve", "--port", str(port)]
    with listening_process(command, port, scratch / f"{store}.log", env=_env(**variables), timeout=120) as proc:
        yield f"http://127.0.0.1:{port}", proc.pid, trace


def measure(
    store: str,
    approvals: int,
    scratch: Path,
    mongodb_uri: str | None = None,
    postgres: int | None = None,
    update_interval: float | None = None,
    first_text_delay: float | None = None,
    database: int | None = None,
) -> list[Approval]:
    """``approvals`` approvals without a key, then as many with one, after one of each unrecorded
    (``postgres``: PostgreSQL's pid, its children traced too; ``database``: another server process
    traced, FerretDB 1.24's)."""
    with counted_server(store, scratch, mongodb_uri, update_interval, first_text_delay) as (url, pid, trace):
        pids = [pid] + ([postgres, *children(postgres)] if postgres else []) + ([database] if database else [])
        for keyed in (False, True):
            count(store, url, trace, pids, keyed, scratch)  # warm-up: imports and caches of the path
        return [count(store, url, trace, pids, keyed, scratch) for keyed in (False, True) for _ in range(approvals)]


def _describe(counter: Counter[str]) -> str:
    return ", ".join(f"{name} x{n}" if n > 1 else name for name, n in counter.items()) or "-"


def lines(results: list[Approval]) -> list[str]:
    """Markdown: a totals table (each store and key, the range over its approvals), then each
    store's first approval of each kind, one row per store call."""
    out = [
        "| store | idempotency key | commits | fsyncs | reads | store calls |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    groups: dict[tuple[str, bool], list[Approval]] = {}
    for result in results:
        groups.setdefault((result.store, result.keyed), []).append(result)

    def spread(values: list[int]) -> str:
        return f"{min(values)}" if min(values) == max(values) else f"{min(values)}-{max(values)}"

    for (store, keyed), group in groups.items():
        out.append(
            f"| {store} | {'yes' if keyed else 'no'} | {spread([a.commits for a in group])} | "
            f"{spread([a.fsyncs for a in group])} | {spread([a.reads for a in group])} | "
            f"{spread([len(a.steps) for a in group])} |"
        )
    for (store, keyed), group in groups.items():
        out += [
            "",
            f"{store}, {'with' if keyed else 'without'} an idempotency key (first of {len(group)} approvals):",
            "",
            "| # | store call | writes | commits | reads | fsyncs |",
            "| ---: | --- | --- | ---: | ---: | --- |",
        ]
        for number, step in enumerate(group[0].steps, 1):
            out.append(
                f"| {number} | `{step.name}` | {_describe(step.writes)} | {step.commits} | {step.reads} | "
                f"{_describe(step.fsyncs)} |"
            )
        if any(a.commands for a in group):
            out += ["", *_command_lines(group)]
    return out


def _command_lines(group: list[Approval]) -> list[str]:
    """Markdown: each MongoDB command of the approvals in ``group`` by store call (in the first
    approval's order), how many each approval sent, and the median of its summed round trips."""
    import statistics

    out = [
        f"MongoDB commands ({min(a.commands for a in group)}-{max(a.commands for a in group)} per approval):",
        "",
        "| store call | command | per approval | round trips, median ms |",
        "| --- | --- | ---: | ---: |",
    ]
    keys: dict[tuple[str, str], None] = {}
    for approval in group:
        for step in approval.steps:
            keys.update(dict.fromkeys((step.name, command) for command in step.commands))
    for name, command in keys:
        counts = [sum(s.commands[command] for s in a.steps if s.name == name) for a in group]
        micros = [sum(s.micros[command] for s in a.steps if s.name == name) for a in group]
        spread = f"{min(counts)}" if min(counts) == max(counts) else f"{min(counts)}-{max(counts)}"
        out.append(f"| `{name}` | {command} | {spread} | {statistics.median(micros) / 1000:.2f} |")
    return out


def ensure_strace() -> None:
    """Install strace (``scripts/apt-install.sh``, as ``./dev bench`` installs wrk) when missing.

    Raises:
        RuntimeError: It is still missing (the script needs root and apt-get).
    """
    import shutil

    from tests._servers import ROOT

    if shutil.which("strace") is None:
        subprocess.run(["bash", str(ROOT / "scripts" / "apt-install.sh"), "strace"], check=False)
    if shutil.which("strace") is None:
        raise RuntimeError("strace is needed to count fsyncs: apt-get install strace")


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        return serve(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m bench.commits", description=__doc__)
    parser.add_argument("--stores", default="memory,sqlite,documentdb", help="of memory, sqlite, documentdb, ferretdb")
    parser.add_argument("--approvals", type=int, default=3, help="approvals counted per store and kind")
    parser.add_argument(
        "--update-interval",
        type=float,
        default=None,
        help="the servers' RUNSGATE_RUN_UPDATES_INTERVAL in seconds (default: the server's, 0.1); a long "
        "one (at most 60) leaves out the batches a slow machine writes while the tool runs",
    )
    parser.add_argument(
        "--first-text-delay",
        type=float,
        default=None,
        help="the servers' RUNSGATE_RUN_UPDATES_FIRST_TEXT_DELAY in seconds (default: the server's, 0.05)",
    )
    args = parser.parse_args(argv)
    ensure_strace()
    timing = {"update_interval": args.update_interval, "first_text_delay": args.first_text_delay}
    results: list[Approval] = []
    with tempfile.TemporaryDirectory(prefix="bench-commits-") as tmp:
        for store in args.stores.split(","):
            scratch = Path(tmp) / store
            scratch.mkdir()
            if store == "documentdb":
                from tests._documentdb import documentdb
                from tests._servers import with_database

                with documentdb() as server:
                    assert server.postgres is not None
                    uri = with_database(server.uri)
                    results += measure(store, args.approvals, scratch, uri, server.postgres.pid, **timing)
            elif store == "ferretdb":
                from tests._servers import ferretdb, with_database

                with ferretdb() as base:
                    port = base.rstrip("/").rsplit(":", 1)[1]
                    found = [
                        pid
                        for pid in children(os.getpid())
                        if f"127.0.0.1:{port}" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
                    ]
                    assert found, f"no FerretDB process listening on {port}"
                    results += measure(store, args.approvals, scratch, with_database(base), database=found[0], **timing)
            else:
                results += measure(store, args.approvals, scratch, **timing)
    print("\n".join(lines(results)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
