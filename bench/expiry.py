"""The sweeper's expiry pass at 10k waiting calls with deadlines.

``./dev run python -m bench.expiry [pending] [expired]``.

On the memory store and on a SQLite file, ``expired`` refund runs (default 50) are started with
a clock a day behind, so their 1 h deadline (``expiresAfter``) has passed; ``pending`` (default
10,000) more runs, each with one call whose deadline lies ahead, are added in bulk. Then:

- ``find_expired``: the expiry pass's read (``list_expired_runs``), median of 200, and how many
  runs it returned: only the expired ones, never the waiting ones (SQLite: its query plan, one
  search of the ``runs_expiring`` index);
- ``scan``: for comparison, reading every waiting run and keeping the expired ones (what the
  pass would cost without the index), median of 5;
- ``sweep``: one whole ``StalledRunSweeper.sweep_once``: the expired runs' fallback recorded
  (decline, ``decidedBy: "expiry"``, ``expired`` + ``decision`` events) and each run continued
  to completion, then one more read showing nothing is left.
"""

from __future__ import annotations

import asyncio
import copy
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic_ai import models

from runtime import AgentRegistry, RunManager, StalledRunSweeper, ToolApprovalRule
from runtime.demo import AGENTS
from storage import MemorySnapshotStore, RunFilter, SnapshotStore, SQLiteSnapshotStore, utcnow

AGENT = "refund-agent"
RULES = [ToolApprovalRule(tool="issue_refund", expires_after=3600)]


async def _median_ms(action: Callable[[], Awaitable[Any]], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        begin = time.perf_counter()
        await action()
        times.append((time.perf_counter() - begin) * 1000)
    return statistics.median(times)


async def _fill(store: SnapshotStore, pending: int, expired: int) -> RunManager:
    now = utcnow()
    registry = AgentRegistry(AGENTS)
    old = RunManager(store, registry, instance_id="bench", tool_rules=RULES, clock=lambda: now - timedelta(days=1))
    current = RunManager(store, registry, instance_id="bench", tool_rules=RULES, clock=lambda: now)
    for _ in range(expired):
        await old.start_run(AGENT, "Please refund order 1042")
    template = (await current.start_run(AGENT, "Please refund order 1043")).run
    assert template is not None
    await store.insert_many([(_waiting(template, now, i), b"[]") for i in range(pending - 1)])
    return current


def _waiting(template: Any, now: Any, i: int) -> Any:
    """A copy of ``template`` under a new id, its call due ``i`` seconds after an hour from now."""
    doc = copy.deepcopy(template)
    doc["_id"] = uuid.uuid4().hex
    doc["historyId"] = uuid.uuid4().hex
    doc["createdAt"] = doc["suspendedAt"] = doc["updatedAt"] = now
    doc["toolCalls"][0]["expiresAt"] = now + timedelta(hours=1, seconds=i)
    doc.pop("expiresAt", None)
    return doc


async def measure(store: SnapshotStore, pending: int, expired: int) -> dict[str, Any]:
    manager = await _fill(store, pending, expired)
    sweeper = StalledRunSweeper(manager, interval=1, batch=expired, max_active=expired)
    found = await sweeper.find_expired()
    read_ms = await _median_ms(sweeper.find_expired, 200)

    async def scan() -> list[Any]:
        docs = await store.list_runs(AGENT, RunFilter())
        return [d for d in docs if d.get("expiresAt") is not None and d["expiresAt"] <= manager.now()]

    scanned = len(await store.list_runs(AGENT, RunFilter()))
    scan_ms = await _median_ms(scan, 5)
    begin = time.perf_counter()
    outcomes = await sweeper.sweep_once()
    sweep_ms = (time.perf_counter() - begin) * 1000
    result: dict[str, Any] = {
        "waiting": await store.count_runs(AGENT, RunFilter()),
        "returned": len(found),
        "read_ms": read_ms,
        "scanned": scanned,
        "scan_ms": scan_ms,
        "sweep_ms": sweep_ms,
        "completed": sum(1 for o in outcomes if o.status == "completed"),
        "left": len(await sweeper.find_expired()),
    }
    if isinstance(store, SQLiteSnapshotStore):
        result["plan"] = await store.explain_expired_runs(now=manager.now(), limit=expired)
    return result


async def main(pending: int = 10_000, expired: int = 50) -> None:
    models.ALLOW_MODEL_REQUESTS = False
    print(f"{pending} waiting calls with deadlines ahead, {expired} past their deadline\n")
    print(
        "| store | runs stored | find_expired returned | find_expired ms | scan read | scan ms | sweep ms | completed |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    plans = []
    with tempfile.TemporaryDirectory() as tmp:
        stores: list[tuple[str, SnapshotStore]] = [
            ("memory", MemorySnapshotStore()),
            ("sqlite", SQLiteSnapshotStore(Path(tmp) / "expiry.db")),
        ]
        for name, store in stores:
            await store.open()
            try:
                r = await measure(store, pending, expired)
            finally:
                await store.close()
            print(
                f"| {name} | {r['waiting'] + r['completed']} | {r['returned']} | {r['read_ms']:.2f} | {r['scanned']} "
                f"| {r['scan_ms']:.1f} | {r['sweep_ms']:.0f} | {r['completed']} (left: {r['left']}) |"
            )
            if "plan" in r:
                plans.append(r["plan"])
    for plan in plans:
        print("\nSQLite plan of the expiry read:", "; ".join(plan))


if __name__ == "__main__":
    asyncio.run(main(*(int(arg) for arg in sys.argv[1:3])))
