"""``./dev bench`` (``python -m bench`` in the project's environment): run the benchmarks, print the
table, write ``bench/RESULTS.md``.

Options: ``--memory 10000,100000,1000000``, ``--sqlite 10000,100000,1000000``, ``--documentdb 10000,100000``
and ``--mongo ''`` (sizes; empty to skip), ``--workers-runs 10000`` (runs in the SQLite file on which ``--workers 2`` is
compared with one worker; 0 to skip), ``--bulk-rounds 5`` (paired rounds of ``bench.bulk``, one
``decideToolCalls`` of 100 approvals against 100 sequential ``approveToolCall``, on the memory store
and SQLite; 0 to skip), ``--approval-rounds 5`` (``bench.approval_cost targets``; 0 to skip),
``--seconds 10`` (wrk time per scenario), ``--rounds 5`` (interleaved rounds; each row is its median
round), ``--connections 10``, ``--out bench/RESULTS.md`` (``-`` to write nothing).
``--documentdb`` runs on FerretDB 2.5 with DocumentDB started here (``tests/_documentdb.py``),
``--mongo`` on ``MONGODB_URI`` when set, else on FerretDB 1.24 started here; both with ``--samples``
requests sent one after another instead of wrk (a page there takes up to seconds, longer than a
wrk round). Each database is a fresh one per size, seeded by ``runsgate seed``; each SQLite size
gets a new file in a temporary folder, seeded by ``runsgate seed --store sqlite:///...``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import platform
import shlex
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from storage import MongoSnapshotStore, RunFilter, SQLiteSnapshotStore
from tests._servers import documentdb, ferretdb, with_database

from .approval_cost import targets as approval_targets
from .bulk import measure as bulk_measure
from .queries import AGENT, PAGE_SIZE
from .runner import (
    SCENARIOS,
    PairedRoundTrips,
    Settings,
    SizeResult,
    WorkersResult,
    bench_memory,
    bench_mongo,
    bench_sqlite,
    bench_workers,
    paired_ratio,
    paired_round_trips,
    seed,
)
from .wrk import LoadResult, ensure_wrk


def _sizes(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


@contextmanager
def mongodb() -> Iterator[str]:
    """Base URI of ``MONGODB_URI``, or of a FerretDB started for the benchmark."""
    if os.environ.get("MONGODB_URI"):
        yield os.environ["MONGODB_URI"]
        return
    with ferretdb() as uri:
        yield uri


def machine() -> dict[str, str]:
    """What the figures were measured on."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor(),
    )
    mem_kb = int(Path("/proc/meminfo").read_text().split()[1])
    wrk = subprocess.run([ensure_wrk(), "-v"], capture_output=True, text=True, check=False).stdout.splitlines()
    return {
        "date (UTC)": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"),
        "cores (nproc)": str(os.cpu_count()),
        "RAM": f"{mem_kb / 1024 / 1024:.1f} GiB",
        "CPU": cpu,
        "load average at start": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
        "Python": platform.python_version(),
        "versions": ", ".join(
            f"{name} {version(name)}"
            for name in ("strawberry-graphql", "graphql-core", "starlette", "uvicorn", "uvloop", "httptools", "pymongo")
        ),
        "load generator": (wrk[0] if wrk else "wrk").split(" Copyright")[0],
    }


async def explain(uri: str) -> dict[str, Any]:
    """Summary of the server's plan for the first page and a thread's page
    (``MongoSnapshotStore.explain_listing``): DocumentDB's PostgreSQL plan nodes, or mongod's and
    FerretDB 1.24's ``queryPlanner``."""
    store = MongoSnapshotStore(uri)
    await store.open()
    try:
        first = await store.explain_listing(AGENT, RunFilter(), PAGE_SIZE)
        thread = await store.explain_listing(AGENT, RunFilter(thread_id="thread-7"), PAGE_SIZE)
        build = await store.database.command("buildInfo")
    finally:
        await store.close()
    if "ferretdb" in build:  # FerretDB 2 on DocumentDB: PostgreSQL plans
        return {
            "server": f"FerretDB {build['ferretdb']['version']} on DocumentDB",
            "first page": _pg_nodes(first["queryPlanner"]["Plan"]),
            "thread page": _pg_nodes(thread["queryPlanner"]["Plan"]),
        }
    server = f"FerretDB {build['ferretdbVersion']}" if "ferretdbVersion" in build else "MongoDB"
    return {"server": f"{server} (wire version {build.get('version')})", "queryPlanner": first.get("queryPlanner")}


