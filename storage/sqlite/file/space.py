"""How a SQLite store's file gives space back: new files are made with ``auto_vacuum =
INCREMENTAL``, a file made before that is converted once when opened (one ``VACUUM``), and
every commit gives back the free pages beyond ``RESERVE_PAGES`` (docs/storage.md "Space")."""

from __future__ import annotations

import sqlite3

import aiosqlite


async def _pragma(conn: aiosqlite.Connection, name: str) -> int:
    """The value of ``PRAGMA name``, an integer."""
    rows = list(await conn.execute_fetchall(f"PRAGMA {name}"))
    return int(rows[0][0])


INCREMENTAL = 2
"""``PRAGMA auto_vacuum``'s value for ``INCREMENTAL`` (0 is ``NONE``, 1 ``FULL``)."""

RESERVE_PAGES = 256
"""Free pages a file keeps for the next writes to reuse (1 MiB at SQLite's 4 KiB pages)."""

MAX_PAGES_PER_COMMIT = 2048
"""Pages one commit gives back at most (8 MiB at 4 KiB pages), so that a commit after a large
delete holds the write lock briefly; the next commits give back the rest."""

JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024
"""Bytes the ``-wal`` file is cut back to after a checkpoint (``PRAGMA journal_size_limit``)."""


async def before_tables(conn: aiosqlite.Connection) -> None:
    """Make a new, empty file incremental: ``auto_vacuum`` takes effect only before the first
    table. A file with pages is left as it is (``convert`` handles runsgate's)."""
    if await _pragma(conn, "page_count") == 0:
        await conn.execute_fetchall("PRAGMA auto_vacuum = INCREMENTAL")


async def convert(conn: aiosqlite.Connection) -> bool:
    """Convert a runsgate file made without ``auto_vacuum`` (before this version) to incremental:
    the pragma then one ``VACUUM``, which rewrites the whole file (docs/storage.md "Space": seconds
    per GiB, and free disk of about the file's size); outside any transaction. A file another
    process is writing is left for a later open. Returns whether the file is incremental now.

    Raises:
        sqlite3.Error: Another failure of the ``VACUUM`` (the file is left as it was).
    """
    if await _pragma(conn, "auto_vacuum") == INCREMENTAL:
        return True
    await conn.execute_fetchall("PRAGMA auto_vacuum = INCREMENTAL")  # FULL switches at once
    if await _pragma(conn, "auto_vacuum") != INCREMENTAL:
        try:
            await conn.execute_fetchall("VACUUM")
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorname", "") not in {"SQLITE_BUSY", "SQLITE_LOCKED"}:
                raise
            return False
        await conn.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)")  # VACUUM wrote the whole file to the WAL
    return await _pragma(conn, "auto_vacuum") == INCREMENTAL


def give_back(db: sqlite3.Connection) -> int:
    """Inside the caller's write transaction (on the writer's thread): give the file's free pages
    beyond ``RESERVE_PAGES`` back, at most ``MAX_PAGES_PER_COMMIT`` (the file shrinks at the next
    checkpoint). Returns the pages given back.

    ``PRAGMA incremental_vacuum(N)`` frees one page per step of its statement, and Python's
    ``sqlite3`` takes one step of a statement that returns no columns; so it runs once per page.
    """
    free = int(db.execute("PRAGMA freelist_count").fetchone()[0])
    surplus = min(free - RESERVE_PAGES, MAX_PAGES_PER_COMMIT)
    if surplus <= 0:
        return 0
    db.executemany("PRAGMA incremental_vacuum(1)", [()] * surplus)
    return surplus
