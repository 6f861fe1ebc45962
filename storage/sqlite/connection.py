"""The SQLite store's connections: opening a file (``schema``), reads on the reader connection,
and every write as one ``BEGIN IMMEDIATE`` transaction on the writer connection, the writes that
queue sharing one commit (``_Connection._transaction``; docs/storage.md "SQLite")."""

from __future__ import annotations

import asyncio
import sqlite3
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import aiosqlite

from ..documents import EventDocument, RunUpdateBatchDocument, SnapshotDocument
from ..protocol import StoreUnavailableError, event_list
from .rows import _COLUMNS, _INSERT_EVENT, Row, _event_row, _ms, _snapshot
from .schema import _available, _open_problem, _prepare, _probe
from .space import JOURNAL_SIZE_LIMIT, before_tables, convert, give_back

DEFAULT_BUSY_TIMEOUT = 2.0
"""Seconds a write waits for the database's write lock (and, before that, for this process's
writer connection); below half the subscription lookback (5 s), see docs/storage.md "SQLite"."""

LARGE_HISTORY_BYTES = 1024 * 1024
"""Histories from this size are compressed in a worker thread, not on the event loop."""


@dataclass(eq=False)
class _CommitGroup:
    """Writes sharing one ``BEGIN IMMEDIATE`` ... ``COMMIT`` (``_Connection._transaction``)."""

    done: asyncio.Future[None]
    """Resolved by the ``COMMIT``: ``None``, or the error every member gets."""
    members: int = 0
    """Writes whose body completed inside it (kept, each in its released savepoint)."""


