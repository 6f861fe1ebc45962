"""The reviewers' queue at 10k and 1M waiting runs (issue 45 section 1; docs/benchmarks.md
"The reviewers' queue"): ``./dev run python -m bench.review_queue [sizes...]`` (default 10000).

On the memory store and on a SQLite file, ``runsgate seed``'s runs (refund and weather agents,
100 threads, 10 resources) are stored, half of them with a deadline on each pending call spread
over a week, then ``RunManager.review_queue`` is read as ``reviewQueue`` reads it, for an
unrestricted principal holding every scope:

- ``first page``: the first 20 questions, median of 50;
- ``deep page``: the 20 after the cursor of the 2,000th question (a keyset walk), median of 50;
- ``agent filter``: the first 20 of ``weather-agent`` (half the runs), median of 50;
- ``one resource``: the first 20 for a principal limited to ``customer-3`` (a tenth), median of 50;
- ``totalCount``: the count, which reads every matching run, median of 3 (skipped above 100k).

SQLite also prints the plan of a page's queries (``runs_review_queue``).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic_ai import models

from runtime import AgentRegistry, Principal, RunManager
from runtime.access import ALL_SCOPES
from runtime.demo import AGENTS
from runtime.reviewing.queue import QueueQuery
from runtime.seed import SEEDABLE_AGENTS, SeedPlan, _Cloner, make_templates
from storage import MemorySnapshotStore, QueueFilter, SnapshotStore, SQLiteSnapshotStore, earliest_deadline, utcnow

PAGE = 20
EVERYONE = Principal(name="bench", scopes=ALL_SCOPES)
ONE_RESOURCE = Principal(name="bench-3", scopes=ALL_SCOPES, resources=frozenset({"customer-3"}))


async def _median_ms(action: Callable[[], Awaitable[Any]], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        begin = time.perf_counter()
        await action()
        times.append((time.perf_counter() - begin) * 1000)
    return statistics.median(times)


async def _seed(store: SnapshotStore, runs: int) -> None:
    plan = SeedPlan(runs=runs, agents=len(SEEDABLE_AGENTS), threads=100, resources=10, seed=45)
    cloner = _Cloner(plan, await make_templates(SEEDABLE_AGENTS), utcnow())
    rng = random.Random(45)
    written = 0
    while written < runs:
        batch = [cloner.clone(written + i) for i in range(min(5000, runs - written))]
        for doc, _ in batch:
            if rng.random() < 0.5:
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


async def _measure(name: str, store: SnapshotStore, runs: int) -> None:
    began = time.perf_counter()
    await _seed(store, runs)
    seeded = time.perf_counter() - began
    queue = RunManager(store, AgentRegistry(AGENTS), instance_id="bench").review_queue
    everything = QueueQuery()
    items, _, position = await queue.page(EVERYONE, everything, first=2000)
    assert len(items) == 2000
    assert position is not None

    async def first() -> None:
        await queue.page(EVERYONE, everything, first=PAGE)

    async def deep() -> None:
        await queue.page(EVERYONE, everything, first=PAGE, after=position)

    weather = QueueQuery(agent_ids=frozenset({"weather-agent"}))

    async def agent() -> None:
        await queue.page(EVERYONE, weather, first=PAGE)

    async def resource() -> None:
        await queue.page(ONE_RESOURCE, everything, first=PAGE)

    figures = {
        "first page": await _median_ms(first, 50),
        "deep page": await _median_ms(deep, 50),
        "agent filter": await _median_ms(agent, 50),
        "one resource": await _median_ms(resource, 50),
    }
    if runs <= 100_000:
        figures["totalCount"] = await _median_ms(lambda: queue.count(EVERYONE, everything), 3)
    shown = ", ".join(f"{key} {value:.2f} ms" for key, value in figures.items())
    print(f"{name:7} {runs:>9,} runs (seeded in {seeded:.0f} s): {shown}", flush=True)
    if isinstance(store, SQLiteSnapshotStore):
        for plan in await store.explain_review_queue(QueueFilter(), PAGE):
            print("         plan:", " / ".join(plan))


async def main(sizes: list[int]) -> None:
    models.ALLOW_MODEL_REQUESTS = False
    for runs in sizes:
        await _measure("memory", MemorySnapshotStore(), runs)
        with tempfile.TemporaryDirectory() as scratch:
            store = SQLiteSnapshotStore(Path(scratch) / "queue.db")
            await store.open()
            try:
                await _measure("sqlite", store, runs)
            finally:
                await store.close()


if __name__ == "__main__":
    asyncio.run(main([int(arg) for arg in sys.argv[1:]] or [10_000]))
