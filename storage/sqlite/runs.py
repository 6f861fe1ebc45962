"""The SQLite store's runs, read and inserted: pages of one listing index, totals (kept counts,
``counts``), histories, inserts, and the sweeper's reads (``rules.stalled``, ``rules.expired``,
through ``conditions``)."""

from __future__ import annotations

import asyncio
import sqlite3
import zlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .. import rules
from .._query import normalized_filter
from ..documents import SCHEMA_VERSION, EventDocument, SnapshotDocument
from ..protocol import EVERY_RUN, DuplicateRunError, RunFilter, RunPage, SortKey
from ..protocol.writes import Events
from . import conditions
from .connection import LARGE_HISTORY_BYTES, _Connection
from .counts import kept_count_sql
from .rows import _COLUMNS, _INSERT_RUN, _marks, _ms, _run_row, _snapshot


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


class _Runs(_Connection):
    """``RunStore``'s reads, inserts and sweeper reads on ``run_snapshots`` and ``run_histories``."""

    async def get(self, agent_id: str, run_id: str) -> SnapshotDocument | None:
        rows = await self._read_point(
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
        self, agent_id: str, run_filter: RunFilter, window: RunPage = EVERY_RUN
    ) -> list[SnapshotDocument]:
        from_end = window.from_end
        sql, params = self._listing_sql(
            agent_id, run_filter, limit=window.limit, skip=window.skip, after=window.after, before=window.before
        )
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
        rows = await self._read(*self._count_sql(agent_id, run_filter))
        return int(rows[0][0])

    @staticmethod
    def _count_sql(agent_id: str, run_filter: RunFilter) -> tuple[str, list[Any]]:
        """The kept count's search (``counts``), or, for a filter with dates, a count of the
        listing index range (O(matches))."""
        kept = kept_count_sql(agent_id, run_filter)
        if kept is not None:
            return kept
        where, params = listing_where(agent_id, run_filter)
        return f"SELECT count(*) FROM run_snapshots WHERE {where}", params

    async def explain_count(self, agent_id: str, run_filter: RunFilter) -> list[str]:
        """SQLite's query plan of ``count_runs`` (``EXPLAIN QUERY PLAN``), one line per step."""
        return await self._explain(*self._count_sql(agent_id, run_filter))

    async def load_history(self, agent_id: str, run_id: str, *, history_id: str | None = None) -> bytes | None:
        """The run's history; right after this store's claiming write on the run, the one that
        write read in its transaction (``_keep_history``), with no read of its own."""
        compressed = self._kept_history(agent_id, run_id)
        if compressed is None:
            rows = await self._read(
                "SELECT h.data FROM run_snapshots AS s JOIN run_histories AS h ON h.history_id = s.history_id "
                "WHERE s.run_id = ? AND s.agent_id = ?",
                (run_id, agent_id),
            )
            if not rows:
                return None
            compressed = rows[0][0]
        if len(compressed) >= LARGE_HISTORY_BYTES // 8:
            return await asyncio.to_thread(zlib.decompress, compressed)
        return zlib.decompress(compressed)

    async def explain_listing(self, agent_id: str, run_filter: RunFilter, limit: int) -> list[str]:
        """SQLite's query plan of a listing page, one line per step (``EXPLAIN QUERY PLAN``)."""
        return await self._explain(*self._listing_sql(agent_id, run_filter, limit=limit))

    # -- inserting -----------------------------------------------------------------------------
    async def insert(self, snapshot: SnapshotDocument, history: bytes, *, event: Events = None) -> None:
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

            def write(db: sqlite3.Connection) -> None:
                db.executemany("INSERT INTO run_histories (history_id, run_id, data) VALUES (?, ?, ?)", histories)
                db.executemany(_INSERT_RUN, runs)
                self._append_in(db, event)
                if newest > SCHEMA_VERSION:  # the file now holds a newer document: an older runsgate must refuse it
                    db.execute(
                        "UPDATE runsgate_meta SET value = ? "
                        "WHERE key = 'schema_version' AND CAST(value AS INTEGER) < ?",
                        (str(newest), newest),
                    )

            await self._write(write)
        except sqlite3.IntegrityError as exc:
            ids = [s["_id"] for s, _ in snapshots]
            raise DuplicateRunError(f"a run with one of these ids is already stored: {ids[:5]}") from exc

    # -- the sweeper's reads -------------------------------------------------------------------
    async def list_stalled_runs(self, *, now: datetime, idle_before: datetime, limit: int) -> list[SnapshotDocument]:
        rows = await self._read(*self._stalled_sql(now, idle_before, limit))
        return [_snapshot(row) for row in rows]

    async def explain_stalled_runs(self, *, now: datetime, idle_before: datetime, limit: int) -> list[str]:
        """SQLite's query plan of ``list_stalled_runs`` (``EXPLAIN QUERY PLAN``), one line per step."""
        return await self._explain(*self._stalled_sql(now, idle_before, limit))

    @staticmethod
    def _stalled_sql(now: datetime, idle_before: datetime, limit: int) -> tuple[str, list[Any]]:
        sql, params = conditions.where(rules.stalled(now, idle_before))
        return f"SELECT {_COLUMNS} FROM run_snapshots WHERE {sql} ORDER BY updated_at, run_id LIMIT ?", [
            *params,
            limit,
        ]

    async def list_expired_runs(self, *, now: datetime, limit: int) -> list[SnapshotDocument]:
        rows = await self._read(*self._expired_sql(now, limit))
        return [_snapshot(row) for row in rows]

    async def explain_expired_runs(self, *, now: datetime, limit: int) -> list[str]:
        """SQLite's query plan of ``list_expired_runs`` (``EXPLAIN QUERY PLAN``), one line per step."""
        return await self._explain(*self._expired_sql(now, limit))

    @staticmethod
    def _expired_sql(now: datetime, limit: int) -> tuple[str, list[Any]]:
        sql, params = conditions.where(rules.expired(now))
        return f"SELECT {_COLUMNS} FROM run_snapshots WHERE {sql} ORDER BY expires_at, run_id LIMIT ?", [
            *params,
            limit,
        ]
