"""How long a SQLite file made before ``auto_vacuum`` takes to convert when opened
(``storage/sqlite/file/space.py``, docs/storage.md "Space").

``./dev run python -m bench.sqlite_conversion [MiB ...]`` (default 256 1024): for each size, a file
of suspended runs with incompressible 64 KiB histories is written, set back to ``auto_vacuum =
NONE`` (the format of older runsgate files, by one ``VACUUM``), then timed while
``SQLiteSnapshotStore.open()`` converts it (one ``VACUUM`` in WAL mode and a checkpoint). Prints
the size, the seconds, the seconds per GiB, and the load average before and after each size.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

from storage import SQLiteSnapshotStore
from storage.sqlite.file.space import INCREMENTAL
from tests.storage._contract import snapshot

HISTORY = 64 * 1024
BATCH = 500


async def _fill(path: Path, mib: int) -> None:
    store = SQLiteSnapshotStore(path, synchronous="NORMAL")
    await store.open()
    try:
        runs = mib * 1024 * 1024 // HISTORY
        for start in range(0, runs, BATCH):
            await store.insert_many(
                [(snapshot(f"run-{i}"), os.urandom(HISTORY)) for i in range(start, min(runs, start + BATCH))]
            )
    finally:
        await store.close()
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA auto_vacuum = NONE")
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert conn.execute("PRAGMA auto_vacuum").fetchone() == (0,)


async def measure(mib: int, folder: Path) -> tuple[int, float]:
    """The bytes of an old-format file of about ``mib`` MiB and the seconds its conversion took."""
    path = folder / f"old-{mib}.db"
    await _fill(path, mib)
    size = path.stat().st_size
    store = SQLiteSnapshotStore(path)
    started = time.perf_counter()
    await store.open()
    seconds = time.perf_counter() - started
    await store.close()
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone() == (INCREMENTAL,)
    path.unlink()
    return size, seconds


def main(argv: list[str]) -> None:
    sizes = [int(arg) for arg in argv] or [256, 1024]
    print(f"cores {os.cpu_count()}, SQLite {sqlite3.sqlite_version}")
    with tempfile.TemporaryDirectory(prefix="runsgate-conversion-", dir=os.environ.get("TMPDIR")) as folder:
        for mib in sizes:
            load = os.getloadavg()[0]
            size, seconds = asyncio.run(measure(mib, Path(folder)))
            gib = size / 2**30
            print(
                f"{size / 2**20:8.0f} MiB  converted in {seconds:6.2f} s  = {seconds / gib:5.1f} s/GiB  "
                f"(load {load:.1f} before, {os.getloadavg()[0]:.1f} after)"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
