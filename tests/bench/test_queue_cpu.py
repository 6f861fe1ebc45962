"""``bench.queue_cpu`` on a small SQLite file, so it cannot rot (no timing is asserted): every
listing and queue scenario answered in process, and each pair's figures printed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.queue_cpu import PAIRS, main
from storage import SQLiteSnapshotStore
from tests.storage._contract import snapshot


async def _seed(path: Path) -> None:
    store = SQLiteSnapshotStore(path)
    await store.open()
    try:
        for number in range(30):
            await store.insert(snapshot(f"run-{number:02}", thread="thread-7", resource="customer-3"), b"[]")
    finally:
        await store.close()


def test_the_queue_cpu_bench_runs_on_a_small_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "runs.db"
    asyncio.run(_seed(path))

    assert main([str(path), "1"]) == 0

    lines = [line for line in capsys.readouterr().out.splitlines() if "queue/listing" in line]
    printed = [line.split(" listing ")[0].strip() for line in lines]
    assert printed == list(PAIRS)