def _pg_nodes(node: dict[str, Any]) -> str:
    """A PostgreSQL plan as ``Limit < Sort < Index Scan (agent_thread_resource_created)``."""
    name = str(node["Node Type"]) + (f" ({node['Index Name']})" if "Index Name" in node else "")
    children = [_pg_nodes(child) for child in node.get("Plans", [])]
    return name + (" < " + " + ".join(children) if children else "")


async def explain_sqlite(path: Path) -> dict[str, Any]:
    """SQLite's plan for the first page and the first page of a thread (``SQLiteSnapshotStore.explain_listing``)."""
    store = SQLiteSnapshotStore(path)
    await store.open()
    try:
        first = await store.explain_listing(AGENT, RunFilter(), PAGE_SIZE)
        thread = await store.explain_listing(AGENT, RunFilter(thread_id="thread-7"), PAGE_SIZE)
    finally:
        await store.close()
    return {"server": f"SQLite {sqlite3.sqlite_version}", "first page": first, "thread page": thread}


def table(results: list[SizeResult]) -> list[str]:
    """The markdown table of every scenario."""
    lines = [
        "| store | runs | scenario | req/s | p50 ms | p99 ms | errors |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        for name in SCENARIOS:
            load = r.loads.get(name)
            if load is not None:
                lines.append(
                    f"| {r.store} | {r.runs:,} | {name} | {load.requests_per_second:,.1f} | {load.p50_ms:.2f} "
                    f"| {load.p99_ms:.2f} | {load.errors} |"
                )
    return lines


def _rps(load: LoadResult) -> float:
    return load.requests_per_second


def _p50(load: LoadResult) -> float:
    return load.p50_ms


def ratios(results: list[SizeResult]) -> list[str]:
    """GraphQL tax, depth ratios, round trip and RSS, one row per store and size; the ratios
    are medians of the ratios within each round (``bench.runner.paired_ratio``)."""
    lines = [
        "| store | runs | GraphQL/raw first | GraphQL/raw thread | 90% cursor p50 / first p50 "
        "| 90% page p50 / first p50 | approve->completed p50 ms | server peak RSS MiB | start s | store open s "
        "| seed s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        lines.append(
            f"| {r.store} | {r.runs:,} | {paired_ratio(r, 'graphql first', 'raw first', _rps):.2f} "
            f"| {paired_ratio(r, 'graphql thread', 'raw thread', _rps):.2f} "
            f"| {paired_ratio(r, 'graphql 90% cursor', 'graphql first', _p50):.2f} "
            f"| {paired_ratio(r, 'graphql 90% page', 'graphql first', _p50):.2f} "
            f"| {r.round_trip_ms or 0:.1f} | {r.peak_rss_mb or 0:,.0f} | {r.start_seconds:.1f} "
            f"| {'' if r.store_open_seconds is None else f'{r.store_open_seconds:.2f}'} | {r.seed_seconds:.0f} |"
        )
    return lines


def growth(results: list[SizeResult]) -> list[str]:
    """For each store measured at several sizes: each page's p50 and the approve round trip at the
    largest size divided by those at the smallest (separate server processes, minutes apart: not
    paired, so the machine's drift is in these ratios)."""
    lines: list[str] = []
    for store in dict.fromkeys(r.store for r in results):
        sized = sorted((r for r in results if r.store == store), key=lambda r: r.runs)
        if len(sized) < 2:
            continue
        small, large = sized[0], sized[-1]
        parts = [
            f"{name} p50 {large.loads[name].p50_ms / small.loads[name].p50_ms:.2f}"
            for name in ("graphql first", "graphql thread", "graphql 90% cursor")
            if name in small.loads and name in large.loads
        ]
        if small.round_trip_ms and large.round_trip_ms:
            parts.append(f"approve->completed p50 {large.round_trip_ms / small.round_trip_ms:.2f}")
        lines.append(f"- {store}, {large.runs:,} runs / {small.runs:,} runs: " + ", ".join(parts))
    return lines


def workers_lines(workers: list[WorkersResult]) -> list[str]:
    """One line per ``--workers 2`` comparison."""
    return [
        f"- sqlite, {w.runs:,} runs, graphql first: --workers 2 / one worker req/s = {w.ratio:.2f} (median of "
        f"{len(w.one)} paired rounds; one worker "
        + ", ".join(f"{load.requests_per_second:,.0f}" for load in w.one)
        + "; two workers "
        + ", ".join(f"{load.requests_per_second:,.0f}" for load in w.two)
        + ")"
        for w in workers
    ]


def paired_lines(paired: list[PairedRoundTrips]) -> list[str]:
    """One line per store whose approve round trip was timed on its sizes in paired rounds."""
    lines = []
    for p in paired:
        small, large = min(p.rounds), max(p.rounds)
        each = "; ".join(f"{runs:,} runs " + ", ".join(f"{ms:.0f}" for ms in p.rounds[runs]) for runs in (large, small))
        lines.append(
            f"- {p.store}, approve->completed with both servers running, in {len(p.rounds[large])} paired rounds: "
            f"{large:,} runs / {small:,} runs = {p.ratio:.2f} (median of the ratios within each round; each "
            f"round's median ms: {each})"
        )
    return lines


def bulk_lines(bulk: dict[str, dict[str, float]]) -> list[str]:
    """One line per store of ``bench.bulk``: one ``decideToolCalls`` against sequential approvals."""
    return [
        f"- {store}, {figures['calls']:.0f} approvals: one decideToolCalls / {figures['calls']:.0f} sequential "
        f"approveToolCall = {figures['ratio']:.2f} (median of {figures['rounds']:.0f} paired rounds, worst "
        f"{figures['ratio_max']:.2f}; {figures['bulk_ms']:,.0f} against {figures['sequential_ms']:,.0f} ms)"
        for store, figures in bulk.items()
    ]


def write_report(
    args: argparse.Namespace,
    settings: Settings,
    about: dict[str, str],
    results: list[SizeResult],
    plans: list[dict[str, Any]],
    *,
    final: bool,
    workers: list[WorkersResult] | None = None,
    bulk: dict[str, dict[str, float]] | None = None,
    paired: list[PairedRoundTrips] | None = None,
    targets: list[str] | None = None,
) -> None:
    """Print (when ``final``) and write the report; called after every size, so a long run keeps what it measured."""
    report = [
        "# runsgate benchmark results",
        "",
        f"Command: `./dev bench --memory {shlex.quote(args.memory)} --sqlite {shlex.quote(args.sqlite)} "
        f"--workers-runs {args.workers_runs} --bulk-rounds {args.bulk_rounds} --approval-rounds {args.approval_rounds} "
        f"--documentdb {shlex.quote(args.documentdb)} --mongo {shlex.quote(args.mongo)} "
        f"--seconds {args.seconds:g} --rounds {args.rounds} "
        f"--connections {args.connections} --round-trips {args.round_trips} "
        f"--mongo-round-trips {args.mongo_round_trips} --samples {args.samples}` "
        "(`python -m bench` in the project's environment). "
        f"Each row: wrk, {args.connections} connections, "
        f"1 thread, against a real `python -m bench.serve` process; page size {PAGE_SIZE}; the scenarios take "
        f"turns in {settings.rounds} rounds of {settings.round_seconds} s, and each row is its median round; "
        "each ratio below is the median of that ratio within each round.",
        "",
        *(f"- {key}: {value}" for key, value in about.items()),
        "",
        *table(results),
        "",
        *(
            [
                f"MongoDB rows (documentdb, ferretdb) are {settings.sequential_samples} requests sent one after "
                "another (p99 column: the slowest), not wrk: a page there takes up to seconds, so a "
                "fixed-duration wrk round would complete almost none.",
                "",
            ]
            if any(result.store in ("documentdb", "ferretdb") for result in results)
            else []
        ),
        *ratios(results),
        "",
        "Growth from the smallest to the largest size (p50 at the largest / p50 at the smallest):",
        "",
        *growth(results),
        *paired_lines(paired or []),
        "",
        *workers_lines(workers or []),
        *bulk_lines(bulk or {}),
        "",
        *(
            ["Issue 27's approval targets (`bench.approval_cost targets`, 20 approvals per round):", "", *targets, ""]
            if targets
            else []
        ),
        *(f"- query plan at {p['runs']:,} runs: {p}" for p in plans),
    ]
    text = "\n".join(report) + "\n"
    if final:
        print(text)
    if args.out != "-":
        out = Path(args.out)
        previous = out.read_text() if out.exists() else ""
        marker = "<!-- measured -->"
        notes = previous.split(marker, 1)[1] if marker in previous else ""
        out.write_text(text + "\n" + marker + notes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--memory", default="10000,100000,1000000", help="memory-store sizes, comma-separated")
    parser.add_argument("--sqlite", default="10000,100000,1000000", help="SQLite sizes, comma-separated")
    parser.add_argument(
        "--workers-runs", type=int, default=10000, help="runs of the SQLite file for --workers 2 (0: skip)"
    )
    parser.add_argument(
        "--documentdb", default="10000,100000", help="FerretDB 2.5 on DocumentDB sizes, comma-separated"
    )
    parser.add_argument("--mongo", default="", help="MONGODB_URI or FerretDB 1.24 sizes, comma-separated")
    parser.add_argument("--seconds", type=float, default=10.0, help="wrk time per scenario, split into rounds")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; each row is its median round")
    parser.add_argument("--connections", type=int, default=10, help="wrk connections")
    parser.add_argument("--round-trips", type=int, default=20, help="approve round trips per memory-store size")
    parser.add_argument("--mongo-round-trips", type=int, default=3, help="approve round trips per MongoDB size")
    parser.add_argument("--samples", type=int, default=3, help="sequential requests per MongoDB scenario")
    parser.add_argument(
        "--approval-rounds",
        type=int,
        default=5,
        help="paired rounds of bench.approval_cost targets, memory and SQLite approve -> completed (0: skip)",
    )
    parser.add_argument(
        "--bulk-rounds", type=int, default=5, help="paired rounds of bench.bulk per store, memory and SQLite (0: skip)"
    )
    parser.add_argument("--out", default=str(Path(__file__).parent / "RESULTS.md"), help="report file, - for none")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    settings = Settings(
        seconds=args.seconds,
        rounds=args.rounds,
        connections=args.connections,
        round_trips=args.round_trips,
        sequential_samples=args.samples,
    )
    mongo_settings = dataclasses.replace(settings, round_trips=args.mongo_round_trips)
    about = machine()
    results: list[SizeResult] = []
    plans: list[dict[str, Any]] = []
    workers: list[WorkersResult] = []
    bulk: dict[str, dict[str, float]] = {}
    paired: list[PairedRoundTrips] = []
    with tempfile.TemporaryDirectory(prefix="runsgate-bench-logs-") as folder:
        logs = Path(folder)
        for runs in _sizes(args.memory):
            results.append(bench_memory(runs, settings, logs))
            write_report(args, settings, about, results, plans, final=False)
        for runs in _sizes(args.sqlite):
            results.append(bench_sqlite(logs / f"sqlite-{runs}.db", runs, settings, logs))
            plans.append({"runs": runs, **asyncio.run(explain_sqlite(logs / f"sqlite-{runs}.db"))})
            (logs / f"sqlite-{runs}.db").unlink()
            write_report(args, settings, about, results, plans, final=False)
        if args.workers_runs > 0:
            path = logs / "sqlite-workers.db"
            seed(settings, args.workers_runs, RUNSGATE_STORE=f"sqlite:///{path}")
            workers.append(bench_workers(path, args.workers_runs, settings, logs))
            write_report(args, settings, about, results, plans, final=False, workers=workers)
        if args.bulk_rounds > 0:
            for store in ("memory", "sqlite"):
                bulk[store] = {**bulk_measure(store, args.bulk_rounds, 100), "rounds": args.bulk_rounds, "calls": 100}
            write_report(args, settings, about, results, plans, final=False, workers=workers, bulk=bulk)
        documentdb_sizes = _sizes(args.documentdb)
        if documentdb_sizes:
            with documentdb() as base:
                uris: dict[int, str] = {}
                for runs in documentdb_sizes:
                    uris[runs] = with_database(base, f"runsgate_bench_{runs}")
                    results.append(bench_mongo(uris[runs], runs, settings, logs, store="documentdb"))
                    plans.append({"runs": runs, **asyncio.run(explain(uris[runs]))})
                    write_report(args, settings, about, results, plans, final=False, workers=workers, bulk=bulk)
                if len(uris) > 1:  # the approve target, paired: every size's server running at once
                    paired.append(paired_round_trips("documentdb", uris, settings, logs))
                for uri in uris.values():
                    asyncio.run(_drop(uri))
        mongo_sizes = _sizes(args.mongo)
        if mongo_sizes:
            with mongodb() as base:
                for runs in mongo_sizes:
                    uri = with_database(base, f"runsgate_bench_{runs}")
                    results.append(bench_mongo(uri, runs, mongo_settings, logs))
                    plans.append({"runs": runs, **asyncio.run(explain(uri))})
                    asyncio.run(_drop(uri))
                    write_report(
                        args, settings, about, results, plans, final=False, workers=workers, bulk=bulk, paired=paired
                    )
    targets = approval_targets(args.approval_rounds) if args.approval_rounds > 0 else None
    write_report(
        args, settings, about, results, plans, final=True, workers=workers, bulk=bulk, paired=paired, targets=targets
    )
    return 0


async def _drop(uri: str) -> None:
    store = MongoSnapshotStore(uri)
    await store.open()
    try:
        await store.drop_all()
    finally:
        await store.close()


if __name__ == "__main__":
    raise SystemExit(main())
