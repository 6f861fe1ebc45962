"""Webhook deliveries of ``MongoSnapshotStore``: collections ``webhook_deliveries`` (one
document per message, leased while an instance sends it) and ``webhook_cursors`` (how far the
event log was read), each change a conditional write, under its write lease on FerretDB 1.x
(``_run_lock``; ``WebhookDeliveries``);
deliveries done expire through index ``deliveries_finished`` (``rules.delivery_expired``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.errors import DuplicateKeyError

from .. import rules
from ..documents import WebhookDeliveryDocument
from ..protocol import DeliveryLease, DeliveryListing, WebhookAttempt
from .base import MongoStoreBase
from .conditions import compiled, no_value
from .mapping import read_page
from .reachability import reachable
from .schema import DELIVERIES_FINISHED_INDEX

Document = dict[str, Any]


class MongoWebhookDeliveries(MongoStoreBase):
    """``WebhookDeliveries`` of ``MongoSnapshotStore``."""

    async def webhook_cursor(self, cursor_id: str) -> str | None:
        async with reachable():
            doc = await self._cursors.find_one({"_id": cursor_id})
        return None if doc is None else str(doc["eventId"])

    async def advance_webhook_cursor(self, cursor_id: str, event_id: str) -> None:
        """Moved forward only (an update conditioned on an earlier ``eventId``), so two instances
        never move it back; under the cursor's write lease on FerretDB 1.x (``_run_lock``). A
        cursor another instance created between this one's update and insert is compared again."""
        behind = {"_id": cursor_id, "eventId": {"$lt": event_id}}
        async with reachable(), self._lock(f"webhook-cursor:{cursor_id}"):
            result = await self._cursors.update_one(behind, {"$set": {"eventId": event_id}})
            if result.matched_count == 0:
                try:
                    await self._cursors.insert_one({"_id": cursor_id, "eventId": event_id})
                except DuplicateKeyError:
                    await self._cursors.update_one(behind, {"$set": {"eventId": event_id}})

    async def add_webhook_deliveries(self, deliveries: Sequence[WebhookDeliveryDocument]) -> int:
        added = 0
        async with reachable():
            for delivery in deliveries:
                try:
                    await self._deliveries.insert_one(dict(delivery))
                except DuplicateKeyError:
                    continue
                added += 1
        return added

    async def claim_webhook_deliveries(self, lease: DeliveryLease) -> list[WebhookDeliveryDocument]:
        """Each candidate is leased by one conditional update, under its write lease on FerretDB 1.x
        (``_run_lock``: FerretDB 1.24 does not apply conditional updates atomically)."""
        now, endpoint_id, other_than = lease.now, lease.endpoint_id, lease.other_than
        due: Document = {
            "status": "pending",
            "nextAttemptAt": {"$lte": now},
            "$or": [no_value("lease"), {"lease.until": {"$lt": now}}],
        }
        if endpoint_id is not None or other_than:
            due["endpointId"] = {
                **({"$eq": endpoint_id} if endpoint_id is not None else {}),
                **({"$nin": list(other_than)} if other_than else {}),
            }
        async with reachable():
            order = [("nextAttemptAt", ASCENDING), ("_id", ASCENDING)]
            candidates = await read_page(self._deliveries.find(due, {"_id": 1}).sort(order), lease.limit)
            claimed: list[WebhookDeliveryDocument] = []
            for candidate in candidates:
                async with self._lock(f"webhook:{candidate['_id']}"):
                    doc = await self._deliveries.find_one_and_update(
                        {"_id": candidate["_id"], **due},
                        {"$set": {"lease": lease.document()}},
                        return_document=ReturnDocument.AFTER,
                    )
                if doc is not None:
                    claimed.append(cast(WebhookDeliveryDocument, doc))
        return claimed

    async def finish_webhook_attempt(self, attempt: WebhookAttempt) -> bool:
        async with reachable(), self._lock(f"webhook:{attempt.delivery_id}"):
            result = await self._deliveries.update_one(
                {"_id": attempt.delivery_id, "status": "pending", "lease.by": attempt.by},
                {"$set": attempt.changes(), "$inc": {"attempts": 1}},
            )
        return result.modified_count == 1

    async def delete_expired_webhook_deliveries(self, *, before: datetime, limit: int) -> int:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        expired = compiled(rules.delivery_expired(before))
        async with reachable():
            found = await read_page(self._deliveries.find(expired, {"_id": 1}).sort(DELIVERIES_FINISHED_INDEX), limit)
            if not found:
                return 0
            # a delivery done is never written again, nor added again once its event is past the
            # dispatcher's lookback (the retention is longer): no lease needed
            gone = await self._deliveries.delete_many({**expired, "_id": {"$in": [doc["_id"] for doc in found]}})
        return gone.deleted_count

    async def list_webhook_deliveries(self, listing: DeliveryListing) -> list[WebhookDeliveryDocument]:
        status, resource_ids, limit, after = listing.status, listing.resource_ids, listing.limit, listing.after
        query: Document = {}
        if status is not None:
            query["status"] = status
        if after is not None:
            query["_id"] = {"$lt": after}
        if resource_ids is not None:
            query["resourceId"] = {"$in": sorted(resource_ids)}
        async with reachable():
            docs = await read_page(self._deliveries.find(query).sort([("_id", DESCENDING)]), limit)
        return [cast(WebhookDeliveryDocument, doc) for doc in docs]


__all__ = ["MongoWebhookDeliveries"]
