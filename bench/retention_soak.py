"""Retention soak: a store's size and request latency stay flat over retention periods.

``./dev run python -m bench.retention_soak [--store sqlite|documentdb] [--period 120] [--periods 3]
[--rate 4] [--reindex] [--json FILE]``. Per store (both by default) one ``bench.serve`` process runs with every
retention setting (events, idempotency keys, webhook deliveries, run updates) at ``--period``
seconds and a short sweep interval; runs are started (refund, suspends) and approved over HTTP
at ``--rate`` runs per second, each request with an idempotency key. At the end of each period:
the store's size (SQLite: pages in use, and file + WAL bytes; DocumentDB: dbStats storageSize
+ indexSize, the pages on disk: its dataSize is PostgreSQL's row-count estimate), its record
counts, and the p50 of the period's last quarter of requests. ``--reindex``: on DocumentDB, the
operator's ``scripts/documentdb-reindex.sh`` runs just before each sample. Targets: later periods' size and
p50 at most ``TARGET`` times period 1's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

from .queries import APPROVE as _APPROVE
from .runner import runsgate_server

TARGET = 1.2
"""Most a later period's size or p50 may be, as a multiple of period 1's."""
STORES = ("sqlite", "documentdb")
START = """
mutation Start($prompt: String!, $key: String!) {
  startRun(input: {agentId: "refund-agent", prompt: $prompt, idempotencyKey: $key}) {
    __typename
    ... on RunOutcome { runId status run { toolCalls { toolCallId } } }
    ... on UserError { code message }
  }
}
"""
APPROVE = _APPROVE.replace("$toolCallId: ID!)", "$toolCallId: ID!, $key: String!)").replace(
    "toolCallId: $toolCallId}", "toolCallId: $toolCallId, idempotencyKey: $key}"
)
SQLITE_TABLES = (
    "run_snapshots",
    "run_histories",
    "run_events",
    "idempotency_keys",
    "webhook_deliveries",
    "run_updates",
)


def settings_for(period: float, sweep_interval: float) -> dict[str, str]:
    """The server's settings: every retention at ``period`` seconds, the sweeper every ``sweep_interval``."""
    return {
        "RUNSGATE_EVENT_RETENTION": str(period),
        "RUNSGATE_IDEMPOTENCY_KEY_RETENTION": str(period),
        "RUNSGATE_WEBHOOK_DELIVERY_RETENTION": str(period),
        "RUNSGATE_RUN_UPDATES_RETENTION": str(period),
        "RUNSGATE_SUBSCRIPTION_LOOKBACK": str(min(5.0, period / 2)),  # retentions must exceed it
        "RUNSGATE_SWEEP_INTERVAL": str(sweep_interval),
        "RUNSGATE_TOOL_RULES": "[]",
    }