class _Connection:
    """The file, its two connections and its transactions, which every part of the store uses
    (``SQLiteSnapshotStore`` documents the arguments)."""

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
    ) -> None:
        if busy_timeout < 0:
            raise ValueError("busy_timeout must be >= 0")
        self._path = Path(path)
        self._busy_timeout = busy_timeout
        self._synchronous = synchronous
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._write_lock = asyncio.Lock()
        self._waiting = 0
        """Writes of this process waiting for ``_write_lock`` (group commit: ``_transaction``)."""
        self._group: _CommitGroup | None = None
        """The open transaction writes join while others wait, until its ``COMMIT``."""
        self._incremental = False
        """Whether the file is ``auto_vacuum = INCREMENTAL``: each commit gives free pages back (``space``)."""
        self.before_event: Callable[[Sequence[EventDocument]], Awaitable[None]] | None = None
        """Test-only: awaited between a run's state change and the event written with it."""

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    @property
    def busy_timeout(self) -> float:
        """Seconds a write waits for a lock before ``StoreUnavailableError``."""
        return self._busy_timeout

    # -- lifecycle -----------------------------------------------------------------------------
    async def _connect(self) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(self._path, timeout=self._busy_timeout, isolation_level=None)
        try:
            await conn.execute_fetchall(f"PRAGMA synchronous = {self._synchronous}")
            await conn.execute_fetchall(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
        except BaseException:
            await conn.close()
            raise
        return conn

    async def open(self) -> None:
        """Open the file (created if missing, ``auto_vacuum = INCREMENTAL``), switch it to WAL, create
        the tables, check the version, convert a file made without ``auto_vacuum`` (``space.convert``).

        Raises:
            StoreUnavailableError: The file cannot be opened or written, is not a SQLite
                database (it is left unchanged), or holds tables of something else than runsgate.
            NewerSchemaError: The file was written by a newer runsgate.
        """
        await self.close()
        try:
            # A path SQLite cannot open at all fails here, not in aiosqlite.connect(), whose worker
            # thread would outlive the failure and later call back into a closed event loop.
            await asyncio.to_thread(_probe, self._path)
            self._writer = await self._connect()
            with _available(self._path):
                await before_tables(self._writer)
                await _prepare(self._writer, self._path, self._busy_timeout)
                self._incremental = await convert(self._writer)
                self._reader = await self._connect()
                await self._reader.execute_fetchall("PRAGMA query_only = 1")
        except sqlite3.Error as exc:  # connect() itself: a missing directory, a directory as path
            await self.close()
            raise StoreUnavailableError(_open_problem(self._path, exc)) from exc
        except StoreUnavailableError as exc:
            await self.close()
            cause = exc.__cause__
            if isinstance(cause, sqlite3.Error):
                raise StoreUnavailableError(_open_problem(self._path, cause)) from cause
            raise
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Close both connections (idempotent)."""
        for conn in (self._reader, self._writer):
            if conn is not None:
                with suppress(sqlite3.Error):
                    await conn.close()
        self._reader = self._writer = None

    async def ping(self) -> None:
        with _available(self._path):
            await self._read_conn.execute_fetchall("SELECT value FROM runsgate_meta WHERE key = 'schema_version'")

    @property
    def _read_conn(self) -> aiosqlite.Connection:
        if self._reader is None:
            raise RuntimeError("SQLiteSnapshotStore.open() was not called")
        return self._reader

    async def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        with _available(self._path):
            return list(await self._read_conn.execute_fetchall(sql, params))

    async def _explain(self, sql: str, params: Sequence[Any]) -> list[str]:
        """SQLite's query plan of ``sql`` (``EXPLAIN QUERY PLAN``), one line per step."""
        return [str(row[3]) for row in await self._read("EXPLAIN QUERY PLAN " + sql, params)]

    # -- writing -------------------------------------------------------------------------------
    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """One write, atomic and durable when the block returns: committed when the body ends,
        rolled back when it raises. The wait for the connection and for the file's write lock
        are each bounded by ``busy_timeout`` (then ``StoreUnavailableError``).

        Group commit: writes of this process that queue for the writer connection while another
        runs share its ``BEGIN IMMEDIATE`` transaction, each in a ``SAVEPOINT`` of its own (a body
        that raises is rolled back to it alone), and one ``COMMIT`` (one fsync) makes them all
        durable; none returns before that commit. A lone write commits at once, as before. A
        failed commit fails every write of the group, none of which is then stored.
        """
        conn = self._writer
        if conn is None:
            raise RuntimeError("SQLiteSnapshotStore.open() was not called")
        self._waiting += 1
        try:
            async with asyncio.timeout(self._busy_timeout):
                await self._write_lock.acquire()
        except TimeoutError:
            raise StoreUnavailableError(
                f"the SQLite database {self._path} stayed busy in this process for {self._busy_timeout} s"
            ) from None
        finally:
            self._waiting -= 1
        group = self._group
        try:
            with _available(self._path):
                try:
                    if group is None:
                        await conn.execute("BEGIN IMMEDIATE")
                        group = self._group = _CommitGroup(asyncio.get_running_loop().create_future())
                    await conn.execute("SAVEPOINT runsgate_write")
                    yield conn
                    await conn.execute("RELEASE runsgate_write")
                except BaseException:
                    # Unconditional: a cancelled await leaves its statement queued on the
                    # connection's thread (a BEGIN may still succeed there); the rollback is queued
                    # after it, so nothing of this write outlives this block. Without a
                    # transaction it just fails.
                    with suppress(sqlite3.Error):
                        if group is None or group.members == 0:
                            self._group = None
                            await conn.execute("ROLLBACK")
                        else:  # the group's earlier writes stay, to be committed by one of them
                            await conn.execute("ROLLBACK TO runsgate_write")
                            await conn.execute("RELEASE runsgate_write")
                    raise
                group.members += 1
                if self._waiting == 0:
                    await self._commit(conn, group)
                    return
        finally:
            self._write_lock.release()
        # Others wait for the connection: they join this transaction, and this write is durable
        # at the group's commit, made by the first of its writes to get the connection back
        # (shielded: a cancelled request never leaves the group uncommitted).
        await asyncio.shield(self._settle(conn, group))

    async def _commit(self, conn: aiosqlite.Connection, group: _CommitGroup) -> None:
        """``COMMIT`` the group (the writer lock held); its members learn the result from ``done``."""
        self._group = None
        try:
            with _available(self._path):
                if self._incremental:
                    await give_back(conn)
                await conn.execute("COMMIT")
        except BaseException as exc:
            with suppress(sqlite3.Error):
                await conn.execute("ROLLBACK")
            group.done.set_exception(exc)
            group.done.exception()  # retrieved: a member that was cancelled never reads it
            raise
        group.done.set_result(None)

    async def _settle(self, conn: aiosqlite.Connection, group: _CommitGroup) -> None:
        """Wait until ``group`` is committed, committing it when the connection comes back first.

        Raises:
            StoreUnavailableError: The commit failed (nothing of the group was stored).
        """
        if not group.done.done():
            self._waiting += 1
            try:
                await self._write_lock.acquire()
            finally:
                self._waiting -= 1
            try:
                if not group.done.done():
                    await self._commit(conn, group)
            finally:
                self._write_lock.release()
        await group.done

    @staticmethod
    async def _compress(history: bytes) -> bytes:
        if len(history) >= LARGE_HISTORY_BYTES:
            return await asyncio.to_thread(zlib.compress, history, 6)
        return zlib.compress(history, 6)

    async def _update_returning(
        self,
        sql: str,
        params: Sequence[Any],
        event: EventDocument | Sequence[EventDocument] | None = None,
        updates: Sequence[RunUpdateBatchDocument] = (),
    ) -> SnapshotDocument | None:
        """One conditional ``UPDATE``, and ``event`` (one, several in order, or none) and
        ``updates`` appended in the same transaction when it matched."""
        async with self._transaction() as conn:
            rows = list(await conn.execute_fetchall(f"{sql} RETURNING {_COLUMNS}", params))
            if rows:
                await self._append_in(conn, event)
                await self._updates_in(conn, updates)
        return _snapshot(rows[0]) if rows else None

    @staticmethod
    async def _updates_in(conn: aiosqlite.Connection, updates: Sequence[RunUpdateBatchDocument]) -> None:
        """Insert run-update batches inside the caller's transaction (``RunStore``'s ``updates``)."""
        for batch in updates:
            await conn.execute(
                "INSERT INTO run_updates (agent_id, run_id, batch_id, at, updates) VALUES (?, ?, ?, ?, ?)",
                (batch["agentId"], batch["runId"], batch["_id"], _ms(batch["at"]), batch["updates"]),
            )

    async def _append_in(
        self, conn: aiosqlite.Connection, event: EventDocument | Sequence[EventDocument] | None
    ) -> None:
        """Append ``event`` (one, several in order, or none) inside the caller's transaction, after
        its state change (one unit of work: all are committed or none). ``before_event`` runs
        first (tests inject a crash there)."""
        events = event_list(event)
        if not events:
            return
        if self.before_event is not None:
            await self.before_event(events)
        for one in events:
            await conn.execute(_INSERT_EVENT, _event_row(one))
