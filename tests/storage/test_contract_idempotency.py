"""The ``IdempotencyKeys`` part of the store contract (reservations as leases, answers),
run against the memory store, a SQLite file and a real MongoDB server (the ``store`` fixture)."""

from __future__ import annotations

from datetime import timedelta

from storage import (
    SnapshotStore,
)

from ._contract import MS, T0


async def test_idempotency_keys(store: SnapshotStore) -> None:
    first = await store.reserve_idempotency_key("k", "fp1", T0)
    second = await store.reserve_idempotency_key("k", "fp2", T0)
    await store.complete_idempotency_key("k", {"status": "completed"})
    third = await store.reserve_idempotency_key("k", "fp1", T0)
    await store.reserve_idempotency_key("k2", "fp", T0)
    await store.release_idempotency_key("k2")
    again = await store.reserve_idempotency_key("k2", "fp", T0)

    assert first is None
    assert second is not None
    assert second["fingerprint"] == "fp1"
    assert second["result"] is None
    assert third is not None
    assert third["result"] == {"status": "completed"}
    assert again is None


async def test_an_idempotency_reservation_is_a_lease_another_request_takes_over_once_it_lapsed(
    store: SnapshotStore,
) -> None:
    lease = timedelta(seconds=2)
    first = await store.reserve_idempotency_key("k", "fp", T0, by="a", until=T0 + lease)

    # while the lease runs (renewed once), a retry finds the request in flight
    assert await store.renew_idempotency_key("k", by="a", until=T0 + 2 * lease)
    in_flight = await store.reserve_idempotency_key("k", "fp", T0 + lease + MS, by="b", until=T0 + 3 * lease)
    other_arguments = await store.reserve_idempotency_key("k", "fp2", T0 + 5 * lease, by="c", until=T0 + 6 * lease)

    # once it lapsed, a retry with the same arguments takes the key over, and only one does
    taken = await store.reserve_idempotency_key("k", "fp", T0 + 2 * lease + MS, by="b", until=T0 + 3 * lease)
    lost = await store.reserve_idempotency_key("k", "fp", T0 + 2 * lease + MS, by="d", until=T0 + 3 * lease)

    # and the first holder can no longer renew, complete or release it
    assert not await store.renew_idempotency_key("k", by="a", until=T0 + 9 * lease)
    await store.complete_idempotency_key("k", {"outcome": "from a"}, by="a")
    await store.release_idempotency_key("k", by="a")
    still_b = await store.reserve_idempotency_key("k", "fp", T0 + 2 * lease + 2 * MS, by="e", until=T0 + 3 * lease)
    await store.complete_idempotency_key("k", {"outcome": "from b"}, by="b")
    done = await store.reserve_idempotency_key("k", "fp", T0 + 9 * lease, by="f", until=T0 + 10 * lease)

    assert first is None
    assert in_flight is not None
    assert (in_flight["result"], in_flight["reservedBy"]) == (None, "a")
    assert other_arguments is not None
    assert other_arguments["fingerprint"] == "fp"
    assert taken is None
    assert lost is not None
    assert lost["reservedBy"] == "b"
    assert still_b is not None
    assert (still_b["result"], still_b["reservedBy"]) == (None, "b")
    assert done is not None
    assert done["result"] == {"outcome": "from b"}
