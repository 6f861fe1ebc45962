"""The SQLite store's webhook deliveries (``WebhookDeliveries``): the cursors of the log's
derivation in ``webhook_cursors``, and the deliveries in ``webhook_deliveries``, leased to one
sender at a time and finished per attempt (``rules.finished_at``), deleted once expired
(``rules.delivery_expired``) through index ``deliveries_finished``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .. import rules
from ..documents import WebhookDeliveryDocument
from ..protocol import DeliveryLease, DeliveryListing, WebhookAttempt
from . import conditions
from .conditions import Column
from .connection import _Connection
from .rows import _DELIVERY_COLUMNS, _delivery, _delivery_row, _marks, _ms, _optional_ms

DELIVERY_COLUMNS: dict[str, Column] = {
    "_id": Column("delivery_id", "text"),
    "endpointId": Column("endpoint_id", "text"),
    "status": Column("status", "text"),
    "createdAt": Column("created_at", "ms"),
    "nextAttemptAt": Column("next_attempt_at", "ms"),
    "finishedAt": Column("finished_at", "ms"),
}
"""``WebhookDeliveryDocument`` paths that are columns of ``webhook_deliveries`` (for ``conditions.where``)."""


class _WebhookDeliveries(_Connection):
    """``WebhookDeliveries`` on ``webhook_cursors`` and ``webhook_deliveries``."""

    async def webhook_cursor(self, cursor_id: str) -> str | None:
        rows = await self._read("SELECT event_id FROM webhook_cursors WHERE cursor_id = ?", (cursor_id,))
        return str(rows[0][0]) if rows else None

    async def advance_webhook_cursor(self, cursor_id: str, event_id: str) -> None:
        sql = (
            "INSERT INTO webhook_cursors (cursor_id, event_id) VALUES (?, ?) "
            "ON CONFLICT (cursor_id) DO UPDATE SET event_id = excluded.event_id "
            "WHERE excluded.event_id > webhook_cursors.event_id"
        )
        await self._write(lambda db: db.execute(sql, (cursor_id, event_id)))

    async def add_webhook_deliveries(self, deliveries: Sequence[WebhookDeliveryDocument]) -> int:
        if not deliveries:
            return 0
        sql = f"INSERT OR IGNORE INTO webhook_deliveries ({_DELIVERY_COLUMNS}) VALUES ({_marks(18)})"
        rows = [_delivery_row(delivery) for delivery in deliveries]
        # executemany's rowcount is the sum of its statements' insertions (an ignored one adds 0)
        return await self._write(lambda db: max(db.executemany(sql, rows).rowcount, 0))

    async def claim_webhook_deliveries(self, lease: DeliveryLease) -> list[WebhookDeliveryDocument]:
        which = ""
        now = _ms(lease.now)
        params: list[Any] = [lease.by, _ms(lease.until), now, now]
        if lease.endpoint_id is not None:
            which += " AND endpoint_id = ?"
            params.append(lease.endpoint_id)
        if lease.other_than:
            which += f" AND endpoint_id NOT IN ({', '.join('?' * len(lease.other_than))})"
            params.extend(lease.other_than)
        sql = (
            "UPDATE webhook_deliveries SET lease_by = ?, lease_until = ? WHERE delivery_id IN ("
            "SELECT delivery_id FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ? "
            f"AND (lease_until IS NULL OR lease_until < ?){which} ORDER BY next_attempt_at, delivery_id "
            f"LIMIT ?) RETURNING {_DELIVERY_COLUMNS}"
        )
        # BEGIN IMMEDIATE: the select and the lease are one step
        rows = await self._write(lambda db: db.execute(sql, (*params, lease.limit)).fetchall())
        docs = [_delivery(row) for row in rows]
        docs.sort(key=lambda d: (d["nextAttemptAt"], d["_id"]))
        return docs

    async def finish_webhook_attempt(self, attempt: WebhookAttempt) -> bool:
        sql = (
            "UPDATE webhook_deliveries SET status = ?, attempts = attempts + 1, last_attempt_at = ?, "
            "next_attempt_at = ?, last_status_code = ?, last_error = ?, finished_at = ?, "
            "lease_by = NULL, lease_until = NULL "
            "WHERE delivery_id = ? AND status = 'pending' AND lease_by = ? RETURNING delivery_id"
        )
        params = (
            attempt.status,
            _ms(attempt.at),
            _ms(attempt.next_attempt_at),
            attempt.status_code,
            attempt.error,
            _optional_ms(attempt.finished_at()),
            attempt.delivery_id,
            attempt.by,
        )
        return bool(await self._write(lambda db: db.execute(sql, params).fetchall()))

    async def delete_expired_webhook_deliveries(self, *, before: datetime, limit: int) -> int:
        return await self._delete(*self._expired_deliveries_sql(before, limit))

    async def explain_expired_webhook_deliveries(self, *, before: datetime, limit: int) -> list[str]:
        """SQLite's query plan of ``delete_expired_webhook_deliveries`` (``EXPLAIN QUERY PLAN``)."""
        return await self._explain(*self._expired_deliveries_sql(before, limit))

    @staticmethod
    def _expired_deliveries_sql(before: datetime, limit: int) -> tuple[str, list[Any]]:
        return conditions.oldest_expired(
            "webhook_deliveries", "delivery_id", rules.delivery_expired(before), DELIVERY_COLUMNS, limit
        )

    async def list_webhook_deliveries(self, listing: DeliveryListing) -> list[WebhookDeliveryDocument]:
        status, resource_ids, limit, after = listing.status, listing.resource_ids, listing.limit, listing.after
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
