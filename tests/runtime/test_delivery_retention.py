"""Webhook deliveries done (delivered or failed) expire through the sweeper a retention period
after they finished (docs/webhooks.md "Retention"); a pending one never does. On every store, with
a clock the test moves."""

from __future__ import annotations

from datetime import timedelta

from runtime import AgentRegistry, RunManager, StalledRunSweeper
from storage import SnapshotStore, to_bson_precision, utcnow
from storage.protocol import DeliveryLease, DeliveryListing, WebhookAttempt

from ..storage.test_webhook_deliveries import _delivery
from ._clock import MovedClock

WEEK = 604_800.0
"""``RUNSGATE_WEBHOOK_DELIVERY_RETENTION``'s default, seconds."""


async def test_a_delivery_done_is_kept_for_the_period_then_deleted_and_a_pending_one_stays(
    store: SnapshotStore, registry: AgentRegistry
) -> None:
    clock = MovedClock()
    manager = RunManager(store, registry, instance_id="instance-a", clock=clock)
    sweeper = StalledRunSweeper(manager, interval=5, delivery_retention=WEEK)
    now = to_bson_precision(utcnow())
    await store.add_webhook_deliveries([_delivery(event, resource=None, now=now) for event in ("001", "002", "003")])
    await store.claim_webhook_deliveries(DeliveryLease(by="a", until=now + timedelta(seconds=30), now=now, limit=5))
    for delivery_id, status in [("001.e1", "delivered"), ("002.e1", "failed"), ("003.e1", "pending")]:
        assert await store.finish_webhook_attempt(
            WebhookAttempt(
                delivery_id=delivery_id,
                by="a",
                status=status,
                at=now,
                next_attempt_at=now,
                status_code=None,
                error=None,
            )
        )

    async def listed() -> list[str]:
        return [
            d["_id"]
            for d in await store.list_webhook_deliveries(DeliveryListing(status=None, resource_ids=None, limit=10))
        ]

    # inside the period, all are kept
    clock.ahead = WEEK - 60
    await sweeper.sweep_once()
    assert await listed() == ["003.e1", "002.e1", "001.e1"]

    # after it, the delivered and the failed one are deleted; the pending one stays
    clock.ahead = WEEK + 60
    await sweeper.sweep_once()
    assert await listed() == ["003.e1"]
