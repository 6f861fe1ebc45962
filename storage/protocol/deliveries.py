"""``WebhookDeliveries``: webhook deliveries, leased to one instance at a time, and the cursors over
the event log they are derived from."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from ..documents import WebhookDeliveryDocument
from .filters import DeliveryListing
from .writes import DeliveryLease, WebhookAttempt


class WebhookDeliveries(Protocol):
    """Webhook deliveries (``webhook_deliveries``) and the per-endpoint cursors over the event log
    they are derived from (``webhook_cursors``); docs/webhooks.md "Delivery guarantees".

    A delivery is never written on the decision path: the dispatcher reads the event log after a
    cursor and adds the deliveries it derives (``add_webhook_deliveries``, insert-if-absent by id,
    so reading an event twice adds it once), then advances the cursor. Sending is guarded by a
    lease, as continuing a run is by a claim: ``claim_webhook_deliveries`` hands each due delivery
    to one instance at a time, and another takes it over once the lease expired. Every method may
    raise ``StoreUnavailableError``.
    """

    async def webhook_cursor(self, cursor_id: str) -> str | None:
        """The event id up to which ``cursor_id`` (``{endpointId}:{agentId}``) read the log, or ``None``."""

    async def advance_webhook_cursor(self, cursor_id: str, event_id: str) -> None:
        """Move the cursor to ``event_id`` if that is after where it stands (never backwards;
        created when missing)."""

    async def add_webhook_deliveries(self, deliveries: Sequence[WebhookDeliveryDocument]) -> int:
        """Insert the deliveries whose ``_id`` is not stored yet (the others are left as they are).

        Returns:
            How many were new.
        """
        ...

    async def claim_webhook_deliveries(self, lease: DeliveryLease) -> list[WebhookDeliveryDocument]:
        """Lease up to ``limit`` due deliveries to ``by`` until ``until``: those ``pending`` whose
        ``nextAttemptAt`` is at or before ``now`` and that nobody holds (no lease, or one that
        expired before ``now``). Each is leased by one conditional write, so two instances never
        both get one. Oldest ``nextAttemptAt`` first; returns the leased documents. With
        ``endpoint_id``, only deliveries to that endpoint; none to an endpoint of ``other_than``."""
        ...

    async def finish_webhook_attempt(self, attempt: WebhookAttempt) -> bool:
        """Record one attempt of a delivery ``by`` holds: ``attempts`` + 1, ``lastAttemptAt`` ``at``,
        the answer's ``status_code`` and ``error``, the new ``status`` (``finishedAt`` ``at`` unless
        ``pending``) and ``next_attempt_at``; the lease is released. ``False`` (nothing written)
        when ``by`` no longer holds it or it is no longer pending."""
        ...

    async def list_webhook_deliveries(self, listing: DeliveryListing) -> list[WebhookDeliveryDocument]:
        """Deliveries newest first (``_id`` descending), for ``webhookDeliveries``: those of ``listing``."""
        ...

    async def delete_expired_webhook_deliveries(self, *, before: datetime, limit: int) -> int:
        """Delete at most ``limit`` deliveries that meet ``rules.delivery_expired(before)`` (done
        before ``before``, UTC), oldest first, through an index; never a pending one.

        Returns:
            How many were deleted.

        Raises:
            ValueError: ``limit`` is below 1.
        """
        ...


__all__ = ["WebhookDeliveries"]
