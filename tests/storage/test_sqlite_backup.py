"""``storage.sqlite.file.backup`` and ``runsgate backup`` (docs/operations.md "Backup and restore"):
refusals that write nothing, ``--force``, a copy taken while a store writes, its integrity.
Real SQLite files in ``tmp_path``."""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from server.cli.main import main
from storage import SQLiteSnapshotStore
from storage.sqlite.file.backup import BackupFailedError, BackupRefusedError, backup

from ._contract import snapshot

AGENT = "refund-agent"


async def _store_with(path: Path, runs: int, *, history: bytes = b"[]") -> list[str]:
    store = SQLiteSnapshotStore(path)
    await store.open()
    ids = [f"run-{i}" for i in range(runs)]
    try:
        for run_id in ids:
            await store.insert(snapshot(run_id), history)
    finally:
        await store.close()
    return ids


async def _runs_in(path: Path) -> set[str]:
    with closing(sqlite3.connect(path)) as conn:
        return {row[0] for row in conn.execute("SELECT run_id FROM run_snapshots")}


def _names(folder: Path) -> list[str]:
    """The files in ``folder`` but SQLite's ``-wal`` and ``-shm``."""
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith(("-wal", "-shm")))


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp") or ".tmp-" in p.name)


async def test_the_copy_holds_the_runs_and_opens_as_a_store(tmp_path: Path) -> None:
    source, target = tmp_path / "runs.db", tmp_path / "copy.db"
    ids = await _store_with(source, 5, history=b'[{"kind": "request"}]')
    result = backup(source, target)
    assert result.target == target
    assert result.size == target.stat().st_size > 0
    assert not target.with_name("copy.db-wal").exists()  # one file: its WAL was checkpointed
    with closing(sqlite3.connect(target)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    store = SQLiteSnapshotStore(target)
    await store.open()
    try:
        for run_id in ids:
            assert (await store.get(AGENT, run_id)) is not None
            assert await store.load_history(AGENT, run_id) == b'[{"kind": "request"}]'
    finally:
        await store.close()
    assert _leftovers(tmp_path) == []


async def test_a_copy_taken_while_the_store_writes_is_the_store_as_of_its_start_in_one_pass(tmp_path: Path) -> None:
    # given a store of 1,000 runs with 8 KiB histories (about 2,000 pages), copied one page per step
    source, target = tmp_path / "runs.db", tmp_path / "copy.db"
    store = SQLiteSnapshotStore(source, synchronous="NORMAL")
    await store.open()
    try:
        before = {f"run-{i}" for i in range(1000)}
        await store.insert_many([(snapshot(run_id), os.urandom(8192)) for run_id in sorted(before)])
        copying = asyncio.create_task(asyncio.to_thread(backup, source, target, pages_per_step=1))
        written = 0
        # when runs are written between its steps
        while not copying.done() and written < 300:
            await store.insert(snapshot(f"during-{written}"), os.urandom(8192))
            written += 1
            await asyncio.sleep(0)
        result = await copying
    finally:
        await store.close()
    assert written > 3, (written, result)
    # then the copy has every run written before it began, and it never restarted: one step a page
    copied = await _runs_in(target)
    assert before <= copied
    assert result.steps <= result.pages + 1, result
    with closing(sqlite3.connect(target)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


async def test_an_existing_target_is_refused_unless_forced(tmp_path: Path) -> None:
    source, target = tmp_path / "runs.db", tmp_path / "copy.db"
    await _store_with(source, 2)
    target.write_bytes(b"keep me")
    with pytest.raises(BackupRefusedError, match="already exists: give --force"):
        backup(source, target)
    assert target.read_bytes() == b"keep me"
    assert _leftovers(tmp_path) == []
    # a stale -wal beside a target is replaced with it, never applied to the new copy
    stale = tmp_path / "copy.db-wal"
    stale.write_bytes(b"stale")
    backup(source, target, force=True)
    assert not stale.exists()
    assert await _runs_in(target) == {"run-0", "run-1"}


async def test_refusals_write_nothing(tmp_path: Path) -> None:
    source = tmp_path / "runs.db"
    with pytest.raises(BackupRefusedError, match="does not exist"):
        backup(source, tmp_path / "copy.db")
    assert not source.exists()  # not created by the attempt
    await _store_with(source, 1)
    with pytest.raises(BackupRefusedError, match="is the store itself"):
        backup(source, source, force=True)
    with pytest.raises(BackupRefusedError, match="folder of"):
        backup(source, tmp_path / "missing" / "copy.db")
    other = tmp_path / "other.db"
    with closing(sqlite3.connect(other)) as conn:
        conn.execute("CREATE TABLE notes (x)")
    with pytest.raises(BackupRefusedError, match="not a runsgate store"):
        backup(other, tmp_path / "copy.db")
    assert _names(tmp_path) == ["other.db", "runs.db"]


@pytest.mark.parametrize("content", [b"plain text, not a database\n" * 200, b"SQLite format 3\x00" + b"\xff" * 4000])
def test_a_file_that_is_not_a_sqlite_database_is_refused_and_left_as_it_was(tmp_path: Path, content: bytes) -> None:
    source, target = tmp_path / "notastore.db", tmp_path / "copy.db"
    source.write_bytes(content)
    with pytest.raises(BackupRefusedError, match=r"notastore\.db is not a SQLite database \(file is not a database\)"):
        backup(source, target)
    assert source.read_bytes() == content
    assert _names(tmp_path) == ["notastore.db"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notastore.db"]  # no -wal, -shm or temporary file


def test_the_command_refuses_a_file_that_is_not_a_database_with_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = tmp_path / "notastore.db", tmp_path / "copy.db"
    source.write_text("not a database\n")
    assert main(["backup", "--store", f"sqlite:///{source}", "--to", str(target)]) == 2
    assert capsys.readouterr().err == (
        f"runsgate backup: refused: {source} is not a SQLite database (file is not a database); nothing written\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notastore.db"]


@pytest.mark.parametrize("force", [False, True])
async def test_a_folder_target_is_refused_as_a_folder_with_or_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], force: bool
) -> None:
    source, folder = tmp_path / "runs.db", tmp_path / "adir"
    await _store_with(source, 1)
    folder.mkdir()
    (folder / "kept.txt").write_text("kept")
    with pytest.raises(BackupRefusedError) as refused:
        backup(source, folder, force=force)
    assert str(refused.value) == f"{folder} is a folder"
    flags = ["--force"] if force else []
    assert main(["backup", "--store", f"sqlite:///{source}", "--to", str(folder), *flags]) == 2
    assert capsys.readouterr().err == f"runsgate backup: refused: {folder} is a folder\n"
    assert [p.name for p in folder.iterdir()] == ["kept.txt"]
    assert _leftovers(tmp_path) == []


async def test_a_corrupt_source_fails_its_integrity_check_and_leaves_no_target(tmp_path: Path) -> None:
    source, target = tmp_path / "runs.db", tmp_path / "copy.db"
    await _store_with(source, 50, history=b"z" * 4096)
    with closing(sqlite3.connect(source)) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'runs_agent_created'").fetchone()[0]
    data = bytearray(source.read_bytes())
    start = (root - 1) * page_size
    data[start + 8 : start + 200] = b"\x07" * 192  # the index's root page: cells overwritten
    source.write_bytes(bytes(data))
    with pytest.raises(BackupFailedError):
        backup(source, target)
    assert not target.exists()
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("url", "says", "shown"),
    [
        ("memory://", "nothing to back up", "'memory://'"),
        ("mongodb://db.example:27017/runsgate", "mongodump --oplog", "'mongodb://db.example:27017/runsgate'"),
        (
            "mongodb+srv://alice:secret@cluster.example/runsgate",
            "provider's snapshots",
            "'mongodb+srv://alice:***@cluster.example/runsgate'",
        ),
        ("postgres://db/runsgate", "no store takes a URL with the scheme 'postgres'", "'postgres://db/runsgate'"),
        ("postgres://x:secret@y/z", "no store takes a URL with the scheme 'postgres'", "'postgres://x:***@y/z'"),
        ("sqlite:///", "not a sqlite store URL", "'sqlite:///'"),
    ],
    ids=["memory", "replica-uri", "srv-uri-password", "unknown-scheme", "unknown-scheme-password", "sqlite-no-path"],
)
def test_the_command_refuses_other_stores_with_what_to_use_instead_showing_the_url_masked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str, says: str, shown: str
) -> None:
    target = tmp_path / "copy.db"
    assert main(["backup", "--store", url, "--to", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("runsgate: invalid configuration: --store: ")
    assert says in err
    assert err.endswith(f" (got {shown})\n"), err  # as runsgate serve shows a refused --store
    assert "secret" not in err
    assert not target.exists()


async def test_the_command_copies_and_refuses_an_existing_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = tmp_path / "runs.db", tmp_path / "copy.db"
    await _store_with(source, 3)
    assert main(["backup", "--store", f"sqlite:///{source}", "--to", str(target)]) == 0
    assert re.fullmatch(r"backed up \S+ to \S+: [\d,]+ bytes, [\d,]+ pages in 1 step\n", capsys.readouterr().out)
    assert main(["backup", "--store", f"sqlite:///{source}", "--to", str(target)]) == 2
    assert capsys.readouterr().err == f"runsgate backup: refused: {target} already exists: give --force to replace it\n"
    assert main(["backup", "--store", f"sqlite:///{source}", "--to", str(target), "--force"]) == 0
    assert await _runs_in(target) == {"run-0", "run-1", "run-2"}
