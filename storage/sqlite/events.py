"""The SQLite store's audit log (``EventLog``) in ``run_events``: appended alone or with the
state change it records (``_Connection._append_in``), read per run or in id order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from .. import rules
from ..documents import EventDocument
from ..protocol.events import EVENT_OVERHEAD_BYTES
from ..protocol.filters import EventsAfter
from .conditions import Column, where
from .connection import _Connection
from .rows import _EVENT_COLUMNS, _INSERT_EVENT, _event, _event_row, _marks, _ms

EVENT_COLUMNS: dict[str, Column] = {
    "_id": Column("event_id", "text"),
    "agentId": Column("agent_id", "text"),
    "runId": Column("run_id", "text"),
    "type": Column("type", "text"),
    "at": Column("at", "ms"),
    "retentionFrom": Column("retention_from", "ms"),
}
"""The ``run_events`` columns the rules name (``rules.events_expired``), by document path."""


def _row_size(row: Any) -> int:
    """``event_size`` of a ``run_events`` row, from its text (the stored ``data`` is the JSON
    ``event_size`` counts), without decoding it."""
    size = EVENT_OVERHEAD_BYTES + len(row[9])
    for index in (2, 3, 4, 8):  # runId, threadId, resourceId, by
        if isinstance(row[index], str):
            size += len(row[index])
    return size


class _Events(_Connection):
    """``EventLog`` on ``run_events``."""

    async def append_event(self, event: EventDocument) -> None:
        row = _event_row(event)
        await self._write(lambda db: db.execute(_INSERT_EVENT, row))

    async def complete_pending_events(self, *, before: datetime, limit: int) -> int:
        """Nothing is ever pending: a change and its event are written at once."""
        return 0

    async def list_expired_events(self, *, before: datetime, limit: int) -> list[tuple[str, str]]:
        rows = await self._read(*self._expired_events_sql(before, limit))
        return list(dict.fromkeys((row[0], row[1]) for row in rows))

    async def explain_expired_events(self, *, before: datetime, limit: int) -> list[str]:
        """SQLite's query plan of ``list_expired_events`` (``EXPLAIN QUERY PLAN``)."""
        return await self._explain(*self._expired_events_sql(before, limit))

    @staticmethod
    def _expired_events_sql(before: datetime, limit: int) -> tuple[str, list[Any]]:
        """The ``limit`` oldest expired events' runs through index ``events_retention`` (a run with
        several finishing events may come twice: at most ``limit`` runs)."""
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        sql, params = where(rules.events_expired(before), EVENT_COLUMNS)
        query = f"SELECT agent_id, run_id FROM run_events WHERE {sql} ORDER BY retention_from LIMIT ?"
        return query, [*params, limit]

    async def postpone_event_retention(self, until: Mapping[tuple[str, str], datetime]) -> None:
        if not until:
            return
        rows = [(_ms(date), agent_id, run_id) for (agent_id, run_id), date in until.items()]
        sql = (
            "UPDATE run_events SET retention_from = ? WHERE agent_id = ? AND run_id = ? AND retention_from IS NOT NULL"
        )
        await self._write(lambda db: db.executemany(sql, rows))

    async def delete_run_events(self, runs: Sequence[tuple[str, str]]) -> int:
        if not runs:
            return 0
        sql, rows = "DELETE FROM run_events WHERE agent_id = ? AND run_id = ?", list(dict.fromkeys(runs))
        # executemany's rowcount is the sum of its statements' deletions
        return await self._write(lambda db: max(db.executemany(sql, rows).rowcount, 0))

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

    async def list_events_after(self, query: EventsAfter) -> list[EventDocument]:
        agent_id, after_event_id, limit = query.agent_id, query.after_event_id, query.limit
        resource_ids, max_bytes = query.resource_ids, query.max_bytes
        sql = f"SELECT {_EVENT_COLUMNS} FROM run_events WHERE "
        params: list[Any] = []
        if agent_id is None:  # every agent's: the primary key's order
            sql += "1"
        else:
            sql += "agent_id = ?"
            params.append(agent_id)
        if after_event_id is not None:
            sql += " AND event_id > ?"
            params.append(after_event_id)
        if resource_ids is not None:
            allowed = sorted(resource_ids)
            sql += f" AND resource_id IN ({_marks(len(allowed))})" if allowed else " AND 0"
            params += allowed
        sql, params = sql + " ORDER BY event_id LIMIT ?", [*params, limit]
        if max_bytes is None:
            return [_event(row) for row in await self._read(sql, params)]
        return [_event(row) for row in await self._read_within(sql, params, _row_size, max_bytes)]
