"""The SQLite store's idempotency keys (``IdempotencyKeys``) in ``idempotency_keys``: a
reservation with its lease, taken over once the lease lapsed, then its answer (with
``finished_at``) or its release; answered keys expire through index ``keys_finished``."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from .. import rules
from ..documents import IdempotencyDocument
from ..protocol import KeyAnswer, KeyReservation
from .conditions import Column, oldest_expired
from .connection import _Connection
from .rows import _datetime, _dumps, _loads, _ms

KEY_COLUMNS: dict[str, Column] = {
    "_id": Column("key_id", "text"),
    "fingerprint": Column("fingerprint", "text"),
    "createdAt": Column("created_at", "ms"),
    "reservedBy": Column("reserved_by", "text"),
    "reservedUntil": Column("reserved_until", "ms"),
    "finishedAt": Column("finished_at", "ms"),
}
"""The ``IdempotencyDocument`` paths that are columns of ``idempotency_keys`` (for ``conditions.where``)."""


def _held_key(by: str | None) -> tuple[str, tuple[Any, ...]]:
    """The condition of a reservation still held (by ``by`` unless ``None``)."""
    if by is None:
        return "key_id = ? AND result IS NULL", ()
    return "key_id = ? AND result IS NULL AND reserved_by = ?", (by,)


def complete_key_in(db: sqlite3.Connection, answer: KeyAnswer) -> None:
    """``complete_idempotency_key`` inside the caller's transaction."""
    held, extra = _held_key(answer.by)
    db.execute(
        f"UPDATE idempotency_keys SET result = ?, finished_at = ? WHERE {held}",
        (_dumps(answer.result), _ms(answer.now), answer.key_id, *extra),
    )


_KEY_SELECT = (
    "SELECT key_id, fingerprint, result, created_at, reserved_by, reserved_until, finished_at "
    "FROM idempotency_keys WHERE key_id = ?"
)
"""A key's row, as ``_key_document`` reads it."""


def reserve_key_in(db: sqlite3.Connection, reservation: KeyReservation) -> IdempotencyDocument | None:
    """``reserve_idempotency_key`` inside the caller's transaction (which holds the write lock)."""
    key_id, fingerprint, now, by = reservation.key_id, reservation.fingerprint, reservation.now, reservation.by
    lease = None if reservation.until is None else _ms(reservation.until)
    rows = db.execute(_KEY_SELECT, (key_id,)).fetchall()
    if not rows:
        db.execute(
            "INSERT INTO idempotency_keys (key_id, fingerprint, result, created_at, reserved_by, "
            "reserved_until) VALUES (?, ?, NULL, ?, ?, ?)",
            (key_id, fingerprint, _ms(now), by, lease),
        )
        return None
    row = rows[0]
    if row[2] is None and row[1] == fingerprint and row[5] is not None and row[5] < _ms(now):
        # The holder's lease lapsed: take the key over.
        db.execute(
            "UPDATE idempotency_keys SET reserved_by = ?, reserved_until = ? WHERE key_id = ?",
            (by, lease, key_id),
        )
        return None
    return _key_document(row)


def _key_document(row: Any) -> IdempotencyDocument:
    """The ``IdempotencyDocument`` of a row of ``reserve_key_in``'s ``SELECT``."""
    found: IdempotencyDocument = {
        "_id": row[0],
        "fingerprint": row[1],
        "result": None if row[2] is None else _loads(row[2]),
        "createdAt": _datetime(row[3]),
        "reservedBy": row[4],
        "reservedUntil": None if row[5] is None else _datetime(row[5]),
    }
    if row[6] is not None:
        found["finishedAt"] = _datetime(row[6])
    return found


class _IdempotencyKeys(_Connection):
    """``IdempotencyKeys`` on ``idempotency_keys``."""

    reserves_with_decisions = True

    async def reserve_idempotency_key(self, reservation: KeyReservation) -> IdempotencyDocument | None:
        return await self._write(lambda db: reserve_key_in(db, reservation))

    async def get_idempotency_key(self, key_id: str) -> IdempotencyDocument | None:
        rows = await self._read(_KEY_SELECT, (key_id,))
        return _key_document(rows[0]) if rows else None

    async def renew_idempotency_key(self, key_id: str, *, by: str, until: datetime) -> bool:
        held, extra = _held_key(by)
        sql = f"UPDATE idempotency_keys SET reserved_until = ? WHERE {held} RETURNING key_id"
        rows = await self._write(lambda db: db.execute(sql, (_ms(until), key_id, *extra)).fetchall())
        return bool(rows)

    async def complete_idempotency_key(self, answer: KeyAnswer) -> None:
        await self._write(lambda db: complete_key_in(db, answer))

    async def release_idempotency_key(self, key_id: str, *, by: str | None = None) -> None:
        held, extra = _held_key(by)
        await self._write(lambda db: db.execute(f"DELETE FROM idempotency_keys WHERE {held}", (key_id, *extra)))

    async def delete_expired_idempotency_keys(self, *, before: datetime, limit: int) -> int:
        return await self._delete(*self._expired_keys_sql(before, limit))

    async def explain_expired_idempotency_keys(self, *, before: datetime, limit: int) -> list[str]:
        """SQLite's query plan of ``delete_expired_idempotency_keys`` (``EXPLAIN QUERY PLAN``)."""
        return await self._explain(*self._expired_keys_sql(before, limit))

    @staticmethod
    def _expired_keys_sql(before: datetime, limit: int) -> tuple[str, list[Any]]:
        return oldest_expired("idempotency_keys", "key_id", rules.key_expired(before), KEY_COLUMNS, limit)
