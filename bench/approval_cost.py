"""One approval's own cost and issue 27's targets: ``./dev run python -m bench.approval_cost [profile|targets] ...``.

``profile [approvals]``: the real app called as ASGI in process (``bench.inprocess.call``), memory
store, ``approveToolCall`` → COMPLETED on fresh refund runs (started untimed): CPU ms of one approval
(``time.process_time``, best of ``ROUNDS`` rounds), then a cProfile of the approvals, its self time
grouped by where the code lives (``AREAS``) and its top functions.

``targets [rounds] [per_round] [--documentdb]``: a memory and a SQLite ``bench.serve`` process
running at once (with ``--documentdb`` a third on FerretDB 2.5 with DocumentDB), approve →
completed timed over HTTP in rounds (the order rotates), the in-process CPU time, and the median
``fdatasync`` of a 4 KiB write in the SQLite file's folder; whether each target holds.

``paired [rounds] [per_round] --before DIR [--seeded N] [--documentdb-uri URI]``: the DocumentDB
approval before and after a change: two ``bench.serve`` processes on FerretDB 2.5 with DocumentDB
(started, or the one at URI), one of this checkout and one of DIR (e.g. a ``git archive`` of the
commit before), each on a database of its own, emptied first, then holding ``N`` runs of
``runsgate seed`` made by its own code (default 0), so its indexes are of a realistic size;
approve → completed p50 over HTTP in rounds whose order rotates, and the median over the rounds
of after / before within a round.
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.types import ASGIApp

from server.settings import DEMO_AGENTS, Settings

from .inprocess import call
from .queries import APPROVE, START_REFUND
from .serve import create_bench_app

ROUNDS = 5
SQLITE_MARGIN_MS = 1.0
"""Issue 44's bound on SQLite's approve p50 above memory's, on a quiet machine: the two durable
commits of an approval (the decision's, the completion's) and their hand-offs."""
DOCUMENTDB_FACTOR = 2.0
"""Issue 44's bound on DocumentDB's approve p50, as a multiple of SQLite's in the same rounds."""
AREAS = [
    (
        "model's run (pydantic-ai, pydantic-graph, the demo's script)",
        ("pydantic_ai/", "pydantic_graph/", "runtime/demo/"),
    ),
    ("GraphQL parse and validation", ("graphql/language/", "graphql/validation/", "graphql/utilities/")),
    ("GraphQL execution (graphql-core, Strawberry)", ("graphql/", "strawberry/")),
    ("pydantic (models, validation, serialisation)", ("pydantic/", "pydantic_core/")),
    ("runsgate runtime/", ("runtime/",)),
    ("runsgate resolvers/", ("resolvers/",)),
    ("runsgate server/ (auth, view, limits, logs)", ("server/",)),
    ("runsgate storage/", ("storage/",)),
    ("JSON (json, orjson)", ("json/", "orjson")),
    ("copies (copy module)", ("/copy.py",)),
    ("Starlette", ("starlette/",)),
    ("asyncio, contextvars, logging", ("asyncio/", "logging/", "contextlib.py")),
]
"""Area -> path fragments of its code, first match wins; every other frame is ``other``."""
STAGES = [
    ("the whole request (Starlette app and middleware down)", "starlette/applications.py", "__call__"),
    ("GraphQL parse", "graphql/language/parser.py", "parse"),
    ("GraphQL validation", "graphql/validation/validate.py", "validate"),
    ("the approveToolCall resolver", "mutations/approve_tool_call.py", "approve_tool_call"),
    ("runtime: the decision and continuation (Decisions.once)", "runtime/deciding/decisions.py", "once"),
    (
        "  of it, the model's run (pydantic-ai Agent.run, via runtime.running.execution.run_agent)",
        "runtime/running/execution.py",
        "run_agent",
    ),
    ("  of that, runsgate's reading of the run's events (publishing read)", "runtime/updates/publishing.py", "read"),
    ("JSON encoding (json.dumps)", "json/__init__.py", "dumps"),
    ("JSON decoding (json.loads)", "json/__init__.py", "loads"),
    ("copies (copy.deepcopy)", "/copy.py", "deepcopy"),
]
"""Stage -> (path fragment, function): cumulative time of that function (coroutines: the time
spent inside them while they ran, not while they waited)."""


