"""The SQLite writer's hand-offs, counted (no timing): a write is handed to the writer's thread
once and back once, for two iterations of the caller's event loop, and writes that share a
transaction share the hand-off back."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from storage import SQLiteSnapshotStore
from storage.protocol import DecisionWrite

from ._contract import T0, decision, snapshot

AGENT = "refund-agent"


def _counting(loop: asyncio.AbstractEventLoop, counts: list[Counter[str]], on: list[bool]) -> None:
    """Count into ``counts[-1]``, while ``on[0]``: the loop's iterations and each
    ``call_soon_threadsafe`` by the thread that made it."""
    run_once = loop._run_once  # type: ignore[attr-defined]
    wake = loop.call_soon_threadsafe

    def counted_run_once() -> None:
        if on[0]:
            counts[-1]["iterations"] += 1
        run_once()

    def counted_wake(*args: Any, **kwargs: Any) -> Any:
        if on[0]:
            counts[-1][f"woken by {threading.current_thread().name}"] += 1
        return wake(*args, **kwargs)

    loop._run_once = counted_run_once  # type: ignore[attr-defined]
    loop.call_soon_threadsafe = counted_wake  # type: ignore[method-assign,assignment]


async def _count(path: Path) -> tuple[Counter[str], Counter[str]]:
    """The counts of 10 inserts one after another, and of 12 decisions recorded at once."""
    store = SQLiteSnapshotStore(path)
    await store.open()
    counts: list[Counter[str]] = [Counter()]
    on = [False]
    writer = store._writer
    assert writer is not None

    def statement(sql: str) -> None:
        if on[0] and sql.strip().upper() == "COMMIT":
            counts[-1]["commits"] += 1

    await writer.call(lambda db: db.set_trace_callback(statement))
    _counting(asyncio.get_running_loop(), counts, on)
    try:
        on[0] = True
        for i in range(10):
            await store.insert(snapshot(f"run-{i}"), b"[]")
        on[0] = False
        counts.append(Counter())
        on[0] = True
        decided = await asyncio.gather(
            *(
                store.record_decision(
                    DecisionWrite(
                        agent_id=AGENT, run_id=f"run-{i}", index=0, tool_call_id="c1", decision=decision(), now=T0
                    )
                )
                for i in range(10)
            )
        )
        on[0] = False
        assert all(doc is not None for doc in decided)
        return counts[0], counts[1]
    finally:
        await store.close()


def test_a_write_is_one_hand_off_each_way_and_two_loop_iterations(tmp_path: Path) -> None:
    # when 10 inserts are written one after another, on a loop of their own
    sequential, concurrent = asyncio.run(_count(tmp_path / "handoffs.db"))

    # then each is one transaction, handed back once by the writer's thread, in two iterations
    # of the loop: the one that queues it (and goes on to wait), the one that hands it back
    woken = {name: n for name, n in sequential.items() if name.startswith("woken by")}
    assert woken == {"woken by runsgate-sqlite-writer": 10}, sequential
    assert sequential["commits"] == 10
    assert sequential["iterations"] == 2 * 10, sequential

    # and decisions recorded at once share transactions, each handed back once
    woken = {name: n for name, n in concurrent.items() if name.startswith("woken by")}
    assert woken == {"woken by runsgate-sqlite-writer": concurrent["commits"]}, concurrent
    assert 1 <= concurrent["commits"] < 10, concurrent