def sqlite_size(path: Path) -> dict[str, Any]:
    """Bytes of pages in use (page_count - freelist_count, times page_size), file + WAL bytes, row counts."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        page_size = connection.execute("PRAGMA page_size").fetchone()[0]
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        free = connection.execute("PRAGMA freelist_count").fetchone()[0]
        counts = {t: connection.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in SQLITE_TABLES}
    finally:
        connection.close()
    wal = Path(f"{path}-wal")
    files = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    return {"bytes": (pages - free) * page_size, "fileBytes": files, "counts": counts}


def mongo_size(uri: str) -> dict[str, Any]:
    """dbStats' storageSize + indexSize (bytes of pages on disk; dataSize apart: DocumentDB
    estimates it from PostgreSQL's row statistics), each collection's document count."""
    import pymongo

    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(uri, serverSelectionTimeoutMS=30_000)
    try:
        database = client.get_default_database()
        stats = database.command("dbStats")
        counts = {name: database[name].count_documents({}) for name in sorted(database.list_collection_names())}
    finally:
        client.close()
    return {
        "bytes": int(stats.get("storageSize", 0)) + int(stats.get("indexSize", 0)),
        "dataBytes": int(stats.get("dataSize", 0)),
        "counts": counts,
    }


class Load:
    """Starts and approves refund runs at a steady rate; keeps (finish time, ms) of every request."""

    def __init__(self, url: str, rate: float) -> None:
        self.url, self.rate = url, rate
        self.timings: list[tuple[float, float]] = []
        self.runs = 0
        self.errors = 0

    async def _post(self, client: httpx.AsyncClient, query: str, **variables: Any) -> dict[str, Any]:
        began = time.monotonic()
        response = await client.post("/graphql", json={"query": query, "variables": variables})
        now = time.monotonic()
        self.timings.append((now, (now - began) * 1000))
        response.raise_for_status()
        answer: dict[str, Any] = response.json()
        if answer.get("errors"):
            raise RuntimeError(f"errors: {answer['errors']}")
        result: dict[str, Any] = next(iter(answer["data"].values()))
        return result

    async def _one(self, client: httpx.AsyncClient, number: int) -> None:
        try:
            started = await self._post(
                client, START, prompt=f"Please refund order {1042 + number % 2}", key=f"start-{uuid.uuid4().hex}"
            )
            call = started["run"]["toolCalls"][0]["toolCallId"]
            outcome = await self._post(
                client, APPROVE, runId=started["runId"], toolCallId=call, key=f"approve-{uuid.uuid4().hex}"
            )
            if outcome.get("status") != "COMPLETED":
                raise RuntimeError(f"approve did not complete the run: {outcome}")
            self.runs += 1
        except (httpx.HTTPError, RuntimeError, KeyError, TypeError):
            self.errors += 1

    async def run(self, until: float) -> None:
        """Start run ``n`` at ``n / rate`` seconds from now (a few at once when behind) until ``until``."""
        began = time.monotonic()
        pending: set[asyncio.Task[None]] = set()
        async with httpx.AsyncClient(base_url=self.url, timeout=120) as client:
            number = 0
            while (now := time.monotonic()) < until:
                due = began + number / self.rate
                if due > now:
                    await asyncio.sleep(due - now)
                    continue
                if len(pending) < 8:
                    task = asyncio.ensure_future(self._one(client, number))
                    pending.add(task)
                    task.add_done_callback(pending.discard)
                    number += 1
                else:
                    await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if pending:
                await asyncio.wait(pending)

    def p50(self, since: float, until: float) -> float:
        """Median milliseconds of the requests that finished in [since, until)."""
        window = [ms for at, ms in self.timings if since <= at < until]
        return statistics.median(window) if window else float("nan")


async def soak(
    url: str, size: Callable[[], dict[str, Any]], period: float, periods: int, rate: float
) -> list[dict[str, Any]]:
    """``periods`` periods of load on ``url``; one sample per period's end."""
    load = Load(url, rate)
    began = time.monotonic()
    worker = asyncio.ensure_future(load.run(began + period * periods))
    samples = []
    for number in range(1, periods + 1):
        end = began + period * number
        await asyncio.sleep(max(0.0, end - time.monotonic()))
        sample = await asyncio.to_thread(size)
        sample.update(
            period=number,
            p50Ms=load.p50(end - period / 4, end),
            runsFinished=load.runs,
            requests=len(load.timings),
            errors=load.errors,
        )
        samples.append(sample)
    await worker
    return samples


@contextmanager
def store_server(
    store: str, folder: Path, env: dict[str, str], stack: ExitStack, *, reindex: bool = False
) -> Iterator[tuple[str, Callable[[], dict[str, Any]]]]:
    """A ``bench.serve`` process on a fresh ``store``; yields its URL and its size sampler
    (``reindex``: on DocumentDB, which first runs ``reindex_documentdb``)."""
    if store == "sqlite":
        path = folder / "soak.db"
        variables: dict[str, Any] = {**env, "RUNSGATE_STORE": f"sqlite:///{path}"}
        with runsgate_server(folder / "sqlite.log", 300, **variables) as (url, _):
            yield url, lambda: sqlite_size(path)
        return
    from tests import _documentdb
    from tests._servers import with_database

    server = stack.enter_context(_documentdb.documentdb())
    uri = with_database(server.uri, "soak")
    variables = {**env, "MONGODB_URI": uri}

    def size() -> dict[str, Any]:
        if reindex:
            reindex_documentdb(server.postgres_port, "soak")
        return mongo_size(uri)

    with runsgate_server(folder / "documentdb.log", 300, **variables) as (url, _):
        yield url, size


