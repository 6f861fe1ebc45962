"""``backup``: a consistent copy of a SQLite store's file while servers use it, through SQLite's
online backup API under one read transaction, checked, fsynced and renamed into place
(docs/operations.md "Backup and restore")."""

from __future__ import annotations

import os
import sqlite3
import uuid
from dataclasses import dataclass
from pathlib import Path

PAGES_PER_STEP = 1024
"""Pages the backup copies per step (``sqlite3.Connection.backup``'s ``pages``)."""


class BackupRefusedError(ValueError):
    """The backup was not attempted: a missing source, a target that is a folder, exists (without
    ``force``) or is the source, a missing target folder, or a source that is not a runsgate store
    (not a SQLite database at all, or one without runsgate's tables). Nothing was written."""


class BackupFailedError(RuntimeError):
    """The copy failed (an I/O error, a locked or corrupt source, a copy failing
    ``PRAGMA integrity_check``); no target was written and the temporary file was removed."""


@dataclass(frozen=True, slots=True)
class BackupResult:
    """What one backup wrote."""

    target: Path
    pages: int
    """Pages of the copy (its size is ``pages`` times the page size)."""
    steps: int
    """Steps of the backup API (``pages_per_step`` pages each); one read transaction held across them."""
    size: int
    """Bytes of the target file."""


def _sidecars(path: Path) -> tuple[Path, Path]:
    """The ``-wal`` and ``-shm`` files SQLite keeps beside ``path`` in WAL mode."""
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


def _fsync(path: Path, *, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _check(source: Path, target: Path, force: bool) -> None:
    if not source.is_file():
        raise BackupRefusedError(f"the SQLite database {source} does not exist (or is not a file)")
    if not target.parent.is_dir():
        raise BackupRefusedError(f"the folder of {target} does not exist")
    if target.exists() and target.resolve() == source.resolve():
        raise BackupRefusedError(f"{target} is the store itself: back it up to another file")
    if target.is_dir():  # --force would not replace it either
        raise BackupRefusedError(f"{target} is a folder")
    existing = [str(p) for p in (target, *_sidecars(target)) if p.exists()]
    if existing and not force:
        raise BackupRefusedError(f"{', '.join(existing)} already exists: give --force to replace it")


def backup(
    source: str | Path,
    target: str | Path,
    *,
    force: bool = False,
    busy_timeout: float = 30.0,
    pages_per_step: int = PAGES_PER_STEP,
) -> BackupResult:
    """Copy the runsgate SQLite store ``source`` to ``target`` while other processes write to it.

    One read transaction is held on ``source`` for the whole copy, so the copy is the store as of
    the moment the backup began (every write committed before it, none after) and writers never
    restart it. The copy goes to a temporary file beside ``target``, passes ``PRAGMA
    integrity_check``, is fsynced, then takes ``target``'s name: by a hard link when ``force`` is
    false (an existing ``target`` is never overwritten), by a rename otherwise (a replaced target's
    stale ``-wal`` and ``-shm`` files are deleted first). ``busy_timeout``: seconds to wait for a lock;
    ``pages_per_step``: pages copied per step of the backup API.

    Raises:
        BackupRefusedError: Nothing attempted (see the class); the message says why.
        BackupFailedError: The copy failed; nothing was left behind.
    """
    source, target = Path(source), Path(target)
    _check(source, target, force)
    temp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        result = _copy(source, temp, busy_timeout, pages_per_step)
        _fsync(temp)
        _place(temp, target, force)
        _fsync(target.parent, directory=True)
    except sqlite3.Error as exc:
        raise BackupFailedError(f"the backup of {source} failed: {exc}") from exc
    except OSError as exc:
        raise BackupFailedError(f"the backup of {source} to {target} failed: {exc}") from exc
    finally:
        for leftover in (temp, *_sidecars(temp)):
            leftover.unlink(missing_ok=True)
    return BackupResult(target=target, pages=result[0], steps=result[1], size=target.stat().st_size)


def _copy(source: Path, temp: Path, busy_timeout: float, pages_per_step: int) -> tuple[int, int]:
    """Copy ``source`` into the new file ``temp`` under one read transaction; returns its pages
    and the backup steps taken."""
    src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=rw", uri=True, timeout=busy_timeout, isolation_level=None)
    try:
        src.execute("BEGIN")  # the read transaction starts at the first read and is held to the end
        try:  # the first read: SQLite reads the file's header
            tables = {row[0] for row in src.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_NOTADB:
                raise  # locked, unreadable: the copy failed
            raise BackupRefusedError(f"{source} is not a SQLite database ({exc}); nothing written") from None
        if "runsgate_meta" not in tables:
            raise BackupRefusedError(f"{source} is not a runsgate store (no runsgate_meta table); nothing written")
        dst = sqlite3.connect(temp, isolation_level=None)
        try:
            steps = 0

            def step(status: int, remaining: int, total: int) -> None:
                nonlocal steps
                steps += 1

            src.backup(dst, pages=pages_per_step, progress=step)
            src.execute("COMMIT")
            problems = [row[0] for row in dst.execute("PRAGMA integrity_check")]
            if problems != ["ok"]:
                raise BackupFailedError(f"the copy of {source} failed its integrity check: {'; '.join(problems[:5])}")
            pages = int(dst.execute("PRAGMA page_count").fetchone()[0])
            # the copy keeps the WAL mode of its source; closing checkpoints it, so it is one file
            dst.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            dst.close()
        return pages, steps
    finally:
        src.close()


def _place(temp: Path, target: Path, force: bool) -> None:
    if not force:
        try:
            os.link(temp, target)  # never replaces a target that appeared since the check
        except FileExistsError:
            raise BackupRefusedError(f"{target} already exists: give --force to replace it") from None
        return
    for stale in _sidecars(target):
        stale.unlink(missing_ok=True)
    os.replace(temp, target)


__all__ = ["PAGES_PER_STEP", "BackupFailedError", "BackupRefusedError", "BackupResult", "backup"]
