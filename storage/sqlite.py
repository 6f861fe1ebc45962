"""``SQLiteSnapshotStore``: suspended runs in one SQLite file, through ``aiosqlite``.

Several processes of one host may share the file: every conditional write is one ``BEGIN
IMMEDIATE`` transaction, and writes that queue share a commit (``_transaction``). WAL journal,
``synchronous=FULL`` by default; ``busy_timeout`` (seconds) bounds each wait for the lock, after
which a write fails with ``StoreUnavailableError``. Tables, indexes, durability and the bound the
event feed needs on ``busy_timeout``: docs/modules.md and docs/storage.md.
"""

from __future__ import annotations

import asyncio
import sqlite3
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, cast

import aiosqlite

from . import stored_json
from ._query import normalized_filter, to_bson_precision
from .documents import (
    SCHEMA_VERSION,
    ApprovalDocument,
    ClaimDocument,
    DecisionDocument,
    EventDocument,
    IdempotencyDocument,
    RunErrorDocument,
    RunUpdateBatchDocument,
    SnapshotDocument,
    ToolCallDocument,
    WebhookDeliveryDocument,
    WebhookDeliveryStatus,
)
from .protocol import DuplicateRunError, NewerSchemaError, RunFilter, SortKey, StoreUnavailableError, event_list
from .rules import earliest_deadline

DEFAULT_BUSY_TIMEOUT = 2.0
"""Seconds a write waits for the database's write lock (and, before that, for this process's
writer connection); below half the subscription lookback (5 s), see the module docstring."""

LARGE_HISTORY_BYTES = 1024 * 1024
"""Histories from this size are compressed in a worker thread, not on the event loop."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)

_TABLES = """
CREATE TABLE IF NOT EXISTS runsgate_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS run_snapshots (
    run_id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    thread_id TEXT,
    resource_id TEXT,
    parent_run_id TEXT,
    status TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    suspended_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    tool_calls TEXT NOT NULL,
    pending_count INTEGER NOT NULL,
    version INTEGER NOT NULL,
    claim_by TEXT,
    claim_until INTEGER,
    last_error TEXT,
    schema_version INTEGER NOT NULL,
    history_id TEXT NOT NULL,
    expires_at INTEGER
);
CREATE INDEX IF NOT EXISTS runs_agent_created
    ON run_snapshots (agent_id, created_at DESC, run_id DESC);
CREATE INDEX IF NOT EXISTS runs_agent_thread_created
    ON run_snapshots (agent_id, thread_id, created_at DESC, run_id DESC);
CREATE INDEX IF NOT EXISTS runs_agent_resource_created
    ON run_snapshots (agent_id, resource_id, created_at DESC, run_id DESC);
CREATE INDEX IF NOT EXISTS runs_agent_thread_resource_created
    ON run_snapshots (agent_id, thread_id, resource_id, created_at DESC, run_id DESC);
CREATE INDEX IF NOT EXISTS runs_stalled
    ON run_snapshots (pending_count, updated_at, run_id);
