"""The SQLite store's audit log (``EventLog``) in ``run_events``: appended alone or with the
state change it records (``_Connection._append_in``), read per run or in id order."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..documents import EventDocument
from .connection import _Connection
from .rows import _EVENT_COLUMNS, _event, _event_row, _marks


class _Events(_Connection):
    """``EventLog`` on ``run_events``."""

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
