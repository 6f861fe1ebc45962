"""The SQLite store's claims: taking a run (``rules.claimable``) and every write of its
continuation while the claim is held (``rules.held``): renewal, rewrite, end and release, each
one transaction with its events."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from ..documents import SnapshotDocument
from ..protocol import ClaimedDeletion, ClaimedReplacement, ClaimRelease, ClaimRenewal, ClaimWrite
from . import conditions
from .connection import KEPT_HISTORY, _Connection
from .idempotency import complete_key_in
from .rows import _COLUMNS, Row, _calls_text, _error_text, _ms, _optional_ms, _snapshot


class _Claims(_Connection):
    """``RunStore``'s claims and the writes of a claimed run."""

    async def claim(self, write: ClaimWrite) -> SnapshotDocument | None:
        sql, params = conditions.where(write.condition)
        update = (
            "UPDATE run_snapshots SET status = 'resuming', claim_by = ?, claim_until = ?, updated_at = ?, "
            f"version = version + 1 WHERE {sql} RETURNING {_COLUMNS}, {KEPT_HISTORY}"
        )

        def write_in(db: sqlite3.Connection) -> tuple[Row | None, bytes | None]:
            rows = db.execute(update, (write.by, _ms(write.until), _ms(write.now), *params)).fetchall()
            if not rows:
                return None, None
            self._append_in(db, write.events)
            self._updates_in(db, write.updates)
            return rows[0], self._kept_in(rows[0])  # what the continuation loads next

        row, history = await self._write(write_in)
        if row is None:
            return None
        self._keep_history(write.agent_id, write.run_id, history, write.now, write.until)
        return _snapshot(row)

    async def renew_claim(self, write: ClaimRenewal) -> bool:
        held, params = conditions.where(write.condition)
        sql = f"UPDATE run_snapshots SET claim_until = ? WHERE {held} RETURNING run_id"
        rows = await self._write(lambda db: db.execute(sql, (_ms(write.until), *params)).fetchall())
        return bool(rows)

    async def replace_claimed(self, write: ClaimedReplacement) -> SnapshotDocument | None:
        now = _ms(write.now)
        return await self._update_claimed_with_history(
            write,
            "tool_calls = ?, pending_count = ?, status = 'suspended', claim_by = NULL, claim_until = NULL, "
            "last_error = NULL, suspended_at = ?, updated_at = ?, expires_at = ?",
            (_calls_text(write.tool_calls), write.pending_count, now, now, _optional_ms(write.expires_at)),
            write.history,
            write.history_id,
        )

    async def _update_claimed_with_history(
        self,
        write: ClaimedReplacement | ClaimRelease,
        assignments: str,
        params: Sequence[Any],
        history: bytes,
        history_id: str,
    ) -> SnapshotDocument | None:
        """Set ``assignments`` and point the snapshot to a new history in one transaction, only
        while ``write.by`` holds the claim; the old history is deleted, and ``write.event`` and
        ``write.updates`` appended, in the same transaction."""
        compressed = await self._compress(history)
        held, held_params = conditions.where(write.condition)
        self._forget_history(write.agent_id, write.run_id)

        def write_in(db: sqlite3.Connection) -> SnapshotDocument | None:
            current = db.execute(f"SELECT history_id FROM run_snapshots WHERE {held}", held_params).fetchall()
            if not current:
                return None
            db.execute(
                "INSERT INTO run_histories (history_id, run_id, data) VALUES (?, ?, ?)",
                (history_id, write.run_id, compressed),
            )
            rows = db.execute(
                f"UPDATE run_snapshots SET {assignments}, history_id = ?, version = version + 1 "
                f"WHERE run_id = ? RETURNING {_COLUMNS}",
                (*params, history_id, write.run_id),
            ).fetchall()
            db.execute("DELETE FROM run_histories WHERE history_id = ?", (current[0][0],))
            self._append_in(db, write.event)
            self._updates_in(db, write.updates)
            return _snapshot(rows[0])

        return await self._write(write_in)

    async def delete_claimed(self, write: ClaimedDeletion) -> bool:
        held, params = conditions.where(write.condition)
        self._forget_history(write.agent_id, write.run_id)

        def write_in(db: sqlite3.Connection) -> bool:
            rows = db.execute(f"DELETE FROM run_snapshots WHERE {held} RETURNING history_id", params).fetchall()
            if not rows:
                return False
            db.execute("DELETE FROM run_histories WHERE history_id = ?", (rows[0][0],))
            self._append_in(db, write.event)
            self._updates_in(db, write.updates)
            if write.key is not None:
                complete_key_in(db, write.key)
            return True

        return await self._write(write_in)

    async def release_claim(self, write: ClaimRelease) -> SnapshotDocument | None:
        assignments = "status = 'suspended', claim_by = NULL, claim_until = NULL, last_error = ?, updated_at = ?"
        params = (_error_text(write.error), _ms(write.now))
        if write.history is None or write.history_id is None:
            self._forget_history(write.agent_id, write.run_id)
            held, held_params = conditions.where(write.condition)
            return await self._update_returning(
                f"UPDATE run_snapshots SET {assignments}, version = version + 1 WHERE {held}",
                (*params, *held_params),
                write.event,
                write.updates,
            )
        return await self._update_claimed_with_history(write, assignments, params, write.history, write.history_id)
