"""The SQLite store's run updates (``RunUpdateLog``) in ``run_updates``: batches of a continuing
run's progress, read in batch order and pruned by age."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..documents import RunUpdateBatchDocument
from .connection import _Connection
from .rows import _datetime, _ms


class _RunUpdates(_Connection):
    """``RunUpdateLog`` on ``run_updates``."""

    async def append_run_updates(self, batch: RunUpdateBatchDocument) -> None:
        await self._write(lambda db: self._updates_in(db, (batch,)))

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
        sql = (
            "DELETE FROM run_updates WHERE (agent_id, run_id, batch_id) IN "
            "(SELECT agent_id, run_id, batch_id FROM run_updates WHERE at < ? ORDER BY at LIMIT ?)"
        )
        return await self._delete(sql, (_ms(before), limit))
