"""The SQLite store's connections: opening a file (``schema``), reads on the reader connection
(aiosqlite), a run's read by key on the event loop (``_read_point``), and every write as one
function run in a ``BEGIN IMMEDIATE`` transaction on the writer's thread, the writes that queue
sharing one commit (``writer``; docs/storage.md "SQLite")."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Sequence
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from time import monotonic
from typing import Any, Literal, TypeVar

import aiosqlite

from ..documents import EventDocument, RunUpdateBatchDocument, SnapshotDocument
from ..protocol import StoreUnavailableError, event_list
from .file.schema import _available, _open_problem, _prepare, _probe
from .file.space import JOURNAL_SIZE_LIMIT, before_tables, convert, give_back
from .rows import _COLUMNS, _INSERT_EVENT, Row, _event_row, _ms, _snapshot
from .writer import Writer

DEFAULT_BUSY_TIMEOUT = 2.0
"""Seconds a write waits for the database's write lock (and, before that, for this process's
writer connection); below half the subscription lookback (5 s), see docs/storage.md "SQLite"."""

T = TypeVar("T")

LARGE_HISTORY_BYTES = 1024 * 1024
"""Histories from this size are compressed in a worker thread, not on the event loop."""

KEPT_HISTORY_BYTES = 256 * 1024
"""A claiming write keeps the run's history for ``load_history`` up to this compressed size."""
KEPT_HISTORIES = 64
"""At most this many histories kept by claiming writes (the oldest dropped first)."""
KEPT_HISTORY = (
    "(SELECT data FROM run_histories WHERE history_id = run_snapshots.history_id "
    f"AND length(data) <= {KEPT_HISTORY_BYTES})"
)
"""A column of a claiming ``UPDATE``'s ``RETURNING``: the run's compressed history, ``NULL``
when it is larger than ``KEPT_HISTORY_BYTES`` (``_kept_in``), read in the write's transaction."""