def _body(query: str, **variables: Any) -> bytes:
    return json.dumps({"query": query, "variables": variables}).encode()


async def _approval(app: ASGIApp, number: int) -> Callable[[], Awaitable[None]]:
    """Start a refund run (suspended); the coroutine function that approves it and checks COMPLETED."""
    started = json.loads(
        await call(app, "/graphql", _body(START_REFUND, prompt=f"Please refund order {1042 + number % 2}"))
    )
    run = started["data"]["startRun"]
    body = _body(APPROVE, runId=run["runId"], toolCallId=run["run"]["toolCalls"][0]["toolCallId"])

    async def approve() -> None:
        answer = json.loads(await call(app, "/graphql", body))
        if answer["data"]["approveToolCall"].get("status") != "COMPLETED":
            raise RuntimeError(f"approve did not complete the run: {answer}")
        await asyncio.sleep(0.001)  # what the approval left to background tasks runs (and counts) here

    return approve


async def _timed(app: ASGIApp, approvals: int, profile: cProfile.Profile | None = None) -> float:
    """CPU ms per approval over ``approvals`` fresh runs (their starts untimed)."""
    pending = [await _approval(app, n) for n in range(approvals)]
    spent = 0.0
    for approve in pending:
        began = time.process_time()
        if profile is not None:
            profile.enable()
        await approve()
        if profile is not None:
            profile.disable()
        spent += time.process_time() - began
    return spent * 1000 / approvals


def memory_app() -> ASGIApp:
    """The bench app on the memory store, authentication off, every refund waiting for its decision;
    started as ``runsgate serve`` starts one: what its start made is frozen once its lifespan
    started (``server.app.settle_memory``)."""
    return create_bench_app(
        Settings(agents=DEMO_AGENTS, mongodb_uri=None, store=None, auth=False, tool_rules=[]), settle=True
    )


async def cpu_ms(approvals: int = 100, rounds: int = ROUNDS) -> tuple[float, float]:
    """In-process CPU milliseconds of one approval on the memory store, and of the model's run in
    it (``time.process_time`` while ``runtime.continuing.continuation.run_agent`` runs: pydantic-ai's
    ``Agent.run``, the tool and runsgate's event stream handler, wrapped here): the round with the
    least approval time of ``rounds`` rounds of ``approvals`` (after a warm-up round)."""
    from runtime.continuing import continuation as _continuation

    run_agent = vars(_continuation)["run_agent"]
    spent = [0.0]

    async def timed_run(*args: Any, **kwargs: Any) -> Any:
        began = time.process_time()
        try:
            return await run_agent(*args, **kwargs)
        finally:
            spent[0] += time.process_time() - began

    app = memory_app()
    figures = []
    vars(_continuation)["run_agent"] = timed_run
    try:
        async with app.router.lifespan_context(app):  # type: ignore[attr-defined]
            await _timed(app, 20)
            for _ in range(rounds):
                spent[0] = 0.0
                approval = await _timed(app, approvals)
                figures.append((approval, spent[0] * 1000 / approvals))
    finally:
        vars(_continuation)["run_agent"] = run_agent
    return min(figures)


def _area(filename: str) -> str:
    path = filename.replace(os.sep, "/")
    for name, fragments in AREAS:
        if any(fragment in path for fragment in fragments):
            return name
    return "other"


Table = dict[tuple[str, int, str], tuple[int, int, float, float, Any]]
"""pstats' table: (file, line, function) -> (primitive calls, calls, self s, cumulative s, callers)."""


class _Profile(cProfile.Profile):
    """A profiler that knows whether it is on."""

    on = False

    def enable(self, *args: Any, **kwargs: Any) -> None:
        self.on = True
        super().enable(*args, **kwargs)

    def disable(self) -> None:
        self.on = False
        super().disable()


