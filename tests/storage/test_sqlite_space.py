"""A SQLite file gives its space back (``storage/sqlite/file/space.py``, docs/storage.md "Space"): its
size follows what it holds while runs come and go, and a file made before ``auto_vacuum`` (the
fixture ``tests/data/sqlite-before-space``, written by commit f1a086e) is converted once.

Real files in ``tmp_path``; sizes are read from the files, after a checkpoint by another
connection (the main file shrinks at checkpoints)."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from contextlib import closing
from datetime import timedelta
from pathlib import Path

from storage import SQLiteSnapshotStore
from storage.protocol import ClaimedDeletion, ClaimWrite
from storage.sqlite.file.space import INCREMENTAL, MAX_PAGES_PER_COMMIT, RESERVE_PAGES

from ._contract import T0, snapshot

AGENT = "refund-agent"
HISTORY_BYTES = 32 * 1024
OLD = Path(__file__).resolve().parent.parent / "data" / "sqlite-before-space" / "runs.db"


def _history(name: str, size: int = HISTORY_BYTES) -> bytes:
    """``size`` bytes that zlib cannot shrink (histories are stored compressed)."""
    out = b""
    while len(out) < size:
        out += hashlib.sha256(name.encode() + len(out).to_bytes(8, "big")).digest()
    return out[:size]


def _size(path: Path) -> int:
    """Bytes of the file and its ``-wal``, after a checkpoint that moves the WAL into the file."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def _pragma(path: Path, name: str) -> int:
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute(f"PRAGMA {name}").fetchone()[0])


class _Traffic:
    """Runs of one store coming (``insert``) and going (``claim`` + ``delete_claimed``, a run that
    finished), oldest first."""

    def __init__(self, store: SQLiteSnapshotStore) -> None:
        self.store = store
        self.live: list[str] = []
        self.made = 0

    async def come(self, count: int) -> None:
        for _ in range(count):
            run_id = f"run-{self.made}"
            self.made += 1
            await self.store.insert(snapshot(run_id, calls=[]), _history(run_id))
            self.live.append(run_id)

    async def go(self, count: int) -> None:
        for run_id in self.live[:count]:
            assert await self.store.claim(
                ClaimWrite(agent_id=AGENT, run_id=run_id, by="i1", until=T0 + timedelta(minutes=1), now=T0)
            )
            assert await self.store.delete_claimed(ClaimedDeletion(agent_id=AGENT, run_id=run_id, by="i1"))
        del self.live[:count]


async def test_the_size_follows_what_is_stored_while_runs_come_and_go(sqlite_path: Path) -> None:
    store = SQLiteSnapshotStore(sqlite_path, synchronous="NORMAL")  # fewer fsyncs; the same pages
    await store.open()
    traffic = _Traffic(store)
    try:
        # given runs coming and going at a steady rate: 10 a round, 30 stored at a time
        await traffic.come(30)
        for _ in range(5):
            await traffic.come(10)
            await traffic.go(10)
        steady = _size(sqlite_path)
        assert steady > 30 * HISTORY_BYTES

        # when a burst of 300 runs (~10 MB of histories) comes and goes, then the steady rate resumes
        await traffic.come(300)
        peak = _size(sqlite_path)
        assert peak > 5 * steady
        await traffic.go(300)
        sizes = []
        for _ in range(10):
            await traffic.come(10)
            await traffic.go(10)
            sizes.append(_size(sqlite_path))

        # then the file gives the burst's pages back: it stays within 1.2x of its steady size
        # (plus the free pages it keeps for reuse), never at the size of its peak
        bound = 1.2 * steady + RESERVE_PAGES * 4096
        assert max(sizes) <= bound, (steady, peak, sizes)
        assert len(traffic.live) == 30
        assert _pragma(sqlite_path, "freelist_count") <= RESERVE_PAGES
    finally:
        await store.close()


async def test_a_large_delete_is_given_back_over_the_next_commits_a_bounded_part_each(sqlite_path: Path) -> None:
    store = SQLiteSnapshotStore(sqlite_path, synchronous="NORMAL")
    await store.open()
    try:
        # given 400 runs of 32 KiB histories (over 3,000 pages), deleted by one transaction
        await store.insert_many([(snapshot(f"run-{i}", calls=[]), _history(f"run-{i}")) for i in range(400)])
        await store.drop_all()
        # then that commit gave back at most MAX_PAGES_PER_COMMIT pages
        free = _pragma(sqlite_path, "freelist_count")
        assert free >= 400 * HISTORY_BYTES // 4096 - MAX_PAGES_PER_COMMIT - RESERVE_PAGES
        # and the next commits give back the rest, down to the reserve
        traffic = _Traffic(store)
        for _ in range(3):
            await traffic.come(1)
            await traffic.go(1)
        assert _pragma(sqlite_path, "freelist_count") <= RESERVE_PAGES
    finally:
        await store.close()


async def test_a_new_file_is_made_incremental(sqlite_path: Path) -> None:
    store = SQLiteSnapshotStore(sqlite_path)
    await store.open()
    await store.close()
    assert _pragma(sqlite_path, "auto_vacuum") == INCREMENTAL


async def test_a_file_made_before_auto_vacuum_is_converted_once_and_keeps_its_runs(tmp_path: Path) -> None:
    # given a file written by f1a086e: auto_vacuum NONE, three runs, the free pages of finished runs
    path = tmp_path / "runs.db"
    shutil.copy(OLD, path)
    assert _pragma(path, "auto_vacuum") == 0
    assert _pragma(path, "freelist_count") > 0
    before = _size(path)

    # when today's store opens it
    store = SQLiteSnapshotStore(path)
    await store.open()
    try:
        # then it is incremental, its free pages are gone, and its runs and histories are there
        assert _pragma(path, "auto_vacuum") == INCREMENTAL
        assert _pragma(path, "freelist_count") == 0
        assert _size(path) < before
        for i in range(3):
            run = await store.get(AGENT, f"kept-{i}")
            assert run is not None
            assert (run["status"], run["pendingCount"]) == ("suspended", 1)
            assert await store.load_history(AGENT, f"kept-{i}") == _history(f"kept-{i}", 4096)
        assert await store.get(AGENT, "gone-0") is None
        with closing(sqlite3.connect(path)) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        await store.close()
    converted = path.read_bytes()

    # and opening it again converts nothing more: the file is left byte for byte as it was
    again = SQLiteSnapshotStore(path)
    await again.open()
    await again.close()
    _size(path)
    assert path.read_bytes() == converted
