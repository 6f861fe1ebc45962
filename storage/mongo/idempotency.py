"""Idempotency keys of ``MongoSnapshotStore``: collection ``idempotency_keys``, one document per
key, each change under the key's write lease (``_run_lock``; ``IdempotencyKeys``). An answer
stored as a document under ``result`` (before ``resultJson``) still counts as an answer."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from pymongo.errors import DuplicateKeyError

from ..documents import IdempotencyDocument
from ..stored_json import IDEMPOTENCY_FIELDS, decode, encode
from .base import MongoStoreBase
from .conditions import no_value
from .reachability import reachable

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

    async def reserve_idempotency_key(
        self,
        key_id: str,
        fingerprint: str,
        now: datetime,
        *,
        by: str | None = None,
        until: datetime | None = None,
    ) -> IdempotencyDocument | None:
        try:
            async with reachable():
                await self._keys.insert_one(
                    {
                        "_id": key_id,
                        "fingerprint": fingerprint,
                        "result": None,
                        "createdAt": now,
                        "reservedBy": by,
                        "reservedUntil": until,
                    }
                )
        except DuplicateKeyError:
            lapsed: Document = {**_held_key(key_id, None), "fingerprint": fingerprint, "reservedUntil": {"$lt": now}}
            async with reachable(), self._lock(_key_lock(key_id)):
                taken = await self._keys.update_one(lapsed, {"$set": {"reservedBy": by, "reservedUntil": until}})
            if taken.matched_count == 1:
                return None
            async with reachable():
                existing = await self._keys.find_one({"_id": key_id})
            if existing is not None:
                existing.setdefault("reservedBy", None)
                existing.setdefault("reservedUntil", None)
                return cast(IdempotencyDocument, decode(existing, IDEMPOTENCY_FIELDS))
            return await self.reserve_idempotency_key(key_id, fingerprint, now, by=by, until=until)
        return None

    async def renew_idempotency_key(self, key_id: str, *, by: str, until: datetime) -> bool:
        async with reachable(), self._lock(_key_lock(key_id)):
            result = await self._keys.update_one(_held_key(key_id, by), {"$set": {"reservedUntil": until}})
        return result.matched_count == 1

    async def complete_idempotency_key(self, key_id: str, result: dict[str, Any], *, by: str | None = None) -> None:
        async with reachable(), self._lock(_key_lock(key_id)):
            await self._keys.update_one(_held_key(key_id, by), {"$set": encode({"result": result}, IDEMPOTENCY_FIELDS)})

    async def release_idempotency_key(self, key_id: str, *, by: str | None = None) -> None:
        async with reachable(), self._lock(_key_lock(key_id)):
            await self._keys.delete_one(_held_key(key_id, by))


__all__ = ["MongoIdempotencyKeys"]