CREATE INDEX IF NOT EXISTS runs_expiring
    ON run_snapshots (expires_at, run_id) WHERE expires_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS runs_agent_expiring
    ON run_snapshots (agent_id, expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS run_histories (
    history_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS run_events (
    event_id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    thread_id TEXT,
    resource_id TEXT,
    scope INTEGER NOT NULL,
    type TEXT NOT NULL,
    at INTEGER NOT NULL,
    by TEXT,
    data TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS events_agent_run_at ON run_events (agent_id, run_id, at, event_id);
CREATE INDEX IF NOT EXISTS events_agent_order ON run_events (agent_id, event_id);
CREATE TABLE IF NOT EXISTS idempotency_keys (
    key_id TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    result TEXT,
    created_at INTEGER NOT NULL,
    reserved_by TEXT,
    reserved_until INTEGER
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS webhook_cursors (
    cursor_id TEXT PRIMARY KEY,
    event_id TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS webhook_deliveries (
    delivery_id TEXT PRIMARY KEY,
    endpoint_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    resource_id TEXT,
    type TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    last_attempt_at INTEGER,
    last_status_code INTEGER,
    last_error TEXT,
    finished_at INTEGER,
    lease_by TEXT,
    lease_until INTEGER
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS deliveries_due ON webhook_deliveries (status, next_attempt_at);
CREATE INDEX IF NOT EXISTS deliveries_status_order ON webhook_deliveries (status, delivery_id);
CREATE TABLE IF NOT EXISTS run_updates (
    agent_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    at INTEGER NOT NULL,
    updates TEXT NOT NULL,
    PRIMARY KEY (agent_id, run_id, batch_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS updates_written ON run_updates (at);
"""

_LEASE_COLUMNS = {"reserved_by": "TEXT", "reserved_until": "INTEGER"}
"""Columns of ``idempotency_keys`` added after its first version; ``open()`` adds them to older files."""

LISTING_INDEXES = (
    "runs_agent_created",
    "runs_agent_thread_created",
    "runs_agent_resource_created",
    "runs_agent_thread_resource_created",
)
"""The listing indexes, one per filter combination (``explain_listing`` shows which one a page uses)."""

_TABLE_NAMES = (
    "runsgate_meta",
    "run_snapshots",
    "run_histories",
    "run_events",
    "idempotency_keys",
    "webhook_cursors",
    "webhook_deliveries",
    "run_updates",
)

_COLUMNS = (
    "run_id, agent_id, thread_id, resource_id, parent_run_id, status, created_at, suspended_at, updated_at, "
    "tool_calls, pending_count, version, claim_by, claim_until, last_error, schema_version, history_id, expires_at"
)
_INSERT_RUN = f"INSERT INTO run_snapshots ({_COLUMNS}) VALUES ({', '.join('?' * 18)})"
_EVENT_COLUMNS = "event_id, agent_id, run_id, thread_id, resource_id, scope, type, at, by, data"
_HAS_THREAD, _HAS_RESOURCE = 1, 2
"""Bits of ``run_events.scope``: which of the optional keys the stored event had."""
_HELD = "run_id = ? AND agent_id = ? AND status = 'resuming' AND claim_by = ?"

Row = sqlite3.Row | tuple[Any, ...]

_DELIVERY_COLUMNS = (
    "delivery_id, endpoint_id, event_id, agent_id, run_id, resource_id, type, body, status, attempts, "
    "created_at, next_attempt_at, last_attempt_at, last_status_code, last_error, finished_at, lease_by, lease_until"
)


def _ms(value: datetime) -> int:
    """Aware ``value`` as integer UTC milliseconds since the epoch (sub-millisecond part dropped)."""
    return (to_bson_precision(value) - _EPOCH) // _MS


def _datetime(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


_dumps = stored_json.dumps
"""JSON text of a stored value (``stored_json``: any key, big integers, lone surrogates kept)."""
_loads = stored_json.loads


def _calls_text(calls: Sequence[ToolCallDocument]) -> str:
    stored: list[dict[str, Any]] = []
    for call in calls:
        decision = call["decision"]
        encoded: dict[str, Any] = dict(call)
        if decision is not None:
            encoded["decision"] = {**decision, "decidedAt": _ms(decision["decidedAt"])}
        if "expiresAt" in call:
            encoded["expiresAt"] = _ms(call["expiresAt"])
        if "approvals" in call:
            encoded["approvals"] = [{**a, "decidedAt": _ms(a["decidedAt"])} for a in call["approvals"]]
        stored.append(encoded)
    return _dumps(stored)


def _calls(text: str) -> list[ToolCallDocument]:
    calls = _loads(text)
    for call in calls:
        decision = call["decision"]
        if decision is not None:
            decision["decidedAt"] = _datetime(decision["decidedAt"])
        if "expiresAt" in call:
            call["expiresAt"] = _datetime(call["expiresAt"])
        for approval in call.get("approvals") or ():
            approval["decidedAt"] = _datetime(approval["decidedAt"])
    return cast(list[ToolCallDocument], calls)


def _deadline_ms(calls: list[ToolCallDocument]) -> int | None:
    """``expires_at`` of a run with ``calls``: the earliest deadline of a pending call, in ms."""
    deadline = earliest_deadline(calls)
    return None if deadline is None else _ms(deadline)


def _error_text(error: RunErrorDocument | None) -> str | None:
    return None if error is None else _dumps({**error, "at": _ms(error["at"])})


def _error(text: str | None) -> RunErrorDocument | None:
    if text is None:
        return None
    error = _loads(text)
    error["at"] = _datetime(error["at"])
    return cast(RunErrorDocument, error)


def _run_row(doc: SnapshotDocument) -> tuple[Any, ...]:
    claim = doc["claim"]
    return (
        doc["_id"],
        doc["agentId"],
        doc["threadId"],
        doc["resourceId"],
        doc["parentRunId"],
        doc["status"],
        _ms(doc["createdAt"]),
        _ms(doc["suspendedAt"]),
        _ms(doc["updatedAt"]),
        _calls_text(doc["toolCalls"]),
        doc["pendingCount"],
        doc["version"],
        None if claim is None else claim["by"],
        None if claim is None else _ms(claim["until"]),
        _error_text(doc["lastError"]),
        doc["schemaVersion"],
        doc["historyId"],
        _deadline_ms(doc["toolCalls"]),
    )


def _snapshot(row: Row) -> SnapshotDocument:
    claim: ClaimDocument | None = None if row[12] is None else {"by": row[12], "until": _datetime(row[13])}
    doc: SnapshotDocument = {
        "_id": row[0],
        "agentId": row[1],
        "threadId": row[2],
        "resourceId": row[3],
        "parentRunId": row[4],
        "status": row[5],
        "createdAt": _datetime(row[6]),
        "suspendedAt": _datetime(row[7]),
        "updatedAt": _datetime(row[8]),
        "toolCalls": _calls(row[9]),
        "pendingCount": row[10],
        "version": row[11],
        "claim": claim,
        "lastError": _error(row[14]),
        "schemaVersion": row[15],
        "historyId": row[16],
    }
    if row[17] is not None:
        doc["expiresAt"] = _datetime(row[17])
    return doc


def _event_row(event: EventDocument) -> tuple[Any, ...]:
    scope = (_HAS_THREAD if "threadId" in event else 0) | (_HAS_RESOURCE if "resourceId" in event else 0)
    return (
        event["_id"],
        event["agentId"],
        event["runId"],
        event.get("threadId"),
        event.get("resourceId"),
        scope,
        event["type"],
        _ms(event["at"]),
        event["by"],
        _dumps(event["data"]),
    )


def _event(row: Row) -> EventDocument:
    event: EventDocument = {
        "_id": row[0],
        "runId": row[2],
        "agentId": row[1],
        "type": row[6],
        "at": _datetime(row[7]),
        "by": row[8],
        "data": _loads(row[9]),
    }
    if row[5] & _HAS_THREAD:
        event["threadId"] = row[3]
    if row[5] & _HAS_RESOURCE:
        event["resourceId"] = row[4]
    return event


def _optional_ms(value: datetime | None) -> int | None:
    return None if value is None else _ms(value)


def _optional_datetime(ms: int | None) -> datetime | None:
    return None if ms is None else _datetime(ms)


def _delivery_row(doc: WebhookDeliveryDocument) -> tuple[Any, ...]:
    lease = doc["lease"]
    return (
        doc["_id"],
        doc["endpointId"],
        doc["eventId"],
        doc["agentId"],
        doc["runId"],
        doc["resourceId"],
        doc["type"],
        doc["body"],
        doc["status"],
        doc["attempts"],
        _ms(doc["createdAt"]),
        _ms(doc["nextAttemptAt"]),
        _optional_ms(doc["lastAttemptAt"]),
        doc["lastStatusCode"],
        doc["lastError"],
        _optional_ms(doc["finishedAt"]),
        None if lease is None else lease["by"],
        None if lease is None else _ms(lease["until"]),
    )


def _delivery(row: Row) -> WebhookDeliveryDocument:
    return {
        "_id": row[0],
        "endpointId": row[1],
        "eventId": row[2],
        "agentId": row[3],
        "runId": row[4],
        "resourceId": row[5],
        "type": row[6],
        "body": row[7],
        "status": row[8],
        "attempts": row[9],
        "createdAt": _datetime(row[10]),
        "nextAttemptAt": _datetime(row[11]),
        "lastAttemptAt": _optional_datetime(row[12]),
        "lastStatusCode": row[13],
        "lastError": row[14],
        "finishedAt": _optional_datetime(row[15]),
        "lease": None if row[16] is None else {"by": row[16], "until": _datetime(row[17])},
    }


def _marks(count: int) -> str:
    return ", ".join("?" * count)


def listing_where(agent_id: str, run_filter: RunFilter) -> tuple[str, list[Any]]:
    """The ``WHERE`` clause and parameters of a listing: equality columns first, then the
    inclusive ``created_at`` range (the same conditions as ``mongo.listing_query``)."""
    f = normalized_filter(run_filter)
    clauses: list[str] = ["agent_id = ?"]
    params: list[Any] = [agent_id]
    if f.thread_id is not None:
        clauses.append("thread_id = ?")
        params.append(f.thread_id)
    if f.resource_id is not None:
        clauses.append("resource_id = ?")
        params.append(f.resource_id)
    if f.resource_ids is not None:  # access restriction, inside the query so pages and counts respect it
        allowed = sorted(f.resource_ids)
        clauses.append(f"resource_id IN ({_marks(len(allowed))})" if allowed else "0")
        params.extend(allowed)
    if f.from_date is not None:
        clauses.append("created_at >= ?")
        params.append(_ms(f.from_date))
    if f.to_date is not None:
        clauses.append("created_at <= ?")
        params.append(_ms(f.to_date))
    if f.expires_before is not None:
        clauses.append("expires_at < ?")
        params.append(_ms(f.expires_before))
    return " AND ".join(clauses), params


def _probe(path: Path) -> None:
    """Open and close ``path`` with SQLite (raises ``sqlite3.Error`` when it cannot be opened)."""
    sqlite3.connect(path).close()


@contextmanager
def _available(path: Path) -> Iterator[None]:
    """Turn SQLite's operational errors (locked, full, I/O, corrupt) into ``StoreUnavailableError``."""
    try:
        yield
    except sqlite3.IntegrityError:
        raise
    except sqlite3.DatabaseError as exc:
        raise StoreUnavailableError(f"the SQLite database {path} failed: {exc}") from exc


@dataclass(eq=False)
class _CommitGroup:
    """Writes sharing one ``BEGIN IMMEDIATE`` ... ``COMMIT`` (``SQLiteSnapshotStore._transaction``)."""

    done: asyncio.Future[None]
    """Resolved by the ``COMMIT``: ``None``, or the error every member gets."""
    members: int = 0
    """Writes whose body completed inside it (kept, each in its released savepoint)."""


class SQLiteSnapshotStore:
    """``SnapshotStore`` in one SQLite file (created if missing).

    Args:
        path: The database file; its directory must exist and be writable (SQLite creates the
            ``-wal`` and ``-shm`` files next to it).
        busy_timeout: Seconds a write waits for the write lock held by another process, and
            before that for this process's writer connection; then ``StoreUnavailableError``.
            Keep it below half ``RUNSGATE_SUBSCRIPTION_LOOKBACK`` (module docstring).
        synchronous: ``FULL`` (every commit fsynced) or ``NORMAL`` (a power loss may lose the
            last commits); see the module docstring.
    """

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
        except BaseException:
            await conn.close()
            raise
        return conn

    async def open(self) -> None:
        """Open the file (created if missing), switch it to WAL, create the tables, check the version.

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
                await self._prepare(self._writer)
                self._reader = await self._connect()
                await self._reader.execute_fetchall("PRAGMA query_only = 1")
        except sqlite3.Error as exc:  # connect() itself: a missing directory, a directory as path
            await self.close()
            raise StoreUnavailableError(self._open_problem(exc)) from exc
        except StoreUnavailableError as exc:
            await self.close()
            cause = exc.__cause__
            if isinstance(cause, sqlite3.Error):
                raise StoreUnavailableError(self._open_problem(cause)) from cause
            raise
        except BaseException:
            await self.close()
            raise

    def _open_problem(self, exc: sqlite3.Error) -> str:
        if getattr(exc, "sqlite_errorname", "") in {"SQLITE_NOTADB", "SQLITE_CORRUPT"}:
            return f"the SQLite database {self._path} is corrupt or not a SQLite database ({exc}); left unchanged"
        return f"cannot open or write the SQLite database {self._path}: {exc}"

    async def _prepare(self, conn: aiosqlite.Connection) -> None:
        try:
            await conn.execute("BEGIN IMMEDIATE")  # one process at a time creates the tables
            found = await self._stored_version(conn)
            if found is not None and found > SCHEMA_VERSION:
                raise NewerSchemaError(found, SCHEMA_VERSION)
            await self._add_missing_columns(conn)
            for statement in _TABLES.split(";"):
                if statement.strip():
                    await conn.execute(statement)
            # the file's version only grows: once this version opened it, an older runsgate refuses it
            await conn.execute(
                "INSERT INTO runsgate_meta (key, value) VALUES ('schema_version', ?) ON CONFLICT (key) DO UPDATE "
                "SET value = excluded.value WHERE CAST(value AS INTEGER) < CAST(excluded.value AS INTEGER)",
                (str(SCHEMA_VERSION),),
            )
            columns = {row[1] for row in await conn.execute_fetchall("PRAGMA table_info(idempotency_keys)")}
            for name, kind in _LEASE_COLUMNS.items():
                if name not in columns:
                    await conn.execute(f"ALTER TABLE idempotency_keys ADD COLUMN {name} {kind}")
            await conn.execute("COMMIT")
        except BaseException:
            with suppress(sqlite3.Error):  # unconditional, as in _transaction
                await conn.execute("ROLLBACK")
            raise
        # WAL outside the transaction (it cannot change inside one); it stays set in the file.
        await conn.execute_fetchall("PRAGMA journal_mode = WAL")

    @staticmethod
    async def _add_missing_columns(conn: aiosqlite.Connection) -> None:
        """Add the columns newer than a file's ``run_snapshots`` table (``expires_at``), before
        the indexes on them are created. Its runs were written without deadlines: ``NULL``."""
        columns = {row[1] for row in await conn.execute_fetchall("PRAGMA table_info(run_snapshots)")}
        if columns and "expires_at" not in columns:
            await conn.execute("ALTER TABLE run_snapshots ADD COLUMN expires_at INTEGER")

    async def _stored_version(self, conn: aiosqlite.Connection) -> int | None:
        """The file's ``schema_version``, ``None`` for a new file; refuses a file of another program."""
        tables = {row[0] for row in await conn.execute_fetchall("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "runsgate_meta" not in tables:
            if tables - set(_TABLE_NAMES):
                raise StoreUnavailableError(
                    f"the SQLite database {self._path} holds other tables and no runsgate metadata: "
                    "not a runsgate store (it was left unchanged)"
                )
            return None
        rows = list(await conn.execute_fetchall("SELECT value FROM runsgate_meta WHERE key = 'schema_version'"))
        return int(rows[0][0]) if rows else None

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

    # -- reading -------------------------------------------------------------------------------
    async def get(self, agent_id: str, run_id: str) -> SnapshotDocument | None:
        rows = await self._read(
            f"SELECT {_COLUMNS} FROM run_snapshots WHERE run_id = ? AND agent_id = ?", (run_id, agent_id)
        )
        return _snapshot(rows[0]) if rows else None

    async def get_many(self, run_ids: Sequence[str]) -> list[SnapshotDocument]:
        ids = list(dict.fromkeys(run_ids))
        if not ids:
            return []
        rows = await self._read(f"SELECT {_COLUMNS} FROM run_snapshots WHERE run_id IN ({_marks(len(ids))})", ids)
        return [_snapshot(row) for row in rows]

    async def list_runs(
        self,
        agent_id: str,
        run_filter: RunFilter,
        *,
        limit: int | None = None,
        skip: int = 0,
        after: SortKey | None = None,
        before: SortKey | None = None,
        from_end: bool = False,
    ) -> list[SnapshotDocument]:
        sql, params = self._listing_sql(agent_id, run_filter, limit=limit, skip=skip, after=after, before=before)
        if from_end:
            sql = sql.replace("created_at DESC, run_id DESC", "created_at ASC, run_id ASC")
        rows = await self._read(sql, params)
        docs = [_snapshot(row) for row in rows]
        if from_end:
            docs.reverse()
        return docs

    def _listing_sql(
        self,
        agent_id: str,
        run_filter: RunFilter,
        *,
        limit: int | None,
        skip: int = 0,
        after: SortKey | None = None,
        before: SortKey | None = None,
        columns: str = _COLUMNS,
    ) -> tuple[str, list[Any]]:
        where, params = listing_where(agent_id, run_filter)
        if after is not None:  # strictly after in listing order: older, or as old with a smaller id
            where += " AND (created_at, run_id) < (?, ?)"
            params += [_ms(after.created_at), after.run_id]
        if before is not None:
            where += " AND (created_at, run_id) > (?, ?)"
            params += [_ms(before.created_at), before.run_id]
        sql = f"SELECT {columns} FROM run_snapshots WHERE {where} ORDER BY created_at DESC, run_id DESC LIMIT ?"
        params.append(-1 if limit is None else limit)
        if skip:
            sql += " OFFSET ?"
            params.append(skip)
        return sql, params

    async def count_runs(self, agent_id: str, run_filter: RunFilter) -> int:
        where, params = listing_where(agent_id, run_filter)
        rows = await self._read(f"SELECT count(*) FROM run_snapshots WHERE {where}", params)
        return int(rows[0][0])

    async def load_history(self, agent_id: str, run_id: str) -> bytes | None:
        rows = await self._read(
            "SELECT h.data FROM run_snapshots AS s JOIN run_histories AS h ON h.history_id = s.history_id "
            "WHERE s.run_id = ? AND s.agent_id = ?",
            (run_id, agent_id),
        )
        if not rows:
            return None
        compressed: bytes = rows[0][0]
        if len(compressed) >= LARGE_HISTORY_BYTES // 8:
            return await asyncio.to_thread(zlib.decompress, compressed)
        return zlib.decompress(compressed)

    async def explain_listing(self, agent_id: str, run_filter: RunFilter, limit: int) -> list[str]:
        """SQLite's query plan of a listing page, one line per step (``EXPLAIN QUERY PLAN``)."""
        sql, params = self._listing_sql(agent_id, run_filter, limit=limit)
        return [str(row[3]) for row in await self._read("EXPLAIN QUERY PLAN " + sql, params)]

    # -- writing -------------------------------------------------------------------------------
    @staticmethod
    async def _compress(history: bytes) -> bytes:
        if len(history) >= LARGE_HISTORY_BYTES:
            return await asyncio.to_thread(zlib.compress, history, 6)
        return zlib.compress(history, 6)

    async def insert(
        self,
        snapshot: SnapshotDocument,
        history: bytes,
        *,
        event: EventDocument | Sequence[EventDocument] | None = None,
    ) -> None:
        await self._insert([(snapshot, history)], event)

    async def insert_many(self, snapshots: Sequence[tuple[SnapshotDocument, bytes]]) -> None:
        """Insert new runs and their histories in one transaction (all or none). A snapshot of a
        ``schemaVersion`` above ``SCHEMA_VERSION`` raises the file's version, so this runsgate's
        next ``open()`` refuses it (``NewerSchemaError``).

        Raises:
            DuplicateRunError: A run id is already stored or repeated (nothing inserted).
            StoreUnavailableError: The database failed (nothing inserted).
        """
        await self._insert(snapshots, None)

    async def _insert(
        self,
        snapshots: Sequence[tuple[SnapshotDocument, bytes]],
        event: EventDocument | Sequence[EventDocument] | None,
    ) -> None:
        if not snapshots:
            return
        newest = max(s["schemaVersion"] for s, _ in snapshots)
        runs = [_run_row(s) for s, _ in snapshots]
        histories = [(s["historyId"], s["_id"], await self._compress(h)) for s, h in snapshots]
        try:
            async with self._transaction() as conn:
                await conn.executemany(
                    "INSERT INTO run_histories (history_id, run_id, data) VALUES (?, ?, ?)", histories
                )
                await conn.executemany(_INSERT_RUN, runs)
                await self._append_in(conn, event)
                if newest > SCHEMA_VERSION:  # the file now holds a newer document: an older runsgate must refuse it
                    await conn.execute(
                        "UPDATE runsgate_meta SET value = ? "
                        "WHERE key = 'schema_version' AND CAST(value AS INTEGER) < ?",
                        (str(newest), newest),
                    )
        except sqlite3.IntegrityError as exc:
            ids = [s["_id"] for s, _ in snapshots]
            raise DuplicateRunError(f"a run with one of these ids is already stored: {ids[:5]}") from exc

    async def _update_returning(
        self, sql: str, params: Sequence[Any], event: EventDocument | Sequence[EventDocument] | None = None
    ) -> SnapshotDocument | None:
        """One conditional ``UPDATE``, and ``event`` (one, several in order, or none) appended in
        the same transaction when it matched."""
        async with self._transaction() as conn:
            rows = list(await conn.execute_fetchall(f"{sql} RETURNING {_COLUMNS}", params))
            if rows:
                await self._append_in(conn, event)
        return _snapshot(rows[0]) if rows else None

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
            await conn.execute(f"INSERT INTO run_events ({_EVENT_COLUMNS}) VALUES ({_marks(10)})", _event_row(one))

    async def record_decision(
        self,
        agent_id: str,
        run_id: str,
        *,
        index: int,
        tool_call_id: str,
        question_id: str | None = None,
        decision: DecisionDocument,
        now: datetime,
        event: EventDocument | None = None,
        preceding_events: Sequence[EventDocument] = (),
    ) -> SnapshotDocument | None:
        async with self._transaction() as conn:
            calls = await self._pending_calls(conn, agent_id, run_id, index, tool_call_id, question_id)
            if calls is None:
                return None
            calls[index]["decision"] = decision
            return await self._write_calls(conn, run_id, calls, 1, now, [*preceding_events, *event_list(event)])

    async def record_approval(
        self,
        agent_id: str,
        run_id: str,
        *,
        index: int,
        tool_call_id: str,
        question_id: str | None = None,
        approval: ApprovalDocument,
        approvals_before: int,
        decision: DecisionDocument | None,
        now: datetime,
        event: EventDocument | Sequence[EventDocument] | None = None,
    ) -> SnapshotDocument | None:
        async with self._transaction() as conn:
            calls = await self._pending_calls(conn, agent_id, run_id, index, tool_call_id, question_id)
            if calls is None or len(calls[index].get("approvals") or []) != approvals_before:
                return None
            call = calls[index]
            call["approvals"] = [*(call.get("approvals") or []), approval]
            if decision is not None:
                call["decision"] = decision
            return await self._write_calls(conn, run_id, calls, 0 if decision is None else 1, now, event_list(event))

    @staticmethod
    async def _pending_calls(
        conn: aiosqlite.Connection, agent_id: str, run_id: str, index: int, tool_call_id: str, question_id: str | None
    ) -> list[ToolCallDocument] | None:
        """The calls of the suspended run, read in the caller's transaction, when call ``index`` is
        still the undecided ``tool_call_id`` waiting on ``question_id`` (every decision's conditions)."""
        rows = list(
            await conn.execute_fetchall(
                "SELECT tool_calls FROM run_snapshots WHERE run_id = ? AND agent_id = ? AND status = 'suspended'",
                (run_id, agent_id),
            )
        )
        if not rows:
            return None
        calls = _calls(rows[0][0])
        if not 0 <= index < len(calls):
            return None
        call = calls[index]
        if call["toolCallId"] != tool_call_id or call.get("questionId") != question_id or call["decision"] is not None:
            return None
        return calls

    async def _write_calls(
        self,
        conn: aiosqlite.Connection,
        run_id: str,
        calls: list[ToolCallDocument],
        decided: int,
        now: datetime,
        events: Sequence[EventDocument],
    ) -> SnapshotDocument:
        """Write the run's changed ``calls`` (``decided`` more of them decided: its pending count and
        ``expires_at`` follow) and ``events``, in the caller's transaction."""
        updated = list(
            await conn.execute_fetchall(
                "UPDATE run_snapshots SET tool_calls = ?, pending_count = pending_count - ?, updated_at = ?, "
                f"expires_at = ?, version = version + 1 WHERE run_id = ? RETURNING {_COLUMNS}",
                (_calls_text(calls), decided, _ms(now), _deadline_ms(calls), run_id),
            )
        )
        await self._append_in(conn, events)
        return _snapshot(updated[0])

    async def claim(
        self,
        agent_id: str,
        run_id: str,
        *,
        by: str,
        until: datetime,
        now: datetime,
        events: Sequence[EventDocument] = (),
        version: int | None = None,
    ) -> SnapshotDocument | None:
        return await self._update_returning(
            "UPDATE run_snapshots SET status = 'resuming', claim_by = ?, claim_until = ?, updated_at = ?, "
            "version = version + 1 WHERE run_id = ? AND agent_id = ? AND ("
            "(status = 'suspended' AND pending_count = 0) OR (status = 'resuming' AND claim_until < ?)) "
            "AND (? IS NULL OR version = ?)",
            (by, _ms(until), _ms(now), run_id, agent_id, _ms(now), version, version),
            events,
        )

    async def renew_claim(self, agent_id: str, run_id: str, *, by: str, until: datetime) -> bool:
        async with self._transaction() as conn:
            rows = list(
                await conn.execute_fetchall(
                    f"UPDATE run_snapshots SET claim_until = ? WHERE {_HELD} RETURNING run_id",
                    (_ms(until), run_id, agent_id, by),
                )
            )
        return bool(rows)

    async def replace_claimed(
        self,
        agent_id: str,
        run_id: str,
        *,
        by: str,
        tool_calls: list[ToolCallDocument],
        history: bytes,
        history_id: str,
        now: datetime,
        event: EventDocument | Sequence[EventDocument] | None = None,
    ) -> SnapshotDocument | None:
        pending = sum(1 for c in tool_calls if c["decision"] is None)
        return await self._update_claimed_with_history(
            agent_id,
            run_id,
            by,
            "tool_calls = ?, pending_count = ?, status = 'suspended', claim_by = NULL, claim_until = NULL, "
            "last_error = NULL, suspended_at = ?, updated_at = ?, expires_at = ?",
            (_calls_text(tool_calls), pending, _ms(now), _ms(now), _deadline_ms(tool_calls)),
            history,
            history_id,
            event,
        )

    async def _update_claimed_with_history(
        self,
        agent_id: str,
        run_id: str,
        by: str,
        assignments: str,
        params: Sequence[Any],
        history: bytes,
        history_id: str,
        event: EventDocument | Sequence[EventDocument] | None,
    ) -> SnapshotDocument | None:
        """Set ``assignments`` and point the snapshot to a new history in one transaction, only
        while ``by`` holds the claim; the old history is deleted, and ``event`` appended, in the
        same transaction."""
        compressed = await self._compress(history)
        async with self._transaction() as conn:
            current = list(
                await conn.execute_fetchall(
                    f"SELECT history_id FROM run_snapshots WHERE {_HELD}", (run_id, agent_id, by)
                )
            )
            if not current:
                return None
            await conn.execute(
                "INSERT INTO run_histories (history_id, run_id, data) VALUES (?, ?, ?)",
                (history_id, run_id, compressed),
            )
            rows = list(
                await conn.execute_fetchall(
                    f"UPDATE run_snapshots SET {assignments}, history_id = ?, version = version + 1 "
                    f"WHERE run_id = ? RETURNING {_COLUMNS}",
                    (*params, history_id, run_id),
                )
            )
            await conn.execute("DELETE FROM run_histories WHERE history_id = ?", (current[0][0],))
            await self._append_in(conn, event)
        return _snapshot(rows[0])

    async def delete_claimed(self, agent_id: str, run_id: str, *, by: str, event: EventDocument | None = None) -> bool:
        async with self._transaction() as conn:
            rows = list(
                await conn.execute_fetchall(
                    f"DELETE FROM run_snapshots WHERE {_HELD} RETURNING history_id", (run_id, agent_id, by)
                )
            )
            if rows:
                await conn.execute("DELETE FROM run_histories WHERE history_id = ?", (rows[0][0],))
                await self._append_in(conn, event)
        return bool(rows)

    async def release_claim(
        self,
        agent_id: str,
        run_id: str,
        *,
        by: str,
        error: RunErrorDocument,
        now: datetime,
        history: bytes | None = None,
        history_id: str | None = None,
        event: EventDocument | None = None,
    ) -> SnapshotDocument | None:
        assignments = "status = 'suspended', claim_by = NULL, claim_until = NULL, last_error = ?, updated_at = ?"
        params = (_error_text(error), _ms(now))
        if history is None:
            return await self._update_returning(
                f"UPDATE run_snapshots SET {assignments}, version = version + 1 WHERE {_HELD}",
                (*params, run_id, agent_id, by),
                event,
            )
        if history_id is None:
            raise ValueError("a new history needs a new history_id")
        return await self._update_claimed_with_history(
            agent_id, run_id, by, assignments, params, history, history_id, event
        )

    async def list_stalled_runs(self, *, now: datetime, idle_before: datetime, limit: int) -> list[SnapshotDocument]:
        rows = await self._read(
            f"SELECT {_COLUMNS} FROM run_snapshots WHERE pending_count = 0 AND ("
            "(status = 'resuming' AND claim_until < ?) "
            "OR (status = 'suspended' AND last_error IS NULL AND updated_at < ?)) "
            "ORDER BY updated_at, run_id LIMIT ?",
            (_ms(now), _ms(idle_before), limit),
        )
        return [_snapshot(row) for row in rows]

    async def list_expired_runs(self, *, now: datetime, limit: int) -> list[SnapshotDocument]:
        rows = await self._read(
            f"SELECT {_COLUMNS} FROM run_snapshots WHERE expires_at <= ? ORDER BY expires_at, run_id LIMIT ?",
            (_ms(now), limit),
        )
        return [_snapshot(row) for row in rows]

    async def explain_expired_runs(self, *, now: datetime, limit: int) -> list[str]:
        """SQLite's query plan of ``list_expired_runs`` (``EXPLAIN QUERY PLAN``), one line per step."""
        rows = await self._read(
            f"EXPLAIN QUERY PLAN SELECT {_COLUMNS} FROM run_snapshots WHERE expires_at <= ? "
            "ORDER BY expires_at, run_id LIMIT ?",
            (_ms(now), limit),
        )
        return [str(row[3]) for row in rows]

    # -- audit log -----------------------------------------------------------------------------
    async def append_event(self, event: EventDocument) -> None:
        row = _event_row(event)
        async with self._transaction() as conn:
            await conn.execute(f"INSERT INTO run_events ({_EVENT_COLUMNS}) VALUES ({_marks(10)})", row)

    async def complete_pending_events(self, *, before: datetime, limit: int) -> int:
        """Nothing is ever pending: a change and its event are written at once."""
        return 0

    async def list_events(self, agent_id: str, run_id: str) -> list[EventDocument]:
        return await self.list_events_of_runs(agent_id, [run_id])

    async def list_events_of_runs(
        self, agent_id: str, run_ids: Sequence[str], *, resource_ids: frozenset[str] | None = None
    ) -> list[EventDocument]:
        ids = list(dict.fromkeys(run_ids))
        if not ids:
            return []
        sql = f"SELECT {_EVENT_COLUMNS} FROM run_events WHERE agent_id = ? AND run_id IN ({_marks(len(ids))})"
        params: list[Any] = [agent_id, *ids]
        if resource_ids is not None:
            allowed = sorted(resource_ids)
            sql += f" AND resource_id IN ({_marks(len(allowed))})" if allowed else " AND 0"
            params += allowed
        rows = await self._read(sql + " ORDER BY at, event_id", params)
        return [_event(row) for row in rows]

    async def list_events_after(
        self, agent_id: str, after_event_id: str | None, limit: int, *, resource_ids: frozenset[str] | None = None
    ) -> list[EventDocument]:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        sql = f"SELECT {_EVENT_COLUMNS} FROM run_events WHERE agent_id = ?"
        params: list[Any] = [agent_id]
        if after_event_id is not None:
            sql += " AND event_id > ?"
            params.append(after_event_id)
        if resource_ids is not None:
            allowed = sorted(resource_ids)
            sql += f" AND resource_id IN ({_marks(len(allowed))})" if allowed else " AND 0"
            params += allowed
        rows = await self._read(sql + " ORDER BY event_id LIMIT ?", [*params, limit])
        return [_event(row) for row in rows]

    # -- idempotency ---------------------------------------------------------------------------
    async def reserve_idempotency_key(
        self,
        key_id: str,
        fingerprint: str,
        now: datetime,
        *,
        by: str | None = None,
        until: datetime | None = None,
    ) -> IdempotencyDocument | None:
        lease = None if until is None else _ms(until)
        async with self._transaction() as conn:
            rows = list(
                await conn.execute_fetchall(
                    "SELECT key_id, fingerprint, result, created_at, reserved_by, reserved_until "
                    "FROM idempotency_keys WHERE key_id = ?",
                    (key_id,),
                )
            )
            if not rows:
                await conn.execute(
                    "INSERT INTO idempotency_keys (key_id, fingerprint, result, created_at, reserved_by, "
                    "reserved_until) VALUES (?, ?, NULL, ?, ?, ?)",
                    (key_id, fingerprint, _ms(now), by, lease),
                )
                return None
            row = rows[0]
            if row[2] is None and row[1] == fingerprint and row[5] is not None and row[5] < _ms(now):
                # The holder's lease lapsed: take the key over (this transaction holds the write lock).
                await conn.execute(
                    "UPDATE idempotency_keys SET reserved_by = ?, reserved_until = ? WHERE key_id = ?",
                    (by, lease, key_id),
                )
                return None
        return {
            "_id": row[0],
            "fingerprint": row[1],
            "result": None if row[2] is None else _loads(row[2]),
            "createdAt": _datetime(row[3]),
            "reservedBy": row[4],
            "reservedUntil": None if row[5] is None else _datetime(row[5]),
        }

    @staticmethod
    def _held_key(by: str | None) -> tuple[str, tuple[Any, ...]]:
        """The condition of a reservation still held (by ``by`` unless ``None``)."""
        if by is None:
            return "key_id = ? AND result IS NULL", ()
        return "key_id = ? AND result IS NULL AND reserved_by = ?", (by,)

    async def renew_idempotency_key(self, key_id: str, *, by: str, until: datetime) -> bool:
        where, extra = self._held_key(by)
        async with self._transaction() as conn:
            rows = list(
                await conn.execute_fetchall(
                    f"UPDATE idempotency_keys SET reserved_until = ? WHERE {where} RETURNING key_id",
                    (_ms(until), key_id, *extra),
                )
            )
        return bool(rows)

    async def complete_idempotency_key(self, key_id: str, result: dict[str, Any], *, by: str | None = None) -> None:
        text = _dumps(result)
        where, extra = self._held_key(by)
        async with self._transaction() as conn:
            await conn.execute(f"UPDATE idempotency_keys SET result = ? WHERE {where}", (text, key_id, *extra))

    async def release_idempotency_key(self, key_id: str, *, by: str | None = None) -> None:
        where, extra = self._held_key(by)
        async with self._transaction() as conn:
            await conn.execute(f"DELETE FROM idempotency_keys WHERE {where}", (key_id, *extra))

    # -- webhook deliveries --------------------------------------------------------------------
    async def webhook_cursor(self, cursor_id: str) -> str | None:
        rows = await self._read("SELECT event_id FROM webhook_cursors WHERE cursor_id = ?", (cursor_id,))
        return str(rows[0][0]) if rows else None

    async def advance_webhook_cursor(self, cursor_id: str, event_id: str) -> None:
        async with self._transaction() as conn:
            await conn.execute(
                "INSERT INTO webhook_cursors (cursor_id, event_id) VALUES (?, ?) "
                "ON CONFLICT (cursor_id) DO UPDATE SET event_id = excluded.event_id "
                "WHERE excluded.event_id > webhook_cursors.event_id",
                (cursor_id, event_id),
            )

    async def add_webhook_deliveries(self, deliveries: Sequence[WebhookDeliveryDocument]) -> int:
        if not deliveries:
            return 0
        async with self._transaction() as conn:
            added = 0
            for delivery in deliveries:
                cursor = await conn.execute(
                    f"INSERT OR IGNORE INTO webhook_deliveries ({_DELIVERY_COLUMNS}) VALUES ({_marks(18)})",
                    _delivery_row(delivery),
                )
                added += max(cursor.rowcount, 0)
        return added

    async def claim_webhook_deliveries(
        self,
        *,
        by: str,
        until: datetime,
        now: datetime,
        limit: int,
        endpoint_id: str | None = None,
        other_than: Collection[str] = (),
    ) -> list[WebhookDeliveryDocument]:
        which = ""
        params: list[Any] = [by, _ms(until), _ms(now), _ms(now)]
        if endpoint_id is not None:
            which += " AND endpoint_id = ?"
            params.append(endpoint_id)
        if other_than:
            which += f" AND endpoint_id NOT IN ({', '.join('?' * len(other_than))})"
            params.extend(other_than)
        async with self._transaction() as conn:  # BEGIN IMMEDIATE: the select and the lease are one step
            rows = list(
                await conn.execute_fetchall(
                    "UPDATE webhook_deliveries SET lease_by = ?, lease_until = ? WHERE delivery_id IN ("
                    "SELECT delivery_id FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ? "
                    f"AND (lease_until IS NULL OR lease_until < ?){which} ORDER BY next_attempt_at, delivery_id "
                    f"LIMIT ?) RETURNING {_DELIVERY_COLUMNS}",
                    (*params, limit),
                )
            )
        docs = [_delivery(row) for row in rows]
        docs.sort(key=lambda d: (d["nextAttemptAt"], d["_id"]))
        return docs

    async def finish_webhook_attempt(
        self,
        delivery_id: str,
        *,
        by: str,
        status: WebhookDeliveryStatus,
        at: datetime,
        next_attempt_at: datetime,
        status_code: int | None,
        error: str | None,
    ) -> bool:
        async with self._transaction() as conn:
            rows = list(
                await conn.execute_fetchall(
                    "UPDATE webhook_deliveries SET status = ?, attempts = attempts + 1, last_attempt_at = ?, "
                    "next_attempt_at = ?, last_status_code = ?, last_error = ?, finished_at = ?, "
                    "lease_by = NULL, lease_until = NULL "
                    "WHERE delivery_id = ? AND status = 'pending' AND lease_by = ? RETURNING delivery_id",
                    (
                        status,
                        _ms(at),
                        _ms(next_attempt_at),
                        status_code,
                        error,
                        None if status == "pending" else _ms(at),
                        delivery_id,
                        by,
                    ),
                )
            )
        return bool(rows)

    async def list_webhook_deliveries(
        self,
        *,
        status: WebhookDeliveryStatus | None,
        resource_ids: frozenset[str] | None,
        limit: int,
        after: str | None = None,
    ) -> list[WebhookDeliveryDocument]:
        clauses: list[str] = []
        params: list[Any] = []
        if status is not None:
            clauses.append("status = ?")
            params.append(status)
        if after is not None:
            clauses.append("delivery_id < ?")
            params.append(after)
        if resource_ids is not None:
            allowed = sorted(resource_ids)
            clauses.append(f"resource_id IN ({_marks(len(allowed))})" if allowed else "0")
            params += allowed
        where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
        rows = await self._read(
            f"SELECT {_DELIVERY_COLUMNS} FROM webhook_deliveries {where}ORDER BY delivery_id DESC LIMIT ?",
            [*params, limit],
        )
        return [_delivery(row) for row in rows]

    # -- run updates ---------------------------------------------------------------------------
    async def append_run_updates(self, batch: RunUpdateBatchDocument) -> None:
        async with self._transaction() as conn:
            await conn.execute(
                "INSERT INTO run_updates (agent_id, run_id, batch_id, at, updates) VALUES (?, ?, ?, ?, ?)",
                (batch["agentId"], batch["runId"], batch["_id"], _ms(batch["at"]), batch["updates"]),
            )

    async def list_run_updates(
        self, agent_id: str, run_id: str, *, after: str | None, limit: int
    ) -> list[RunUpdateBatchDocument]:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        sql = "SELECT batch_id, at, updates FROM run_updates WHERE agent_id = ? AND run_id = ?"
        params: list[Any] = [agent_id, run_id]
        if after is not None:
            sql += " AND batch_id > ?"
            params.append(after)
        rows = await self._read(sql + " ORDER BY batch_id LIMIT ?", [*params, limit])
        return [
            {"_id": row[0], "agentId": agent_id, "runId": run_id, "at": _datetime(row[1]), "updates": row[2]}
            for row in rows
        ]

    async def prune_run_updates(self, *, before: datetime, limit: int) -> int:
        async with self._transaction() as conn:
            cursor = await conn.execute(
                "DELETE FROM run_updates WHERE (agent_id, run_id, batch_id) IN "
                "(SELECT agent_id, run_id, batch_id FROM run_updates WHERE at < ? ORDER BY at LIMIT ?)",
                (_ms(before), limit),
            )
            return max(cursor.rowcount, 0)

    # -- administration ------------------------------------------------------------------------
    async def drop_all(self) -> None:
        """Delete every run, history, event, idempotency key, webhook delivery and run update (tests and
        ``runsgate seed --reset``); the tables and the schema version stay."""
        async with self._transaction() as conn:
            for table in (
                "run_snapshots",
                "run_histories",
                "run_events",
                "idempotency_keys",
                "webhook_cursors",
                "webhook_deliveries",
                "run_updates",
            ):
                await conn.execute(f"DELETE FROM {table}")


__all__ = ["DEFAULT_BUSY_TIMEOUT", "LISTING_INDEXES", "SQLiteSnapshotStore", "listing_where"]
