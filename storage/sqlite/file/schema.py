"""The SQLite store's tables and indexes, and what ``open()`` does to a file: refuse another
program's or a newer runsgate's, add the columns an older file lacks, create what is missing
(docs/storage.md "SQLite")."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

import aiosqlite

from ...documents import SCHEMA_VERSION
from ...protocol import NewerSchemaError, StoreUnavailableError
from .. import counts, queue_counts
from .backfill import backfill

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
    expires_at INTEGER,
    started_by TEXT
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
CREATE INDEX IF NOT EXISTS runs_review_queue
    ON run_snapshots (expires_at, suspended_at, run_id) WHERE pending_count > 0 AND status = 'suspended';
CREATE INDEX IF NOT EXISTS runs_review_queue_thread
    ON run_snapshots (thread_id, expires_at, suspended_at, run_id) WHERE pending_count > 0 AND status = 'suspended';
CREATE INDEX IF NOT EXISTS runs_review_queue_resource
    ON run_snapshots (resource_id, expires_at, suspended_at, run_id) WHERE pending_count > 0 AND status = 'suspended';
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
    data TEXT NOT NULL,
    retention_from INTEGER
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS events_agent_run_at ON run_events (agent_id, run_id, at, event_id);
CREATE INDEX IF NOT EXISTS events_agent_order ON run_events (agent_id, event_id);
CREATE INDEX IF NOT EXISTS events_retention
    ON run_events (retention_from, agent_id, run_id) WHERE retention_from IS NOT NULL;
CREATE TABLE IF NOT EXISTS idempotency_keys (
    key_id TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    result TEXT,
    created_at INTEGER NOT NULL,
    reserved_by TEXT,
    reserved_until INTEGER,
    finished_at INTEGER
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
CREATE INDEX IF NOT EXISTS deliveries_finished ON webhook_deliveries (finished_at) WHERE finished_at IS NOT NULL;
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
    "run_counts",
    "review_counts",
)

_DATA_TABLES = _TABLE_NAMES[1:]
"""The tables ``drop_all`` empties (all but ``runsgate_meta``)."""


def _probe(path: Path) -> None:
    """Open and close ``path`` with SQLite (raises ``sqlite3.Error`` when it cannot be opened)."""
    sqlite3.connect(path).close()


class _available:
    """Turn SQLite's operational errors (locked, full, I/O, corrupt) raised in the ``with`` block
    into ``StoreUnavailableError``; ``sqlite3.IntegrityError`` and anything else pass through.
    A class rather than a ``contextmanager`` generator: every write and read enters one or more."""

    __slots__ = ("_path",)

    def __init__(self, path: Path) -> None:
        self._path = path

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.IntegrityError):
            raise StoreUnavailableError(f"the SQLite database {self._path} failed: {exc}") from exc


def _open_problem(path: Path, exc: sqlite3.Error) -> str:
    """The message of the ``StoreUnavailableError`` a file that failed to open raises."""
    if getattr(exc, "sqlite_errorname", "") in {"SQLITE_NOTADB", "SQLITE_CORRUPT"}:
        return f"the SQLite database {path} is corrupt or not a SQLite database ({exc}); left unchanged"
    return f"cannot open or write the SQLite database {path}: {exc}"


async def _prepare(conn: aiosqlite.Connection, path: Path, busy_timeout: float) -> None:
    """Create the missing tables, indexes and columns of the file ``path`` in one transaction,
    raise its ``schema_version`` to this runsgate's, apply its backfills (``backfill``), and
    switch it to WAL (``switch_to_wal``, waiting up to ``busy_timeout`` seconds).

    Raises:
        NewerSchemaError: The file was written by a newer runsgate (left unchanged).
        StoreUnavailableError: The file holds another program's tables (left unchanged).
    """
    try:
        await conn.execute("BEGIN IMMEDIATE")  # one process at a time creates the tables
        found = await _stored_version(conn, path)
        if found is not None and found > SCHEMA_VERSION:
            raise NewerSchemaError(found, SCHEMA_VERSION)
        await _add_missing_columns(conn)
        for statement in _TABLES.split(";"):
            if statement.strip():
                await conn.execute(statement)
        for statement in [*counts.statements(), *queue_counts.statements()]:  # triggers hold ";" of their own
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
        await backfill(conn, datetime.now(UTC))
        await conn.execute("COMMIT")
    except BaseException:
        with suppress(sqlite3.Error):  # unconditional: a cancelled await may leave its statement queued
            await conn.execute("ROLLBACK")
        raise
    # WAL outside the transaction (it cannot change inside one); it stays set in the file.
    await switch_to_wal(conn, busy_timeout)


async def switch_to_wal(conn: aiosqlite.Connection, busy_timeout: float) -> None:
    """``PRAGMA journal_mode = WAL``, retried for up to ``busy_timeout`` seconds while another
    connection holds the file's write lock: SQLite then fails the switch at once with
    ``SQLITE_BUSY`` without calling its busy handler (two processes opening a new file at once).

    Raises:
        sqlite3.OperationalError: The lock was still held after ``busy_timeout``, or another failure.
    """
    deadline = time.monotonic() + busy_timeout
    delay = 0.002
    while True:
        try:
            await conn.execute_fetchall("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = getattr(exc, "sqlite_errorname", "") in {"SQLITE_BUSY", "SQLITE_LOCKED"}
            if not busy or time.monotonic() + delay > deadline:
                raise
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.1)


async def _add_missing_columns(conn: aiosqlite.Connection) -> None:
    """Add the columns newer than a file's tables before the indexes on them are created:
    ``run_snapshots.expires_at`` (runs written without deadlines: ``NULL``) and
    ``run_events.retention_from`` (filled by ``backfill``), ``run_snapshots.started_by`` (runs
    written before schema version 5: ``NULL``, read as unknown)."""
    columns = {row[1] for row in await conn.execute_fetchall("PRAGMA table_info(run_snapshots)")}
    if columns and "expires_at" not in columns:
        await conn.execute("ALTER TABLE run_snapshots ADD COLUMN expires_at INTEGER")
    if columns and "started_by" not in columns:
        await conn.execute("ALTER TABLE run_snapshots ADD COLUMN started_by TEXT")
    columns = {row[1] for row in await conn.execute_fetchall("PRAGMA table_info(run_events)")}
    if columns and "retention_from" not in columns:
        await conn.execute("ALTER TABLE run_events ADD COLUMN retention_from INTEGER")


async def _stored_version(conn: aiosqlite.Connection, path: Path) -> int | None:
    """The file's ``schema_version``, ``None`` for a new file; refuses a file of another program."""
    tables = {row[0] for row in await conn.execute_fetchall("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "runsgate_meta" not in tables:
        if tables - set(_TABLE_NAMES):
            raise StoreUnavailableError(
                f"the SQLite database {path} holds other tables and no runsgate metadata: "
                "not a runsgate store (it was left unchanged)"
            )
        return None
    rows = list(await conn.execute_fetchall("SELECT value FROM runsgate_meta WHERE key = 'schema_version'"))
    return int(rows[0][0]) if rows else None