def reindex_documentdb(postgres_port: int, database: str) -> None:
    """``scripts/documentdb-reindex.sh database`` on the PostgreSQL of ``postgres_port`` (the
    operator's procedure of docs/operations.md "Space on FerretDB 2.5 with DocumentDB").

    Raises:
        RuntimeError: The script failed (its output says why).
    """
    from tests import _documentdb

    env = {
        **os.environ,
        "PGHOST": "127.0.0.1",
        "PGPORT": str(postgres_port),
        "PGUSER": "postgres",
        "PGDATABASE": "postgres",
        "PSQL": str(_documentdb.POSTGRES_BIN / "psql"),
    }
    script = Path(__file__).resolve().parents[1] / "scripts" / "documentdb-reindex.sh"
    done = subprocess.run(["bash", str(script), database], env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"documentdb-reindex.sh failed ({done.returncode}): {done.stderr}")


def report(store: str, samples: list[dict[str, Any]], settings: dict[str, Any]) -> dict[str, Any]:
    """One store's figures: the samples, period 1's size and p50, later periods' ratios to them."""
    first = samples[0]
    ratios = [
        {"period": s["period"], "size": s["bytes"] / first["bytes"], "p50": s["p50Ms"] / first["p50Ms"]}
        for s in samples[1:]
    ]
    return {
        "store": store,
        **settings,
        "samples": samples,
        "period1": {"bytes": first["bytes"], "p50Ms": first["p50Ms"]},
        "ratios": ratios,
        "target": TARGET,
        "met": all(r["size"] <= TARGET and r["p50"] <= TARGET for r in ratios),
    }


def table(reports: list[dict[str, Any]]) -> str:
    """A Markdown table: one row per store and period."""
    lines = [
        "| store | period | size bytes | x period 1 | p50 ms | x period 1 | idempotency keys | events | runs done |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in reports:
        first = r["samples"][0]
        for s in r["samples"]:
            keys, events = s["counts"].get("idempotency_keys", 0), s["counts"].get("run_events", 0)
            lines.append(
                f"| {r['store']} | {s['period']} | {s['bytes']:,} | {s['bytes'] / first['bytes']:.2f} | "
                f"{s['p50Ms']:.1f} | {s['p50Ms'] / first['p50Ms']:.2f} | {keys} | {events} | {s['runsFinished']} |"
            )
    return "\n".join(lines)


def run(
    stores: list[str],
    period: float,
    periods: int,
    rate: float,
    sweep_interval: float | None = None,
    *,
    reindex: bool = False,
) -> list[dict[str, Any]]:
    """Every store's report (``report``), one store after the other."""
    sweep = sweep_interval if sweep_interval is not None else min(1.0, period / 10)
    env = settings_for(period, sweep)
    settings = {"periodSeconds": period, "periods": periods, "rate": rate, "sweepInterval": sweep, "reindex": reindex}
    reports = []
    for store in stores:
        with (
            tempfile.TemporaryDirectory(prefix="bench-soak-") as tmp,
            ExitStack() as stack,
            store_server(store, Path(tmp), env, stack, reindex=reindex) as (url, size),
        ):
            samples = asyncio.run(soak(url, size, period, periods, rate))
        reports.append(report(store, samples, settings))
    return reports


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retention_soak", description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=STORES, action="append", help="sqlite or documentdb (default both)")
    parser.add_argument("--period", type=float, default=120.0, help="every retention setting, seconds")
    parser.add_argument("--periods", type=int, default=3)
    parser.add_argument("--rate", type=float, default=4.0, help="runs started and approved per second")
    parser.add_argument("--sweep-interval", type=float, default=None, help="default: min(1, period / 10)")
    parser.add_argument(
        "--reindex",
        action="store_true",
        help="DocumentDB: run scripts/documentdb-reindex.sh at each period's end, before its sample",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the reports here")
    args = parser.parse_args(argv)
    if args.periods < 2:
        parser.error("--periods must be at least 2 (later periods are compared with the first)")
    load = os.getloadavg()
    reports = run(
        args.store or list(STORES), args.period, args.periods, args.rate, args.sweep_interval, reindex=args.reindex
    )
    print(table(reports))
    for r in reports:
        verdict = "met" if r["met"] else "not met"
        print(f"{r['store']}: later periods <= {TARGET}x period 1 in size and p50: {verdict}")
    print(f"load average before {load[0]:.2f}, after {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
