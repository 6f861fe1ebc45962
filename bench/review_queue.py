"""The reviewers' queue at 10k and 1M waiting runs, its page with ``totalCount`` (issue 45 section 1;
docs/benchmarks.md "The reviewers' queue"): ``./dev run python -m bench.review_queue [options]``.

On the memory store and a SQLite file at each ``--sizes`` (default 10,000 and 1,000,000), and on
FerretDB 2.5 with DocumentDB at each ``--documentdb`` size (default 10,000; ``FERRETDB2_BIN`` or
``./dev documentdb``, as ``bench.listing_totals``), ``runsgate seed``'s runs (refund and weather
agents, 100 threads, 10 resources), half with a deadline on each pending call (``--deadlines``
FRACTION: that share, e.g. 0 for a queue without deadlines, whose first pages on MongoDB read two
parts before ``queueAt``; SQLite files are kept by size, so give another ``--files`` folder), are
stored; then
``RunManager.review_queue`` is read as ``reviewQueue`` reads it, in process, for an unrestricted
principal holding every scope. Each scenario is the median of ``--repeat`` reads:

- ``page``: the first 20 questions, no total;
- ``page+total``: the first 20 and ``totalCount``; ``agent page+total``: of ``weather-agent`` (half
  the runs); ``thread page+total``: of ``thread-7`` (1/100); ``resource page+total``: for a
  principal limited to ``customer-3`` (1/10);
- ``barred page+total``: the first 20 and ``totalCount`` for a reviewer under a two-approver rule
  (refunds over $500, as the demo's), who gave the first of two approvals on one question in every
  1,000 runs: the gate refuses it those (``refusal_candidates``);
- ``graphql page``, ``graphql page+total``: the first page of 20 (``runId`` of each item), then
  the same with ``totalCount``, as the ``reviewQueue`` resolver reads them (``schema.execute`` in
  process, no HTTP), so a change in how the resolver orders its reads shows;
- ``store due count``: the store's count of the questions due within a day (``expiresBefore``,
  O(matches) by design); ``due total``: ``totalCount`` of that filter, which reads each matching
  run and checks its questions (up to 10,000 runs only);
- ``store total``, ``store page``: the store's own reads of the queue (``count_review_questions``
  without dates, ``list_review_runs`` of 20), beside ``store listing total`` and ``store listing
  page`` (``count_runs``, ``list_runs`` of 20 of ``refund-agent``, what ``suspendedRuns`` reads).

Each figure is printed with the 1-minute load average read after it. A SQLite file of more than
10,000 runs is built from 10,000 seeded ones copied in SQL (``INSERT ... SELECT`` with new run ids,
the copies sharing their template's history, which no queue read touches), so a million rows take
minutes, not the hour ``runsgate seed`` takes; ``--files`` keeps them for the next run.
``--before DIR`` runs the same scenarios with the code of checkout DIR (e.g. ``git archive`` of the
commit before a change) first, on the same SQLite files.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic_ai import models

from runtime import AgentRegistry, Principal, RunManager, ToolApprovalRule
from runtime.access import ALL_SCOPES
from runtime.demo import AGENTS
from runtime.reviewing.queue import QueueQuery, ReviewQueue
from runtime.seed import SEEDABLE_AGENTS, SeedPlan, _Cloner, make_templates
from storage import (
    MemorySnapshotStore,
    MongoSnapshotStore,
    QueueFilter,
    RunFilter,
    SnapshotStore,
    SQLiteSnapshotStore,
    earliest_deadline,
    utcnow,
)
from storage.protocol import RunPage

PAGE = 20
TEMPLATE_RUNS = 10_000
"""Runs a large SQLite file is copied from."""
EVERYONE = Principal(name="bench", scopes=ALL_SCOPES)
ONE_RESOURCE = Principal(name="bench-3", scopes=ALL_SCOPES, resources=frozenset({"customer-3"}))
REVIEWER = Principal(name="bench-reviewer", scopes=ALL_SCOPES)
"""Gave one approval of two in every ``APPROVED_EVERY`` runs (``_seed``)."""
APPROVED_EVERY = 1000
TWO_APPROVERS = ToolApprovalRule(tool="issue_refund", argument="amount", above=500, approvals=2)


def load() -> str:
    """The 1-minute load average."""
    return Path("/proc/loadavg").read_text().split()[0]


BUDGET = 10.0
"""Seconds a scenario reads for at most, once it has read 3 times (an O(matches) total at 1M)."""


async def _median_ms(action: Callable[[], Awaitable[Any]], repeat: int) -> float:
    """The median of up to ``repeat`` timed calls, fewer (at least 3) once ``BUDGET`` is spent."""
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < repeat and (len(times) < 3 or time.perf_counter() - started < BUDGET):
        begin = time.perf_counter()
        await action()
        times.append((time.perf_counter() - begin) * 1000)
    return statistics.median(times)


async def _seed(store: SnapshotStore, runs: int, deadlines: float = 0.5) -> None:
    """``runs`` of ``runsgate seed``'s runs, a share ``deadlines`` of them with deadlines, inserted
    5,000 at a time."""
    plan = SeedPlan(runs=runs, agents=len(SEEDABLE_AGENTS), threads=100, resources=10, seed=45)
    cloner = _Cloner(plan, await make_templates(SEEDABLE_AGENTS), utcnow())
    rng = random.Random(45)
    written = 0
    while written < runs:
        batch = [cloner.clone(written + i) for i in range(min(5000, runs - written))]
        for number, (doc, _) in enumerate(batch, start=written):
            approval = next((call for call in doc["toolCalls"] if call["requiresApproval"]), None)
            if number % APPROVED_EVERY == 0 and approval is not None:
                approval["approvalsRequired"] = 2
                approval["approvals"] = [{"decidedBy": REVIEWER.identity, "decidedAt": doc["suspendedAt"]}]
            if rng.random() < deadlines:
                for call in doc["toolCalls"]:
                    call["expiresAt"] = doc["suspendedAt"] + timedelta(minutes=rng.randrange(10, 7 * 24 * 60))
                deadline = earliest_deadline(doc["toolCalls"])
                if deadline is not None:
                    doc["expiresAt"] = deadline
        if isinstance(store, MemorySnapshotStore):
            store.adopt_many(batch)
        else:
            await store.insert_many(batch)
        written += len(batch)


def _copy_rows(path: Path, runs: int) -> None:
    """Grow the file's ``TEMPLATE_RUNS`` runs to ``runs`` by copies in SQL, one transaction."""
    db = sqlite3.connect(path)
    try:
        with db:
            columns = [row[1] for row in db.execute("PRAGMA table_info(run_snapshots)")]
            copied = ", ".join("run_id || '.' || ?" if name == "run_id" else name for name in columns)
            for copy in range(1, runs // TEMPLATE_RUNS):
                db.execute(
                    f"INSERT INTO run_snapshots ({', '.join(columns)}) SELECT {copied} FROM run_snapshots "
                    "WHERE instr(run_id, '.') = 0",
                    (str(copy),),
                )
    finally:
        db.close()


def _fresh(path: Path) -> bool:
    """Whether ``path`` is still to be built; if so, removes what a build cut short left."""
    if path.exists():
        return False
    for stale in path.parent.glob(path.with_suffix(".partial").name + "*"):
        stale.unlink()
    return True


async def sqlite_store(folder: Path, runs: int, deadlines: float = 0.5) -> tuple[SQLiteSnapshotStore, float]:
    """The open store of ``folder/queue-N.db``, built first when missing; seconds the build took."""
    path = folder / f"queue-{runs}.db"
    began = time.perf_counter()
    if _fresh(path):
        partial = path.with_suffix(".partial")
        store = SQLiteSnapshotStore(partial)
        await store.open()
        try:
            await _seed(store, min(runs, TEMPLATE_RUNS), deadlines)
        finally:
            await store.close()
        if runs > TEMPLATE_RUNS:
            _copy_rows(partial, runs)
        partial.rename(path)
    built = time.perf_counter() - began
    store = SQLiteSnapshotStore(path)
    began = time.perf_counter()
    await store.open()  # an older file gets its backfills here
    print(f"  sqlite {runs:,}: open {time.perf_counter() - began:.2f} s (load {load()})", flush=True)
    return store, built


GRAPHQL_PAGE = "query { reviewQueue(first: %d) { %s nodes { runId } } }"


async def _graphql(
    store: SnapshotStore,
    manager: RunManager,
    runs: int,
    repeat: int,
    figures: dict[str, float],
    totals: dict[str, int],
    name: str,
) -> None:
    """The ``graphql page`` and ``graphql page+total`` scenarios (module docstring)."""
    from resolvers import Context, schema

    context = Context(store=store, runs=manager, agents=AgentRegistry(AGENTS), principal=EVERYONE)
    for scenario, selection in (("graphql page", ""), ("graphql page+total", "totalCount")):

        async def read(document: str = GRAPHQL_PAGE % (PAGE, selection), scenario: str = scenario) -> None:
            result = await schema.execute(document, context_value=context)
            assert result.errors is None, result.errors
            assert result.data is not None
            assert result.data["reviewQueue"]["nodes"], scenario
            if "totalCount" in result.data["reviewQueue"]:
                totals[scenario] = result.data["reviewQueue"]["totalCount"]

        await read()  # warm-up
        figures[scenario] = await _median_ms(read, repeat)
        print(f"  {name:10} {runs:>9,} {scenario:20} {figures[scenario]:9.2f} ms  (load {load()})", flush=True)


async def measure(name: str, store: SnapshotStore, runs: int, repeat: int) -> dict[str, float]:
    """Every scenario on ``store`` (already holding ``runs`` runs); prints and returns the medians."""
    queue_manager = RunManager(store, AgentRegistry(AGENTS), instance_id="bench")
    queue = queue_manager.review_queue
    barred = RunManager(store, AgentRegistry(AGENTS), instance_id="bench", tool_rules=[TWO_APPROVERS]).review_queue
    everything = QueueQuery()
    scenarios: dict[str, tuple[Principal, QueueQuery, bool, ReviewQueue]] = {
        "page": (EVERYONE, everything, False, queue),
        "page+total": (EVERYONE, everything, True, queue),
        "agent page+total": (EVERYONE, QueueQuery(agent_ids=frozenset({"weather-agent"})), True, queue),
        "thread page+total": (EVERYONE, QueueQuery(thread_id="thread-7"), True, queue),
        "resource page+total": (ONE_RESOURCE, everything, True, queue),
        "barred page+total": (REVIEWER, everything, True, barred),
    }
    figures: dict[str, float] = {}
    totals: dict[str, int] = {}
    await _graphql(store, queue_manager, runs, repeat, figures, totals, name)
    for scenario, (principal, query, with_total, read_queue) in scenarios.items():

        async def read(
            principal: Principal = principal,
            query: QueueQuery = query,
            with_total: bool = with_total,
            scenario: str = scenario,
            read_queue: ReviewQueue = read_queue,
        ) -> None:
            items, _, _ = await read_queue.page(principal, query, first=PAGE)
            assert items, scenario
            if with_total:
                totals[scenario] = await read_queue.count(principal, query)

        await read()  # warm-up
        figures[scenario] = await _median_ms(read, repeat)
        print(f"  {name:10} {runs:>9,} {scenario:20} {figures[scenario]:9.2f} ms  (load {load()})", flush=True)
    bound = utcnow() + timedelta(days=1)
    due = QueueFilter(expires_before=bound)
    totals["store due count"] = await store.count_review_questions(due)
    figures["store due count"] = await _median_ms(lambda: store.count_review_questions(due), repeat)
    if runs <= TEMPLATE_RUNS:  # the API's: every matching run read, each question checked
        figures["due total"] = await _median_ms(lambda: queue.count(EVERYONE, QueueQuery(expires_before=bound)), 3)
        totals["due total"] = await queue.count(EVERYONE, QueueQuery(expires_before=bound))
    for scenario in ("store due count", "due total")[: 2 if runs <= TEMPLATE_RUNS else 1]:
        print(f"  {name:10} {runs:>9,} {scenario:20} {figures[scenario]:9.2f} ms  (load {load()})", flush=True)
    store_reads: dict[str, Callable[[], Awaitable[Any]]] = {
        "store total": lambda: store.count_review_questions(QueueFilter()),
        "store page": lambda: store.list_review_runs(QueueFilter(), limit=PAGE),
        "store listing total": lambda: store.count_runs("refund-agent", RunFilter()),
        "store listing page": lambda: store.list_runs("refund-agent", RunFilter(), RunPage(limit=PAGE)),
    }
    for scenario, store_read in store_reads.items():
        figures[scenario] = await _median_ms(store_read, repeat)
        print(f"  {name:10} {runs:>9,} {scenario:20} {figures[scenario]:9.2f} ms  (load {load()})", flush=True)
    print(f"  {name:10} {runs:>9,} totals {totals}", flush=True)
    if isinstance(store, SQLiteSnapshotStore) and hasattr(store, "explain_review_count"):
        print("  count plan:", " / ".join(await store.explain_review_count(QueueFilter())), flush=True)
    return figures


async def run(args: argparse.Namespace) -> None:
    models.ALLOW_MODEL_REQUESTS = False
    sizes = [int(n) for n in args.sizes.split(",") if n.strip()]
    args.files.mkdir(parents=True, exist_ok=True)
    for runs in sizes:
        began = time.perf_counter()
        memory = MemorySnapshotStore()
        await _seed(memory, runs, args.deadlines)
        print(f"  memory {runs:,}: seeded in {time.perf_counter() - began:.0f} s", flush=True)
        await measure("memory", memory, runs, args.repeat)
        del memory
        store, built = await sqlite_store(args.files, runs, args.deadlines)
        print(f"  sqlite {runs:,}: built in {built:.0f} s", flush=True)
        try:
            await measure("sqlite", store, runs, args.repeat)
        finally:
            await store.close()
    if args.documentdb_uri:
        from tests._servers import with_database

        for runs in [int(n) for n in args.documentdb.split(",") if n.strip()]:
            mongo = MongoSnapshotStore(with_database(args.documentdb_uri, f"bench_queue_{args.label}_{runs}"))
            await mongo.open()
            try:
                await mongo.drop_all()
                await mongo.open()  # its indexes again, as `runsgate seed --reset` does
                began = time.perf_counter()
                await _seed(mongo, runs, args.deadlines)
                print(f"  documentdb {runs:,}: seeded in {time.perf_counter() - began:.0f} s", flush=True)
                if args.settle > 0:
                    print(f"  documentdb {runs:,}: settling {args.settle:.0f} s", flush=True)
                    await asyncio.sleep(args.settle)
                await measure("documentdb", mongo, runs, args.repeat)
            finally:
                await mongo.drop_all()
                await mongo.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.review_queue", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,1000000", help="memory and SQLite sizes")
    parser.add_argument("--documentdb", default="10000", help="DocumentDB sizes ('' to skip)")
    parser.add_argument("--documentdb-uri", default="", help="a running FerretDB 2.5 (else one is started)")
    parser.add_argument("--files", type=Path, default=Path("/tmp/runsgate-bench-queue"), help="built SQLite files")
    parser.add_argument("--before", type=Path, help="a checkout of the code before the change, measured first")
    parser.add_argument("--repeat", type=int, default=20, help="reads per scenario (the median is shown)")
    parser.add_argument("--label", default="after", help=argparse.SUPPRESS)
    parser.add_argument("--deadlines", type=float, default=0.5, help="share of runs with deadlines")
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="seconds to wait after seeding DocumentDB before reading (its table statistics are young at first)",
    )
    args = parser.parse_args(argv)
    print(f"load average at start: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}", flush=True)
    with contextlib.ExitStack() as stack:
        if args.documentdb.strip() and not args.documentdb_uri:
            from tests._servers import documentdb

            args.documentdb_uri = stack.enter_context(documentdb())
        if args.before is not None:
            print(f"== before ({args.before})", flush=True)
            command = [sys.executable, "-c", _AS_BEFORE, str(Path(__file__).resolve()), *argv]
            env = {**os.environ, "PYTHONPATH": str(args.before.resolve())}
            given = ["--documentdb-uri", args.documentdb_uri, "--label", "before"]
            subprocess.run([*command, *given], cwd=args.before, env=env, check=True)
            print("== after", flush=True)
        asyncio.run(run(args))
    print(f"load average at end: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}", flush=True)
    return 0


_AS_BEFORE = """
import runpy, sys
path, *argv = sys.argv[1:]
argv = [a for i, a in enumerate(argv) if a != "--before" and (i == 0 or argv[i - 1] != "--before")]
sys.argv = [path, *argv]
runpy.run_path(path, run_name="__main__")
"""
"""Runs this file with the code on ``PYTHONPATH`` (the older checkout) and without ``--before``."""


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
