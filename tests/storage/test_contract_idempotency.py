"""The ``IdempotencyKeys`` part of the store contract (reservations as leases, answers),
run against the memory store, a SQLite file and a real MongoDB server (the ``store`` fixture)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from storage import (
    KeyAnswer,
    KeyReservation,
    SnapshotStore,
)

from ._contract import MS, T0


async def test_idempotency_keys(store: SnapshotStore) -> None:
    first = await store.reserve_idempotency_key(KeyReservation(key_id="k", fingerprint="fp1", now=T0))
    second = await store.reserve_idempotency_key(KeyReservation(key_id="k", fingerprint="fp2", now=T0))
    await store.complete_idempotency_key(KeyAnswer(key_id="k", result={"status": "completed"}, now=T0))
    third = await store.reserve_idempotency_key(KeyReservation(key_id="k", fingerprint="fp1", now=T0))
    await store.reserve_idempotency_key(KeyReservation(key_id="k2", fingerprint="fp", now=T0))
    await store.release_idempotency_key("k2")
    again = await store.reserve_idempotency_key(KeyReservation(key_id="k2", fingerprint="fp", now=T0))

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
    first = await store.reserve_idempotency_key(
        KeyReservation(key_id="k", fingerprint="fp", now=T0, by="a", until=T0 + lease)
    )

    # while the lease runs (renewed once), a retry finds the request in flight
    assert await store.renew_idempotency_key("k", by="a", until=T0 + 2 * lease)
    in_flight = await store.reserve_idempotency_key(
        KeyReservation(key_id="k", fingerprint="fp", now=T0 + lease + MS, by="b", until=T0 + 3 * lease)
    )
    other_arguments = await store.reserve_idempotency_key(
        KeyReservation(key_id="k", fingerprint="fp2", now=T0 + 5 * lease, by="c", until=T0 + 6 * lease)
    )

    # once it lapsed, a retry with the same arguments takes the key over, and only one does
    taken = await store.reserve_idempotency_key(
        KeyReservation(key_id="k", fingerprint="fp", now=T0 + 2 * lease + MS, by="b", until=T0 + 3 * lease)
    )
    lost = await store.reserve_idempotency_key(
        KeyReservation(key_id="k", fingerprint="fp", now=T0 + 2 * lease + MS, by="d", until=T0 + 3 * lease)
    )

    # and the first holder can no longer renew, complete or release it
    assert not await store.renew_idempotency_key("k", by="a", until=T0 + 9 * lease)
    await store.complete_idempotency_key(
        KeyAnswer(key_id="k", result={"outcome": "from a"}, by="a", now=T0 + 2 * lease)
    )
    await store.release_idempotency_key("k", by="a")
    still_b = await store.reserve_idempotency_key(
        KeyReservation(key_id="k", fingerprint="fp", now=T0 + 2 * lease + 2 * MS, by="e", until=T0 + 3 * lease)
    )
    await store.complete_idempotency_key(
        KeyAnswer(key_id="k", result={"outcome": "from b"}, by="b", now=T0 + 2 * lease + 2 * MS)
    )
    done = await store.reserve_idempotency_key(
        KeyReservation(key_id="k", fingerprint="fp", now=T0 + 9 * lease, by="f", until=T0 + 10 * lease)
    )

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


async def test_a_key_expires_a_retention_period_after_its_answer_and_never_while_in_flight(
    store: SnapshotStore,
) -> None:
    # given a key answered at T0 + 1 s, one answered at T0 + 10 s, and one whose request is still
    # in flight (its lease long lapsed: a dead request's key is still no answer)
    second = timedelta(seconds=1)
    await store.reserve_idempotency_key(
        KeyReservation(key_id="answered", fingerprint="fp", now=T0, by="a", until=T0 + second)
    )
    await store.complete_idempotency_key(
        KeyAnswer(key_id="answered", result={"outcome": "first"}, by="a", now=T0 + second)
    )
    await store.reserve_idempotency_key(
        KeyReservation(key_id="later", fingerprint="fp", now=T0, by="b", until=T0 + second)
    )
    await store.complete_idempotency_key(
        KeyAnswer(key_id="later", result={"outcome": "later"}, by="b", now=T0 + 10 * second)
    )
    await store.reserve_idempotency_key(
        KeyReservation(key_id="in-flight", fingerprint="fp", now=T0, by="c", until=T0 + second)
    )

    # then a repeat inside the period replays the answer, which carries when it was stored
    replay = await store.reserve_idempotency_key(
        KeyReservation(key_id="answered", fingerprint="fp", now=T0 + 2 * second, by="d", until=T0)
    )
    assert replay is not None
    assert (replay["result"], replay.get("finishedAt")) == ({"outcome": "first"}, T0 + second)
    in_flight = await store.reserve_idempotency_key(
        KeyReservation(key_id="in-flight", fingerprint="fp", now=T0, by="d", until=T0)
    )
    assert in_flight is not None
    assert "finishedAt" not in in_flight

    # when the sweeper deletes keys answered before the bound: strictly before
    assert await store.delete_expired_idempotency_keys(before=T0 + second, limit=10) == 0
    assert await store.delete_expired_idempotency_keys(before=T0 + second + MS, limit=10) == 1

    # then a repeat after it is a new request, and the others are kept
    assert (
        await store.reserve_idempotency_key(
            KeyReservation(key_id="answered", fingerprint="fp", now=T0 + 2 * second, by="e", until=T0 + 9 * second)
        )
        is None
    )
    kept = await store.reserve_idempotency_key(
        KeyReservation(key_id="later", fingerprint="fp", now=T0 + 2 * second, by="e", until=T0)
    )
    assert kept is not None
    assert kept["result"] == {"outcome": "later"}

    # and however late the bound, a key in flight (or reserved again) is never deleted
    assert await store.delete_expired_idempotency_keys(before=T0 + 10_000 * second, limit=10) == 1
    assert await store.delete_expired_idempotency_keys(before=T0 + 10_000 * second, limit=10) == 0
    for key_id in ("in-flight", "answered"):
        still = await store.reserve_idempotency_key(
            KeyReservation(key_id=key_id, fingerprint="fp", now=T0, by="f", until=T0)
        )
        assert still is not None, key_id
        assert still["result"] is None
    assert (
        await store.reserve_idempotency_key(
            KeyReservation(key_id="later", fingerprint="fp", now=T0 + 2 * second, by="f", until=T0)
        )
        is None
    )


async def test_expired_keys_are_deleted_in_bounded_batches_oldest_answer_first(store: SnapshotStore) -> None:
    for n in (3, 1, 4, 0, 2):  # answered out of insertion order
        await store.reserve_idempotency_key(KeyReservation(key_id=f"k{n}", fingerprint="fp", now=T0))
        await store.complete_idempotency_key(KeyAnswer(key_id=f"k{n}", result={"n": n}, now=T0 + n * MS))

    first = await store.delete_expired_idempotency_keys(before=T0 + timedelta(hours=1), limit=2)
    left = [
        n
        for n in range(5)
        if await store.reserve_idempotency_key(KeyReservation(key_id=f"k{n}", fingerprint="fp", now=T0)) is not None
    ]

    assert first == 2
    assert left == [2, 3, 4]
    with pytest.raises(ValueError, match="limit"):
        await store.delete_expired_idempotency_keys(before=T0, limit=0)


async def test_a_key_keeps_its_first_reservation_time_until_it_is_deleted(store: SnapshotStore) -> None:
    # given a key reserved, whose holder's lease lapsed, and another request took it over
    lease = timedelta(seconds=2)
    assert await store.get_idempotency_key("k") is None
    await store.reserve_idempotency_key(KeyReservation(key_id="k", fingerprint="fp", now=T0, by="a", until=T0 + lease))
    await store.reserve_idempotency_key(
        KeyReservation(key_id="k", fingerprint="fp", now=T0 + 2 * lease, by="b", until=T0 + 3 * lease)
    )

    # then the key as stored is the taker's, with the first reservation's time
    taken = await store.get_idempotency_key("k")
    assert taken is not None
    assert (taken["reservedBy"], taken["createdAt"], taken["result"]) == ("b", T0, None)

    # and once released, a new reservation starts a new life of the key
    await store.release_idempotency_key("k", by="b")
    await store.reserve_idempotency_key(
        KeyReservation(key_id="k", fingerprint="fp", now=T0 + 4 * lease, by="c", until=T0 + 5 * lease)
    )
    renewed = await store.get_idempotency_key("k")
    assert renewed is not None
    assert renewed["createdAt"] == T0 + 4 * lease
