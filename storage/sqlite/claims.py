"""The SQLite store's claims: taking a run (``rules.claimable``) and every write of its
continuation while the claim is held (``rules.held``): renewal, rewrite, end and release, each
one transaction with its events."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .. import rules
from ..documents import EventDocument, RunErrorDocument, RunUpdateBatchDocument, SnapshotDocument, ToolCallDocument
from ..protocol import KeyAnswer
from . import conditions
from .connection import _Connection
from .idempotency import complete_key_in
from .rows import _COLUMNS, _calls_text, _deadline_ms, _error_text, _ms, _snapshot


def _held(agent_id: str, run_id: str, by: str) -> tuple[str, list[Any]]:
    """The ``WHERE`` fragment of ``rules.held`` and its parameters."""
    return conditions.where(rules.held(agent_id, run_id, by))


class _Claims(_Connection):
    """``RunStore``'s claims and the writes of a claimed run."""

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
        updates: Sequence[RunUpdateBatchDocument] = (),
    ) -> SnapshotDocument | None:
        sql, params = conditions.where(rules.all_of(rules.owned(agent_id, run_id), rules.claimable(now, version)))
        return await self._update_returning(
            "UPDATE run_snapshots SET status = 'resuming', claim_by = ?, claim_until = ?, updated_at = ?, "
            f"version = version + 1 WHERE {sql}",
            (by, _ms(until), _ms(now), *params),
            events,
            updates,
        )

    async def renew_claim(self, agent_id: str, run_id: str, *, by: str, until: datetime) -> bool:
        held, params = _held(agent_id, run_id, by)
        sql = f"UPDATE run_snapshots SET claim_until = ? WHERE {held} RETURNING run_id"
        rows = await self._write(lambda db: db.execute(sql, (_ms(until), *params)).fetchall())
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
        updates: Sequence[RunUpdateBatchDocument] = (),
    ) -> SnapshotDocument | None:
        return await self._update_claimed_with_history(
            agent_id,
            run_id,
            by,
            "tool_calls = ?, pending_count = ?, status = 'suspended', claim_by = NULL, claim_until = NULL, "
            "last_error = NULL, suspended_at = ?, updated_at = ?, expires_at = ?",
            (
                _calls_text(tool_calls),
                rules.pending_count(tool_calls),
                _ms(now),
                _ms(now),
                _deadline_ms(tool_calls),
            ),
            history,
            history_id,
            event,
            updates,
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
        updates: Sequence[RunUpdateBatchDocument] = (),
    ) -> SnapshotDocument | None:
        """Set ``assignments`` and point the snapshot to a new history in one transaction, only
        while ``by`` holds the claim; the old history is deleted, and ``event`` and ``updates``
        appended, in the same transaction."""
        compressed = await self._compress(history)
        held, held_params = _held(agent_id, run_id, by)

        def write(db: sqlite3.Connection) -> SnapshotDocument | None:
            current = db.execute(f"SELECT history_id FROM run_snapshots WHERE {held}", held_params).fetchall()
            if not current:
                return None
            db.execute(
                "INSERT INTO run_histories (history_id, run_id, data) VALUES (?, ?, ?)",
                (history_id, run_id, compressed),
            )
            rows = db.execute(
                f"UPDATE run_snapshots SET {assignments}, history_id = ?, version = version + 1 "
                f"WHERE run_id = ? RETURNING {_COLUMNS}",
                (*params, history_id, run_id),
            ).fetchall()
            db.execute("DELETE FROM run_histories WHERE history_id = ?", (current[0][0],))
            self._append_in(db, event)
            self._updates_in(db, updates)
            return _snapshot(rows[0])

        return await self._write(write)

    async def delete_claimed(
        self,
        agent_id: str,
        run_id: str,
        *,
        by: str,
        event: EventDocument | None = None,
        updates: Sequence[RunUpdateBatchDocument] = (),
        key: KeyAnswer | None = None,
    ) -> bool:
        held, params = _held(agent_id, run_id, by)

        def write(db: sqlite3.Connection) -> bool:
            rows = db.execute(f"DELETE FROM run_snapshots WHERE {held} RETURNING history_id", params).fetchall()
            if not rows:
                return False
            db.execute("DELETE FROM run_histories WHERE history_id = ?", (rows[0][0],))
            self._append_in(db, event)
            self._updates_in(db, updates)
            if key is not None:
                complete_key_in(db, key.key_id, key.result, by=key.by, now=key.now)
            return True

        return await self._write(write)

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
        updates: Sequence[RunUpdateBatchDocument] = (),
    ) -> SnapshotDocument | None:
        assignments = "status = 'suspended', claim_by = NULL, claim_until = NULL, last_error = ?, updated_at = ?"
        params = (_error_text(error), _ms(now))
        if history is None:
            held, held_params = _held(agent_id, run_id, by)
            return await self._update_returning(
                f"UPDATE run_snapshots SET {assignments}, version = version + 1 WHERE {held}",
                (*params, *held_params),
                event,
                updates,
            )
        if history_id is None:
            raise ValueError("a new history needs a new history_id")
        return await self._update_claimed_with_history(
            agent_id, run_id, by, assignments, params, history, history_id, event, updates
        )
