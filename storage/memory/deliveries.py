"""The memory store's ``WebhookDeliveries``: deliveries by id and the cursors over the event log;
``finishedAt`` follows ``storage.rules.finished_at``, and the deliveries done are sorted by it
(the index ``rules.delivery_expired`` is applied through)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sortedcontainers import SortedList

from .. import rules
from ..documents import WebhookDeliveryDocument
from ..protocol import DeliveryLease, DeliveryListing, WebhookAttempt
from .copying import copied
from .expiry import delete_expired


class MemoryWebhookDeliveries:
    """``WebhookDeliveries`` in process."""

    def __init__(self) -> None:
        super().__init__()
        self._webhook_cursors: dict[str, str] = {}
        self._deliveries: dict[str, WebhookDeliveryDocument] = {}
        self._deliveries_finished = SortedList()
        """``(finishedAt, _id)`` of every delivery done: what expiry reads, oldest first."""

    async def webhook_cursor(self, cursor_id: str) -> str | None:
        return self._webhook_cursors.get(cursor_id)

    async def advance_webhook_cursor(self, cursor_id: str, event_id: str) -> None:
        current = self._webhook_cursors.get(cursor_id)
        if current is None or event_id > current:
            self._webhook_cursors[cursor_id] = event_id

    async def add_webhook_deliveries(self, deliveries: Sequence[WebhookDeliveryDocument]) -> int:
        added = 0
        for delivery in deliveries:
            if delivery["_id"] not in self._deliveries:
                self._deliveries[delivery["_id"]] = copied(delivery)
                added += 1
        return added

    async def claim_webhook_deliveries(self, lease: DeliveryLease) -> list[WebhookDeliveryDocument]:
        now = lease.now
        due = sorted(
            (
                d
                for d in self._deliveries.values()
                if d["status"] == "pending"
                and d["nextAttemptAt"] <= now
                and (d["lease"] is None or d["lease"]["until"] < now)
                and (lease.endpoint_id is None or d["endpointId"] == lease.endpoint_id)
                and d["endpointId"] not in lease.other_than
            ),
            key=lambda d: (d["nextAttemptAt"], d["_id"]),
        )[: lease.limit]
        for delivery in due:
            delivery["lease"] = lease.document()
        return [copied(d) for d in due]

    async def finish_webhook_attempt(self, attempt: WebhookAttempt) -> bool:
        delivery = self._deliveries.get(attempt.delivery_id)
        if delivery is None or delivery["status"] != "pending":
            return False
        held = delivery["lease"]
        if held is None or held["by"] != attempt.by:
            return False
        cast(dict[str, Any], delivery).update(attempt.changes())
        delivery["attempts"] += 1
        finished = delivery["finishedAt"]
        if finished is not None:
            self._deliveries_finished.add((finished, attempt.delivery_id))
        return True

    async def delete_expired_webhook_deliveries(self, *, before: datetime, limit: int) -> int:
        return delete_expired(self._deliveries_finished, self._deliveries, rules.delivery_expired(before), limit)

    async def list_webhook_deliveries(self, listing: DeliveryListing) -> list[WebhookDeliveryDocument]:
        status, resource_ids, limit, after = listing.status, listing.resource_ids, listing.limit, listing.after
        found = (
            d
            for _, d in sorted(self._deliveries.items(), reverse=True)
            if (after is None or d["_id"] < after)
            and (status is None or d["status"] == status)
            and (resource_ids is None or d["resourceId"] in resource_ids)
        )
        return [copied(d) for d in itertools.islice(found, limit)]


__all__ = ["MemoryWebhookDeliveries"]
