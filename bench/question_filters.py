"""The reviewers' queue's question filters (tools, review claims, escalation; issue 44):
``./dev run python -m bench.question_filters [options]``.

On the memory store and a SQLite file at each ``--sizes`` (default 10,000 and 100,000), the runs
of ``bench.review_queue`` (``runsgate seed``'s refund and weather agents, half with deadlines), of
which one in ``CLAIMED_EVERY`` holds a live review claim by ``REVIEWER`` on its first pending call,
one in ``LAPSED_EVERY`` a lapsed claim by another principal, and one in ``ESCALATED_EVERY`` an
escalated pending call. Per filter (none, ``toolNames: [issue_refund]``, ``unclaimed: true``,
``claimedByMe: true``, ``escalated: true``, ``escalated: false``), ``RunManager.review_queue`` is
read as ``reviewQueue`` reads it, in process, for ``REVIEWER`` (every scope): ``page``, the first
20 questions, and ``total``, its ``totalCount``. Each figure is the median of ``--repeat`` reads
(fewer, at least 3, past ``bench.review_queue.BUDGET`` seconds), printed with the total and the
1-minute load average after it. SQLite files are kept in ``--files`` by size (more than 10,000
runs are copies in SQL of 10,000 seeded ones, as ``bench.review_queue`` builds them).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from datetime import timedelta
from pathlib import Path

from pydantic_ai import models

from runtime import AgentRegistry, Principal, RunManager
from runtime.access import ALL_SCOPES
from runtime.demo import AGENTS
from runtime.reviewing.queue import QueueQuery
from runtime.seed import SEEDABLE_AGENTS, SeedPlan, _Cloner, make_templates
from storage import (
    MemorySnapshotStore,
    SnapshotDocument,
    SnapshotStore,
    SQLiteSnapshotStore,
    earliest_deadline,
    utcnow,
)

from .review_queue import PAGE, TEMPLATE_RUNS, _copy_rows, _fresh, _median_ms, load

REVIEWER = Principal(name="bench-reviewer", scopes=ALL_SCOPES)
CLAIMED_EVERY = 100
LAPSED_EVERY = 300
ESCALATED_EVERY = 50
FILTERS: dict[str, QueueQuery] = {
    "none": QueueQuery(),
    "toolNames": QueueQuery(tool_names=frozenset({"issue_refund"})),
    "unclaimed": QueueQuery(unclaimed=True),
    "claimedByMe": QueueQuery(claimed_by_me=True),
    "escalated": QueueQuery(escalated=True),
    "not escalated": QueueQuery(escalated=False),
}


def mark(doc: SnapshotDocument, number: int) -> None:
    """Give run ``number`` its claim, lapsed claim or escalation (module docstring)."""
    pending = [call for call in doc["toolCalls"] if call["decision"] is None]
    if not pending:
        return
    now = utcnow()
    if number % CLAIMED_EVERY == 0:
        pending[0]["reviewClaim"] = {"by": REVIEWER.identity, "at": now, "until": now + timedelta(days=30)}
    elif number % LAPSED_EVERY == 1:
        pending[0]["reviewClaim"] = {"by": "someone", "at": now, "until": now - timedelta(minutes=1)}
    if number % ESCALATED_EVERY == 3:
        pending[-1]["escalated"] = True


async def _seeded(store: SnapshotStore, runs: int) -> None:
    """``bench.review_queue``'s runs, each marked (``mark``) before it is stored."""
    plan = SeedPlan(runs=runs, agents=len(SEEDABLE_AGENTS), threads=100, resources=10, seed=45)
    cloner = _Cloner(plan, await make_templates(SEEDABLE_AGENTS), utcnow())
    rng = random.Random(45)
    written = 0
    while written < runs:
        batch = [cloner.clone(written + i) for i in range(min(5000, runs - written))]
        for number, (doc, _) in enumerate(batch, start=written):
            if rng.random() < 0.5:
                for call in doc["toolCalls"]:
                    call["expiresAt"] = doc["suspendedAt"] + timedelta(minutes=rng.randrange(10, 7 * 24 * 60))
                deadline = earliest_deadline(doc["toolCalls"])
                if deadline is not None:
                    doc["expiresAt"] = deadline
            mark(doc, number)
        if isinstance(store, MemorySnapshotStore):
            store.adopt_many(batch)
        else:
            await store.insert_many(batch)
        written += len(batch)


async def sqlite_store(folder: Path, runs: int) -> SQLiteSnapshotStore:
    """The open store of ``folder/qfilter-N.db``, built first when missing."""
    path = folder / f"qfilter-{runs}.db"
    if _fresh(path):
        partial = path.with_suffix(".partial")
        store = SQLiteSnapshotStore(partial)
        await store.open()
        try:
            await _seeded(store, min(runs, TEMPLATE_RUNS))
        finally:
            await store.close()
        if runs > TEMPLATE_RUNS:
            _copy_rows(partial, runs)
        partial.rename(path)
    store = SQLiteSnapshotStore(path)
    await store.open()
    return store


async def measure(name: str, store: SnapshotStore, runs: int, repeat: int) -> None:
    """Per filter (``FILTERS``), the median page and total of ``store`` (holding ``runs`` runs), printed."""
    queue = RunManager(store, AgentRegistry(AGENTS), instance_id="bench").review_queue
    for label, query in FILTERS.items():
        total = await queue.count(REVIEWER, query)

        async def page_of(query: QueueQuery = query) -> object:
            return await queue.page(REVIEWER, query, first=PAGE)

        async def total_of(query: QueueQuery = query) -> int:
            return await queue.count(REVIEWER, query)

        page = await _median_ms(page_of, repeat)
        print(f"  {name:7} {runs:>9,} {label:14} page  {page:9.2f} ms  (load {load()})", flush=True)
        count = await _median_ms(total_of, repeat)
        print(f"  {name:7} {runs:>9,} {label:14} total {count:9.2f} ms  = {total:,}  (load {load()})", flush=True)


async def run(args: argparse.Namespace) -> None:
    """Every size of ``args.sizes``: the memory store (unless ``--sqlite-only``), then the SQLite file."""
    models.ALLOW_MODEL_REQUESTS = False
    args.files.mkdir(parents=True, exist_ok=True)
    for runs in [int(n) for n in args.sizes.split(",") if n.strip()]:
        if not args.sqlite_only:
            began = time.perf_counter()
            memory = MemorySnapshotStore()
            await _seeded(memory, runs)
            print(f"  memory {runs:,}: seeded in {time.perf_counter() - began:.0f} s", flush=True)
            await measure("memory", memory, runs, args.repeat)
            del memory
        store = await sqlite_store(args.files, runs)
        try:
            await measure("sqlite", store, runs, args.repeat)
        finally:
            await store.close()


def main(argv: list[str]) -> int:
    """The command line (module docstring); 0."""
    parser = argparse.ArgumentParser(prog="python -m bench.question_filters", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="memory and SQLite sizes")
    parser.add_argument("--files", type=Path, default=Path("/tmp/runsgate-bench-qfilter"), help="built SQLite files")
    parser.add_argument("--repeat", type=int, default=10, help="reads per scenario (the median is shown)")
    parser.add_argument("--sqlite-only", action="store_true", help="skip the memory store")
    args = parser.parse_args(argv)
    print(f"load average at start: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}", flush=True)
    asyncio.run(run(args))
    print(f"load average at end: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
