"""The memory store's ``IdempotencyKeys``: one document per key, reserved under a lease, and the
answered keys sorted by ``finishedAt`` (the index ``rules.key_expired`` is applied through)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sortedcontainers import SortedList

from .. import rules
from ..documents import IdempotencyDocument
from ..protocol import KeyAnswer, KeyReservation
from .copying import copied
from .expiry import delete_expired


class MemoryIdempotencyKeys:
    """``IdempotencyKeys`` in process."""

    reserves_with_decisions = True

    def __init__(self) -> None:
        super().__init__()
        self._keys: dict[str, IdempotencyDocument] = {}
        self._keys_finished = SortedList()
        """``(finishedAt, _id)`` of every answered key: what expiry reads, oldest first."""

    async def reserve_idempotency_key(self, reservation: KeyReservation) -> IdempotencyDocument | None:
        existing = self._keys.get(reservation.key_id)
        if existing is not None and not _lapsed(existing, reservation.fingerprint, reservation.now):
            return copied(existing)
        new = reservation.document.copy()
        if existing is not None:  # taken over: one life of the key
            new["createdAt"] = existing["createdAt"]
        self._keys[reservation.key_id] = new
        return None

    async def get_idempotency_key(self, key_id: str) -> IdempotencyDocument | None:
        found = self._keys.get(key_id)
        return None if found is None else copied(found)

    def _reserved(self, key_id: str, by: str | None) -> IdempotencyDocument | None:
        doc = self._keys.get(key_id)
        if doc is None or doc["result"] is not None or (by is not None and doc.get("reservedBy") != by):
            return None
        return doc

    async def renew_idempotency_key(self, key_id: str, *, by: str, until: datetime) -> bool:
        doc = self._reserved(key_id, by)
        if doc is None:
            return False
        doc["reservedUntil"] = until
        return True

    async def complete_idempotency_key(self, answer: KeyAnswer) -> None:
        self._complete_key(answer, copied(answer.result))

    def _complete_key(self, answer: KeyAnswer, result: dict[str, Any]) -> None:
        """``complete_idempotency_key`` in one step (no await: ``delete_claimed``'s ``key`` too),
        keeping ``result`` as it is (the caller's copy of ``answer.result``)."""
        doc = self._reserved(answer.key_id, answer.by)
        if doc is not None:
            doc["result"] = result
            doc["finishedAt"] = answer.now
            self._keys_finished.add((answer.now, answer.key_id))

    async def release_idempotency_key(self, key_id: str, *, by: str | None = None) -> None:
        if self._reserved(key_id, by) is not None:
            del self._keys[key_id]

    async def delete_expired_idempotency_keys(self, *, before: datetime, limit: int) -> int:
        return delete_expired(self._keys_finished, self._keys, rules.key_expired(before), limit)


def _lapsed(doc: IdempotencyDocument, fingerprint: str, now: datetime) -> bool:
    """A reservation without a result whose lease lapsed before ``now``, for the same arguments."""
    until = doc.get("reservedUntil")
    return doc["result"] is None and doc["fingerprint"] == fingerprint and until is not None and until < now


__all__ = ["MemoryIdempotencyKeys"]
