"""Idempotency keys of ``MongoSnapshotStore``: collection ``idempotency_keys``, one document per
key, each change a conditional write, under the key's write lease on FerretDB 1.x (``_run_lock``;
``IdempotencyKeys``). An answer
stored as a document under ``result`` (before ``resultJson``) still counts as an answer. Answered
keys expire through index ``keys_finished`` (``rules.key_expired``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from pymongo.errors import DuplicateKeyError

from .. import rules
from ..documents import IdempotencyDocument
from ..protocol import KeyAnswer, KeyReservation
from ..stored_json import IDEMPOTENCY_FIELDS, decode, encode
from .base import MongoStoreBase, deleted_one
from .conditions import compiled, no_value
from .mapping import read_page
from .reachability import reachable
from .schema import KEYS_FINISHED_INDEX

Document = dict[str, Any]


def _key_lock(key_id: str) -> str:
    """The write-lock name of an idempotency key (``_run_lock``; apart from every run id)."""
    return f"idempotency-key:{key_id}"


def _held_key(key_id: str, by: str | None) -> Document:
    """The condition of a reservation still held (by ``by`` unless ``None``): no result yet."""
    held: Document = {"_id": key_id, **no_value("result", "resultJson")}  # either form of the answer
    if by is not None:
        held["reservedBy"] = by
    return held


class MongoIdempotencyKeys(MongoStoreBase):
    """``IdempotencyKeys`` of ``MongoSnapshotStore``."""

    reserves_with_decisions = False  # no multi-document transactions on FerretDB or DocumentDB

    async def reserve_idempotency_key(self, reservation: KeyReservation) -> IdempotencyDocument | None:
        key_id, by, until = reservation.key_id, reservation.by, reservation.until
        try:
            async with reachable():
                await self._keys.insert_one(dict(reservation.document))
        except DuplicateKeyError:
            lapsed: Document = {
                **_held_key(key_id, None),
                "fingerprint": reservation.fingerprint,
                "reservedUntil": {"$lt": reservation.now},
            }
            async with reachable(), self._lock(_key_lock(key_id)):
                taken = await self._keys.update_one(lapsed, {"$set": {"reservedBy": by, "reservedUntil": until}})
            if taken.matched_count == 1:
                return None
            existing = await self.get_idempotency_key(key_id)
            if existing is not None:
                return existing
            return await self.reserve_idempotency_key(reservation)
        return None

    async def get_idempotency_key(self, key_id: str) -> IdempotencyDocument | None:
        async with reachable():
            found = await self._keys.find_one({"_id": key_id})
        if found is None:
            return None
        found.setdefault("reservedBy", None)
        found.setdefault("reservedUntil", None)
        return cast(IdempotencyDocument, decode(found, IDEMPOTENCY_FIELDS))

    async def renew_idempotency_key(self, key_id: str, *, by: str, until: datetime) -> bool:
        async with reachable(), self._lock(_key_lock(key_id)):
            result = await self._keys.update_one(_held_key(key_id, by), {"$set": {"reservedUntil": until}})
        return result.matched_count == 1

    async def complete_idempotency_key(self, answer: KeyAnswer) -> None:
        stored = {**encode({"result": answer.result}, IDEMPOTENCY_FIELDS), "finishedAt": answer.now}
        async with reachable(), self._lock(_key_lock(answer.key_id)):
            await self._keys.update_one(_held_key(answer.key_id, answer.by), {"$set": stored})

    async def release_idempotency_key(self, key_id: str, *, by: str | None = None) -> None:
        async with reachable(), self._lock(_key_lock(key_id)):
            await deleted_one(self._keys, _held_key(key_id, by))

    async def delete_expired_idempotency_keys(self, *, before: datetime, limit: int) -> int:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        expired = compiled(rules.key_expired(before))
        async with reachable():
            found = await read_page(self._keys.find(expired, {"_id": 1}).sort(KEYS_FINISHED_INDEX), limit)
        deleted = 0
        for doc in found:
            # under the key's lease on FerretDB 1.x: FerretDB 1.24 deletes by a query then a
            # write, and a new reservation may take the id between the two
            async with reachable(), self._lock(_key_lock(doc["_id"])):
                gone = await deleted_one(self._keys, {**expired, "_id": doc["_id"]})
            deleted += gone is not None
        return deleted


__all__ = ["MongoIdempotencyKeys"]
