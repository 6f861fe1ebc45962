"""``./dev bench`` (``python -m bench`` in the project's environment): run the benchmarks, print the
table, write ``bench/RESULTS.md``.

Options: ``--memory 10000,100000,1000000`` and ``--mongo 10000,100000`` (sizes; empty to skip),
``--seconds 10`` (wrk time per scenario), ``--rounds 5`` (interleaved rounds; each row is its median
round), ``--connections 10``, ``--out bench/RESULTS.md`` (``-`` to write nothing).
MongoDB is ``MONGODB_URI`` when set (a fresh database per size), else a FerretDB started here.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import platform
import shlex
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from storage import MongoSnapshotStore, RunFilter
from tests._servers import ferretdb, with_database

from .queries import AGENT, PAGE_SIZE
from .runner import SCENARIOS, Settings, SizeResult, bench_memory, bench_mongo, paired_ratio
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
    """Summary of the server's plan for the first page (``MongoSnapshotStore.explain_listing``)."""
    store = MongoSnapshotStore(uri)
    await store.open()
    try:
        plan = await store.explain_listing(AGENT, RunFilter(), PAGE_SIZE)
        build = await store.database.command("buildInfo")
    finally:
        await store.close()
    server = f"FerretDB {build['ferretdbVersion']}" if "ferretdbVersion" in build else "MongoDB"
    return {"server": f"{server} (wire version {build.get('version')})", "queryPlanner": plan.get("queryPlanner")}


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
        "| 90% page p50 / first p50 | approve->completed p50 ms | server peak RSS MiB | start s | seed s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        lines.append(
            f"| {r.store} | {r.runs:,} | {paired_ratio(r, 'graphql first', 'raw first', _rps):.2f} "
            f"| {paired_ratio(r, 'graphql thread', 'raw thread', _rps):.2f} "
            f"| {paired_ratio(r, 'graphql 90% cursor', 'graphql first', _p50):.2f} "
            f"| {paired_ratio(r, 'graphql 90% page', 'graphql first', _p50):.2f} "
            f"| {r.round_trip_ms or 0:.1f} | {r.peak_rss_mb or 0:,.0f} | {r.start_seconds:.0f} | {r.seed_seconds:.0f} |"
        )
    return lines


def write_report(
    args: argparse.Namespace,
    settings: Settings,
    about: dict[str, str],
    results: list[SizeResult],
    plans: list[dict[str, Any]],
    *,
    final: bool,
) -> None:
    """Print (when ``final``) and write the report; called after every size, so a long run keeps what it measured."""
    report = [
        "# runsgate benchmark results",
        "",
        f"Command: `./dev bench --memory {shlex.quote(args.memory)} --mongo {shlex.quote(args.mongo)} "
        f"--seconds {args.seconds:g} --rounds {args.rounds} "
        f"--connections {args.connections}` (`python -m bench` in the project's environment). "
        f"Each row: wrk, {args.connections} connections, "
        f"1 thread, against a real `python -m server serve` process; page size {PAGE_SIZE}; the scenarios take "
        f"turns in {settings.rounds} rounds of {settings.round_seconds} s, and each row is its median round; "
        "each ratio below is the median of that ratio within each round.",
        "",
        *(f"- {key}: {value}" for key, value in about.items()),
        "",
        *table(results),
        "",
        *(
            [
                f"FerretDB rows are {settings.sequential_samples} requests sent one after another (p99 column: "
                "the slowest), not wrk: a page there takes seconds, so a fixed-duration wrk run would complete "
                "almost none.",
                "",
            ]
            if any(result.store != "memory" for result in results)
            else []
        ),
        *ratios(results),
        "",
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
    parser.add_argument("--mongo", default="10000,100000", help="MongoDB/FerretDB sizes, comma-separated")
    parser.add_argument("--seconds", type=float, default=10.0, help="wrk time per scenario, split into rounds")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; each row is its median round")
    parser.add_argument("--connections", type=int, default=10, help="wrk connections")
    parser.add_argument("--round-trips", type=int, default=20, help="approve round trips per memory-store size")
    parser.add_argument("--mongo-round-trips", type=int, default=3, help="approve round trips per MongoDB size")
    parser.add_argument("--samples", type=int, default=3, help="sequential requests per MongoDB scenario")
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
    with tempfile.TemporaryDirectory(prefix="runsgate-bench-logs-") as folder:
        logs = Path(folder)
        for runs in _sizes(args.memory):
            results.append(bench_memory(runs, settings, logs))
            write_report(args, settings, about, results, plans, final=False)
        mongo_sizes = _sizes(args.mongo)
        if mongo_sizes:
            with mongodb() as base:
                for runs in mongo_sizes:
                    uri = with_database(base, f"runsgate_bench_{runs}")
                    results.append(bench_mongo(uri, runs, mongo_settings, logs))
                    plans.append({"runs": runs, **asyncio.run(explain(uri))})
                    asyncio.run(_drop(uri))
                    write_report(args, settings, about, results, plans, final=False)
    write_report(args, settings, about, results, plans, final=True)
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