class _Connection:
    """The file, its connections (the writer, the reader, the loop's for reads by key) and its
    transactions, which every part of the store uses (``SQLiteSnapshotStore`` documents the
    arguments)."""

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
        self._writer: Writer | None = None
        self._reader: aiosqlite.Connection | None = None
        self._point: sqlite3.Connection | None = None
        """A read-only connection of the thread ``open()`` ran on, which never waits for a lock
        (``_read_point``)."""
        self._point_thread: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop ``open()`` ran on, where ``before_event`` runs."""
        self._incremental = False
        """Whether the file is ``auto_vacuum = INCREMENTAL``: each commit gives free pages back (``file.space``)."""
        self.before_event: Callable[[Sequence[EventDocument]], Coroutine[Any, Any, None]] | None = None
        """Test-only: awaited between a run's state change and the event written with it."""
        self._kept_histories: OrderedDict[tuple[str, str], tuple[bytes, float]] = OrderedDict()
        """Per (agent, run): the compressed history a claiming write of this store read in its
        transaction, and until when (``time.monotonic``) ``load_history`` may answer it
        (``_keep_history``)."""

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    @property
    def busy_timeout(self) -> float:
        """Seconds a write waits for a lock before ``StoreUnavailableError``."""
        return self._busy_timeout

    # -- lifecycle -----------------------------------------------------------------------------
    def _pragmas(self) -> list[str]:
        """Each connection's settings."""
        return [f"PRAGMA synchronous = {self._synchronous}", f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}"]

    async def _connect(self) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(self._path, timeout=self._busy_timeout, isolation_level=None)
        try:
            for pragma in self._pragmas():
                await conn.execute_fetchall(pragma)
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
            self._loop = asyncio.get_running_loop()
            preparing = await self._connect()
            try:
                with _available(self._path):
                    await before_tables(preparing)
                    await _prepare(preparing, self._path, self._busy_timeout)
                    self._incremental = await convert(preparing)
            finally:
                await preparing.close()
            self._writer = Writer(
                self._path, busy_timeout=self._busy_timeout, before_commit=give_back if self._incremental else None
            )
            with _available(self._path):
                await self._writer.open(self._pragmas())
                self._reader = await self._connect()
                await self._reader.execute_fetchall("PRAGMA query_only = 1")
                self._point = _point_connection(self._path)
                self._point_thread = threading.get_ident()
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
        """Close both connections (idempotent); a transaction in progress ends first."""
        if self._writer is not None:
            await self._writer.close()
        if self._reader is not None:
            with suppress(sqlite3.Error):
                await self._reader.close()
        point, self._point = self._point, None
        if point is not None:
            with suppress(sqlite3.Error):  # closed from another thread: freed with the object
                point.close()
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

    async def _read_point(self, sql: str, params: Sequence[Any]) -> list[Row]:
        """The rows of ``sql``, a read of one row by key: run at once on the calling thread when it
        is the one ``open()`` ran on (the event loop's: no hand-off to another thread), in a read
        transaction of its own that never waits for a lock (WAL readers need none but in rare
        cases such as a WAL recovery); on the reader's thread (``_read``) when called from another
        thread or when SQLite fails it there (busy: ``_read`` then waits the busy timeout, and
        raises what ``_read`` raises)."""
        point = self._point
        if point is not None and threading.get_ident() == self._point_thread:
            try:
                return point.execute(sql, params).fetchall()
            except sqlite3.Error:
                pass  # the reader's thread reads it again, waiting for a lock, and reports a failure
        return await self._read(sql, params)

    async def _read_within(
        self, sql: str, params: Sequence[Any], size: Callable[[Row], int], max_bytes: int, *, batch: int = 32
    ) -> list[Row]:
        """The first rows of ``sql`` whose ``size`` add up to at most ``max_bytes``, and the first
        row whatever its size: fetched ``batch`` at a time, so no more than a batch beyond them
        is ever read into this process."""
        kept: list[Row] = []
        total = 0
        with _available(self._path):
            async with self._read_conn.execute(sql, params) as cursor:
                while rows := await cursor.fetchmany(batch):
                    for row in rows:
                        total += size(row)
                        if kept and total > max_bytes:
                            return kept
                        kept.append(row)
        return kept

    async def _explain(self, sql: str, params: Sequence[Any]) -> list[str]:
        """SQLite's query plan of ``sql`` (``EXPLAIN QUERY PLAN``), one line per step."""
        return [str(row[3]) for row in await self._read("EXPLAIN QUERY PLAN " + sql, params)]

    # -- histories kept by claiming writes -----------------------------------------------------
    @staticmethod
    def _kept_in(row: Row) -> bytes | None:
        """The history ``KEPT_HISTORY`` read into the last column of ``row``, or ``None``."""
        return None if row[-1] is None else bytes(row[-1])

    def _keep_history(
        self, agent_id: str, run_id: str, compressed: bytes | None, now: datetime, until: datetime
    ) -> None:
        """After a committed claiming write (claim taken at ``now``, held ``until``, UTC): keep
        ``compressed`` for one ``load_history`` of the run within half the claim's lease, on
        this process's monotonic clock. Only the claim's holder changes a run's history, so
        within the lease it is what a read would find; every claimed write of this store forgets
        it first (``_forget_history``)."""
        key = (agent_id, run_id)
        self._kept_histories.pop(key, None)
        lease = (until - now).total_seconds() / 2
        if compressed is None or lease <= 0:
            return
        self._kept_histories[key] = (compressed, monotonic() + lease)
        while len(self._kept_histories) > KEPT_HISTORIES:
            self._kept_histories.popitem(last=False)

    def _forget_history(self, agent_id: str, run_id: str) -> None:
        """Before a write that changes or deletes the run's history: drop what ``_keep_history`` kept."""
        self._kept_histories.pop((agent_id, run_id), None)

    def _kept_history(self, agent_id: str, run_id: str) -> bytes | None:
        """The compressed history ``_keep_history`` kept for the run, taken (answered once), or
        ``None`` when there is none or its time ran out."""
        kept = self._kept_histories.pop((agent_id, run_id), None)
        if kept is None or monotonic() >= kept[1]:
            return None
        return kept[0]

    # -- writing -------------------------------------------------------------------------------
    async def _delete(self, sql: str, params: Sequence[Any]) -> int:
        """Run the ``DELETE`` statement ``sql`` as one write (``_write``); how many rows it deleted."""
        return await self._write(lambda db: max(db.execute(sql, params).rowcount, 0))

    async def _write(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """``body(connection)`` as one write, atomic and durable when this returns: run whole on
        the writer's thread inside a ``BEGIN IMMEDIATE`` transaction, committed when it returns,
        rolled back alone when it raises (group commit and waits: ``Writer.write``).

        Raises:
            StoreUnavailableError: The write waited ``busy_timeout`` for this process's writer or
                for the file's write lock, or SQLite failed; nothing of it is stored.
        """
        if self._writer is None:
            raise RuntimeError("SQLiteSnapshotStore.open() was not called")
        return await self._writer.write(body)

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

        def write(db: sqlite3.Connection) -> list[Row]:
            rows = db.execute(f"{sql} RETURNING {_COLUMNS}", params).fetchall()
            if rows:
                self._append_in(db, event)
                self._updates_in(db, updates)
            return rows

        rows = await self._write(write)
        return _snapshot(rows[0]) if rows else None

    @staticmethod
    def _updates_in(db: sqlite3.Connection, updates: Sequence[RunUpdateBatchDocument]) -> None:
        """Insert run-update batches inside the caller's transaction (``RunStore``'s ``updates``)."""
        if updates:
            db.executemany(
                "INSERT INTO run_updates (agent_id, run_id, batch_id, at, updates) VALUES (?, ?, ?, ?, ?)",
                [(b["agentId"], b["runId"], b["_id"], _ms(b["at"]), b["updates"]) for b in updates],
            )

    def _append_in(self, db: sqlite3.Connection, event: EventDocument | Sequence[EventDocument] | None) -> None:
        """Append ``event`` (one, several in order, or none) inside the caller's transaction, after
        its state change (one unit of work: all are committed or none). ``before_event`` runs
        first, on the event loop (tests inject a crash there)."""
        events = event_list(event)
        if not events:
            return
        hook, loop = self.before_event, self._loop
        if hook is not None and loop is not None:
            asyncio.run_coroutine_threadsafe(hook(events), loop).result()
        db.executemany(_INSERT_EVENT, [_event_row(one) for one in events])


def _point_connection(path: Path) -> sqlite3.Connection:
    """A read-only connection to ``path`` on the calling thread with a busy timeout of 0: a read
    SQLite finds busy fails at once (``_read_point`` reads it again on the reader's thread)."""
    conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        conn.execute("PRAGMA query_only = 1")
    except BaseException:
        conn.close()
        raise
    return conn