async def _profiled(approvals: int, *, without_model: bool) -> Table:
    """cProfile (CPU time) of ``approvals`` approvals on a fresh memory-store app; with
    ``without_model``, paused while ``runtime.continuing.continuation.run_agent`` runs."""
    from runtime.continuing import continuation as _continuation

    profiler = _Profile(time.process_time)
    run_agent = vars(_continuation)["run_agent"]

    async def paused(*args: Any, **kwargs: Any) -> Any:
        was_on = profiler.on
        profiler.disable()
        try:
            return await run_agent(*args, **kwargs)
        finally:
            if was_on:
                profiler.enable()

    app = memory_app()
    if without_model:
        vars(_continuation)["run_agent"] = paused
    try:
        async with app.router.lifespan_context(app):  # type: ignore[attr-defined]
            await _timed(app, 20)
            await _timed(app, approvals, profiler)
    finally:
        vars(_continuation)["run_agent"] = run_agent
    table: Table = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    return table


def _where(filename: str, line: int, name: str) -> str:
    return f"{'/'.join(Path(filename).parts[-2:]) if filename != '~' else 'built-in'}:{line} {name}"


async def profile(approvals: int = 200) -> list[str]:
    """Markdown lines: CPU ms of one approval and of the model's run in it (``cpu_ms``); a
    cProfile of ``approvals`` approvals: self time by area (``AREAS``) and cumulative time of
    ``STAGES``; a second one paused during the model's run: the top 25 functions by self time,
    and runsgate's own top 15 by cumulative time."""
    cpu, model = await cpu_ms()
    table = await _profiled(approvals, without_model=False)
    total = sum(entry[2] for entry in table.values())
    areas: dict[str, float] = {}
    for (filename, _, _), entry in table.items():
        areas[_area(filename)] = areas.get(_area(filename), 0.0) + entry[2]
    lines = [
        f"- in-process CPU time of one approval (memory store, best of {ROUNDS} rounds of 100): {cpu:.2f} ms, "
        f"of which the model's run (``run_agent``: pydantic-ai's Agent.run, the tool, the event handler) "
        f"{model:.2f} ms ({100 * model / cpu:.0f}%), the rest {cpu - model:.2f} ms",
        f"- profiled: {approvals} approvals, {total * 1000 / approvals:.2f} CPU ms each under cProfile (its own "
        "overhead included; the shares below are of that CPU time)",
        "",
        "| area | share of self time |",
        "| --- | ---: |",
    ]
    lines += [
        f"| {name} | {100 * seconds / total:.1f}% |"
        for name, seconds in sorted(areas.items(), key=lambda item: -item[1])
    ]
    lines += ["", "| stage (cumulative) | CPU ms per approval under cProfile | share |", "| --- | ---: | ---: |"]
    for label, fragment, function in STAGES:
        spent = sum(
            entry[3] for (filename, _, name), entry in table.items() if fragment in filename and name == function
        )
        lines.append(f"| {label} | {spent * 1000 / approvals:.2f} | {100 * spent / total:.1f}% |")
    rest = await _profiled(approvals, without_model=True)
    rest_total = sum(entry[2] for entry in rest.values())
    lines += [
        "",
        f"Paused during the model's run: {rest_total * 1000 / approvals:.2f} CPU ms per approval under cProfile.",
        "",
        "| function (not the model's run), by self time | self ms per approval | calls per approval |",
        "| --- | ---: | ---: |",
    ]
    for (filename, line, name), entry in sorted(rest.items(), key=lambda item: -item[1][2])[:25]:
        lines.append(
            f"| `{_where(filename, line, name)}` | {entry[2] * 1000 / approvals:.3f} | {entry[1] / approvals:.1f} |"
        )
    own = [
        item
        for item in rest.items()
        if any(f"/{part}/" in item[0][0] for part in ("runtime", "resolvers", "server", "storage"))
    ]
    lines += [
        "",
        "| runsgate function, by cumulative time | cumulative ms per approval | calls per approval |",
        "| --- | ---: | ---: |",
    ]
    for (filename, line, name), entry in sorted(own, key=lambda item: -item[1][3])[:15]:
        lines.append(
            f"| `{_where(filename, line, name)}` | {entry[3] * 1000 / approvals:.3f} | {entry[1] / approvals:.1f} |"
        )
    return lines


