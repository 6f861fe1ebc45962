"""The ``WebhookDeliveries`` part on every store (memory, SQLite, FerretDB): cursors only move
forward, a delivery is added once, a due delivery is leased to one instance at a time (and taken
over once its lease expired), an attempt is recorded only by the lease holder, and listings are
newest first, filtered by status and resources; deliveries done expire, pending ones never."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest

from storage import SnapshotStore, WebhookDeliveryDocument, to_bson_precision, utcnow
from storage.protocol import DeliveryLease, DeliveryListing, WebhookAttempt


def _delivery(
    event_id: str, *, resource: str | None = "tenant-a", endpoint: str = "e1", now: datetime | None = None
) -> WebhookDeliveryDocument:
    """A pending delivery of ``event_id`` to ``endpoint``, created at ``now`` (the real now by default)."""
    now = now or utcnow()
    return {
        "_id": f"{event_id}.{endpoint}",
        "endpointId": endpoint,
        "eventId": event_id,
        "agentId": "refund-agent",
        "runId": f"run-{event_id}",
        "resourceId": resource,
        "type": "run.suspended",
        "body": '{"type": "run.suspended"}',
        "status": "pending",
        "attempts": 0,
        "createdAt": now,
        "nextAttemptAt": now,
        "lastAttemptAt": None,
        "lastStatusCode": None,
        "lastError": None,
        "finishedAt": None,
        "lease": None,
    }


async def test_a_cursor_only_moves_forward(store: SnapshotStore) -> None:
    assert await store.webhook_cursor("e1:refund-agent") is None

    await store.advance_webhook_cursor("e1:refund-agent", "00000000000000000002")
    await store.advance_webhook_cursor("e1:refund-agent", "00000000000000000001")

    assert await store.webhook_cursor("e1:refund-agent") == "00000000000000000002"
    await store.advance_webhook_cursor("e1:refund-agent", "00000000000000000003")
    assert await store.webhook_cursor("e1:refund-agent") == "00000000000000000003"
    assert await store.webhook_cursor("e2:refund-agent") is None


async def test_a_delivery_is_added_once(store: SnapshotStore) -> None:
    first = _delivery("001")

    assert await store.add_webhook_deliveries([first, _delivery("002")]) == 2
    changed = {**first, "body": "changed"}
    assert await store.add_webhook_deliveries([changed, _delivery("003")]) == 1  # type: ignore[list-item]

    listed = await store.list_webhook_deliveries(DeliveryListing(status=None, resource_ids=None, limit=10))
    assert [d["_id"] for d in listed] == ["003.e1", "002.e1", "001.e1"]
    assert listed[-1]["body"] == first["body"]
    assert listed[-1]["createdAt"] == first["createdAt"]


async def test_a_due_delivery_is_leased_to_one_instance_at_a_time(store: SnapshotStore) -> None:
    await store.add_webhook_deliveries([_delivery("001"), _delivery("002")])
    now = utcnow()

    results = await asyncio.gather(
        *(
            store.claim_webhook_deliveries(
                DeliveryLease(by=f"i{n}", until=now + timedelta(seconds=30), now=now, limit=10)
            )
            for n in range(4)
        )
    )

    leased = [d["_id"] for batch in results for d in batch]
    assert sorted(leased) == ["001.e1", "002.e1"]
    again = await store.claim_webhook_deliveries(
        DeliveryLease(by="late", until=now + timedelta(seconds=30), now=now, limit=10)
    )
    assert again == []


async def test_a_lease_can_be_asked_for_one_endpoint_or_for_all_but_some(store: SnapshotStore) -> None:
    deliveries = [_delivery("001", endpoint="e1"), _delivery("002", endpoint="e2"), _delivery("003", endpoint="e3")]
    await store.add_webhook_deliveries(deliveries)
    now, until = utcnow(), utcnow() + timedelta(seconds=30)

    only_e2 = await store.claim_webhook_deliveries(
        DeliveryLease(by="i", until=until, now=now, limit=10, endpoint_id="e2")
    )
    not_e1 = await store.claim_webhook_deliveries(
        DeliveryLease(by="i", until=until, now=now, limit=10, other_than=("e1", "e2"))
    )
    rest = await store.claim_webhook_deliveries(DeliveryLease(by="i", until=until, now=now, limit=10))

    assert [d["_id"] for d in only_e2] == ["002.e2"]
    assert [d["_id"] for d in not_e1] == ["003.e3"]
    assert [d["_id"] for d in rest] == ["001.e1"]


async def test_an_expired_lease_is_taken_over(store: SnapshotStore) -> None:
    await store.add_webhook_deliveries([_delivery("001")])
    now = utcnow()
    [held] = await store.claim_webhook_deliveries(
        DeliveryLease(by="dead", until=now + timedelta(seconds=1), now=now, limit=5)
    )
    assert held["lease"] is not None
    assert held["lease"]["by"] == "dead"

    later = now + timedelta(seconds=2)
    [taken] = await store.claim_webhook_deliveries(
        DeliveryLease(by="alive", until=later + timedelta(seconds=30), now=later, limit=5)
    )

    assert taken["_id"] == "001.e1"
    assert not await store.finish_webhook_attempt(
        WebhookAttempt(
            delivery_id="001.e1",
            by="dead",
            status="delivered",
            at=later,
            next_attempt_at=later,
            status_code=200,
            error=None,
        )
    )
    assert await store.finish_webhook_attempt(
        WebhookAttempt(
            delivery_id="001.e1",
            by="alive",
            status="delivered",
            at=later,
            next_attempt_at=later,
            status_code=200,
            error=None,
        )
    )
    [done] = await store.list_webhook_deliveries(DeliveryListing(status="delivered", resource_ids=None, limit=5))
    assert done["attempts"] == 1
    assert done["lease"] is None
    assert done["finishedAt"] == later


async def test_a_retry_waits_for_its_time_and_a_failure_is_final(store: SnapshotStore) -> None:
    await store.add_webhook_deliveries([_delivery("001")])
    now = utcnow()
    await store.claim_webhook_deliveries(DeliveryLease(by="a", until=now + timedelta(seconds=30), now=now, limit=5))
    retry_at = now + timedelta(seconds=10)
    assert await store.finish_webhook_attempt(
        WebhookAttempt(
            delivery_id="001.e1",
            by="a",
            status="pending",
            at=now,
            next_attempt_at=retry_at,
            status_code=500,
            error="answered 500",
        )
    )

    assert (
        await store.claim_webhook_deliveries(DeliveryLease(by="a", until=now + timedelta(seconds=30), now=now, limit=5))
        == []
    )
    [due] = await store.claim_webhook_deliveries(
        DeliveryLease(by="b", until=retry_at + timedelta(seconds=30), now=retry_at, limit=5)
    )
    assert (due["attempts"], due["lastStatusCode"], due["lastError"]) == (1, 500, "answered 500")
    assert due["finishedAt"] is None
    assert await store.finish_webhook_attempt(
        WebhookAttempt(
            delivery_id="001.e1",
            by="b",
            status="failed",
            at=retry_at,
            next_attempt_at=retry_at,
            status_code=None,
            error="timeout",
        )
    )

    much_later = retry_at + timedelta(days=1)
    assert await store.claim_webhook_deliveries(DeliveryLease(by="c", until=much_later, now=much_later, limit=5)) == []
    [failed] = await store.list_webhook_deliveries(DeliveryListing(status="failed", resource_ids=None, limit=5))
    assert (failed["attempts"], failed["lastStatusCode"], failed["finishedAt"]) == (2, None, retry_at)
    assert not await store.finish_webhook_attempt(
        WebhookAttempt(
            delivery_id="001.e1",
            by="b",
            status="delivered",
            at=much_later,
            next_attempt_at=much_later,
            status_code=200,
            error=None,
        )
    )


async def test_listing_pages_newest_first_by_status_and_resources(store: SnapshotStore) -> None:
    await store.add_webhook_deliveries(
        [_delivery("001"), _delivery("002", resource="tenant-b"), _delivery("003", resource=None), _delivery("004")]
    )
    now = utcnow()
    leased = await store.claim_webhook_deliveries(
        DeliveryLease(by="a", until=now + timedelta(seconds=30), now=now, limit=1)
    )
    assert await store.finish_webhook_attempt(
        WebhookAttempt(
            delivery_id=leased[0]["_id"],
            by="a",
            status="delivered",
            at=now,
            next_attempt_at=now,
            status_code=204,
            error=None,
        )
    )

    first = await store.list_webhook_deliveries(DeliveryListing(status=None, resource_ids=None, limit=2))
    second = await store.list_webhook_deliveries(
        DeliveryListing(status=None, resource_ids=None, limit=2, after=first[-1]["_id"])
    )
    assert [d["_id"] for d in first + second] == ["004.e1", "003.e1", "002.e1", "001.e1"]
    tenant_a = await store.list_webhook_deliveries(
        DeliveryListing(status=None, resource_ids=frozenset({"tenant-a"}), limit=10)
    )
    assert [d["_id"] for d in tenant_a] == ["004.e1", "001.e1"]
    assert await store.list_webhook_deliveries(DeliveryListing(status=None, resource_ids=frozenset(), limit=10)) == []
    pending = await store.list_webhook_deliveries(DeliveryListing(status="pending", resource_ids=None, limit=10))
    assert leased[0]["_id"] not in [d["_id"] for d in pending]
    assert len(pending) == 3


async def test_deliveries_done_expire_oldest_first_in_bounded_batches_and_pending_ones_never(
    store: SnapshotStore,
) -> None:
    # given a delivery delivered, one failed a second later, and one still retrying (attempted first)
    await store.add_webhook_deliveries([_delivery("001"), _delivery("002"), _delivery("003")])
    now = to_bson_precision(utcnow())
    second = timedelta(seconds=1)
    await store.claim_webhook_deliveries(DeliveryLease(by="a", until=now + 30 * second, now=now, limit=5))
    for delivery_id, status, at in [
        ("003.e1", "pending", now - second),
        ("002.e1", "failed", now + second),
        ("001.e1", "delivered", now),
    ]:
        assert await store.finish_webhook_attempt(
            WebhookAttempt(
                delivery_id=delivery_id,
                by="a",
                status=status,
                at=at,
                next_attempt_at=now + 9 * second,
                status_code=500,
                error=None,
            )
        )

    # when the sweeper deletes deliveries done before a bound: strictly before, oldest first, a batch at a time
    assert await store.delete_expired_webhook_deliveries(before=now, limit=10) == 0
    first = await store.delete_expired_webhook_deliveries(before=now + 10_000 * second, limit=1)
    after_first = [
        d["_id"] for d in await store.list_webhook_deliveries(DeliveryListing(status=None, resource_ids=None, limit=10))
    ]
    rest = await store.delete_expired_webhook_deliveries(before=now + 10_000 * second, limit=10)

    # then the pending one is kept, however late the bound
    assert (first, rest) == (1, 1)
    assert after_first == ["003.e1", "002.e1"]
    [kept] = await store.list_webhook_deliveries(DeliveryListing(status=None, resource_ids=None, limit=10))
    assert (kept["_id"], kept["status"], kept["finishedAt"]) == ("003.e1", "pending", None)
    assert await store.delete_expired_webhook_deliveries(before=now + 10_000 * second, limit=10) == 0
    with pytest.raises(ValueError, match="limit"):
        await store.delete_expired_webhook_deliveries(before=now, limit=0)