def fdatasync_ms(folder: Path, samples: int = 200) -> float:
    """Median milliseconds of appending 4 KiB to a file in ``folder`` and ``os.fdatasync``-ing it."""
    path = folder / "fsync-probe"
    timings = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for _ in range(samples):
            os.write(fd, b"x" * 4096)
            began = time.perf_counter()
            os.fdatasync(fd)
            timings.append((time.perf_counter() - began) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return statistics.median(timings)


def targets(rounds: int = 5, per_round: int = 20, documentdb: bool = False) -> list[str]:
    """Markdown lines: the paired rounds over HTTP, the in-process CPU time and the fsync time, and
    each target's verdict. ``documentdb``: a third server on FerretDB 2.5 with DocumentDB in the
    same rounds (issue 44: its p50 at most 2x SQLite's)."""
    import httpx

    from tests._servers import documentdb as documentdb_server
    from tests._servers import with_database

    from .runner import round_trip_ms, runsgate_server

    names = ["memory", "SQLite", *(["DocumentDB"] if documentdb else [])]
    p50: dict[str, list[float]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="bench-targets-") as tmp, contextlib.ExitStack() as stack:
        folder = Path(tmp)
        stores = {"memory": "memory://", "SQLite": f"sqlite:///{folder / 'bench.db'}"}
        if documentdb:
            stores["DocumentDB"] = with_database(stack.enter_context(documentdb_server()), "bench_targets")
        clients = {}
        for name, store in stores.items():
            url, _ = stack.enter_context(
                runsgate_server(folder / f"{name}.log", 120, RUNSGATE_STORE=store, RUNSGATE_TOOL_RULES="[]")
            )
            clients[name] = stack.enter_context(httpx.Client(base_url=url, timeout=120))
        for client in clients.values():
            round_trip_ms(client, 5)  # warm-up
        for number in range(rounds):
            order = names[number % len(names) :] + names[: number % len(names)]
            for name in order:
                p50[name].append(round_trip_ms(clients[name], per_round))
        fsync = fdatasync_ms(folder)
    cpu, _ = asyncio.run(cpu_ms())
    memory_p50, sqlite_p50 = p50["memory"], p50["SQLite"]
    memory_ms, sqlite_ms = statistics.median(memory_p50), statistics.median(sqlite_p50)
    memory_bound, sqlite_bound = 2 * cpu, memory_ms + SQLITE_MARGIN_MS
    gap = statistics.median(s - m for m, s in zip(memory_p50, sqlite_p50, strict=True))
    rows = ", ".join("/".join(f"{p50[name][r]:.1f}" for name in names) for r in range(rounds))
    lines = [
        f"- approve -> completed p50 over HTTP, {rounds} rounds of {per_round}, the order rotating "
        f"({'/'.join(names)} ms per round): {rows}",
        f"- memory p50 (median of rounds): {memory_ms:.2f} ms; SQLite p50: {sqlite_ms:.2f} ms",
        f"- SQLite p50 - memory p50 within each round, median of rounds: {gap:.2f} ms",
        f"- in-process CPU time of one approval (memory store): {cpu:.2f} ms",
        f"- fdatasync of a 4 KiB append in the SQLite file's folder ({tempfile.gettempdir()}), "
        f"median of 200: {fsync:.3f} ms",
        f"- target memory p50 <= 2 x CPU time = {memory_bound:.2f} ms: "
        f"{'met' if memory_ms <= memory_bound else 'not met'} ({memory_ms / cpu:.2f}x the CPU time)",
        f"- target SQLite p50 <= memory p50 + {SQLITE_MARGIN_MS:g} ms = {sqlite_bound:.2f} ms (issue 44): "
        f"{'met' if sqlite_ms <= sqlite_bound else 'not met'} (SQLite - memory = {sqlite_ms - memory_ms:.2f} ms, "
        f"{(sqlite_ms - memory_ms) / fsync:.1f} fsync times)",
    ]
    if documentdb:
        documentdb_ms = statistics.median(p50["DocumentDB"])
        ratio = statistics.median(d / s for s, d in zip(sqlite_p50, p50["DocumentDB"], strict=True))
        lines.append(
            f"- target DocumentDB p50 <= {DOCUMENTDB_FACTOR:g} x SQLite p50 (issue 44): DocumentDB p50 "
            f"{documentdb_ms:.2f} ms, {ratio:.2f}x SQLite's (median of per-round ratios): "
            f"{'met' if ratio <= DOCUMENTDB_FACTOR else 'not met'}"
        )
    return lines


def paired(before: Path, rounds: int = 5, per_round: int = 20, seeded: int = 0, uri: str = "") -> list[str]:
    """Markdown lines: the DocumentDB approval's p50 of this checkout and of ``before`` in paired
    rounds (module docstring, ``paired``)."""
    import httpx
    from pymongo import MongoClient

    from tests._servers import ROOT, with_database
    from tests._servers import documentdb as documentdb_server

    from .listing_totals import seed
    from .runner import checkout_server, round_trip_ms

    versions = {"before": before.resolve(), "after": ROOT}
    p50: dict[str, list[float]] = {version: [] for version in versions}
    with tempfile.TemporaryDirectory(prefix="bench-paired-") as tmp, contextlib.ExitStack() as stack:
        base = uri or stack.enter_context(documentdb_server())
        clients = {}
        for version, source in versions.items():
            store = with_database(base, f"bench_approval_{version}")
            client: MongoClient[dict[str, Any]]
            with MongoClient(store) as client:
                client.drop_database(client.get_default_database().name)
            if seeded:
                seed(seeded, source, MONGODB_URI=store)
            log = Path(tmp) / f"{version}.log"
            served = checkout_server(source, log, 120, RUNSGATE_STORE=store, RUNSGATE_TOOL_RULES="[]")
            url, _ = stack.enter_context(served)
            clients[version] = stack.enter_context(httpx.Client(base_url=url, timeout=120))
        for client_of in clients.values():
            round_trip_ms(client_of, 5)  # warm-up
        names = list(versions)
        for number in range(rounds):
            for version in names[number % 2 :] + names[: number % 2]:
                p50[version].append(round_trip_ms(clients[version], per_round))
    ratio = statistics.median(a / b for b, a in zip(p50["before"], p50["after"], strict=True))
    rows = ", ".join(f"{b:.1f}/{a:.1f}" for b, a in zip(p50["before"], p50["after"], strict=True))
    return [
        f"- DocumentDB approve -> completed p50 over HTTP, {rounds} rounds of {per_round}, {seeded:,} seeded "
        f"runs, the order rotating (before/after ms per round): {rows}",
        f"- before p50 (median of rounds): {statistics.median(p50['before']):.2f} ms; after: "
        f"{statistics.median(p50['after']):.2f} ms; after / before within a round, median: {ratio:.3f}",
    ]


def _option(argv: list[str], name: str) -> str | None:
    """The value after ``name`` in ``argv``, if any."""
    return argv[argv.index(name) + 1] if name in argv else None


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "profile"
    options = {"--before", "--seeded", "--documentdb-uri"}
    given = [a for i, a in enumerate(argv[1:], 1) if a not in options and argv[i - 1] not in options]
    numbers = [int(a) for a in given if a != "--documentdb"]
    if what == "paired":
        before = _option(argv, "--before")
        if before is None:
            raise SystemExit("paired needs --before DIR")
        rounds, per_round = (numbers + [5, 20][len(numbers) :])[:2]
        seeded, uri = int(_option(argv, "--seeded") or 0), _option(argv, "--documentdb-uri") or ""
        lines = paired(Path(before), rounds, per_round, seeded, uri)
    elif what == "profile":
        lines = asyncio.run(profile(*numbers))
    else:
        rounds, per_round = (numbers + [5, 20][len(numbers) :])[:2]
        lines = targets(rounds, per_round, documentdb="--documentdb" in argv)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
