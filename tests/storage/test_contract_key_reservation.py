"""``record_decision``'s ``key`` (part of the ``RunStore`` and ``IdempotencyKeys`` contract): where
a store ``reserves_with_decisions``, the decision's own write reserves the request's idempotency
key, or writes nothing when another request holds it (memory, a SQLite file); elsewhere the
key is refused (the MongoDB servers)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from storage import IdempotencyKeyTakenError, KeyAnswer, KeyReservation, SnapshotStore
from storage.protocol import DecisionWrite

from ..conftest import STORAGE_STORE_KINDS, open_store
from ._contract import MS, T0, decision, feed_event, snapshot

LEASE = timedelta(seconds=60)
RESERVING = ["memory", "sqlite"]
OWN_WRITE = [m for m in STORAGE_STORE_KINDS if m not in RESERVING]
"""Every other store kind of ``tests/storage``: the MongoDB servers."""


def _key(key_id: str, by: str = "a", now: Any = T0) -> KeyReservation:
    return KeyReservation(key_id=key_id, fingerprint="fp", by=by, until=now + LEASE, now=now)


async def _decide(store: SnapshotStore, run_id: str, key: KeyReservation, call_id: str = "c1") -> Any:
    event = feed_event(f"e-{run_id}-{call_id}", run_id=run_id)
    return await store.record_decision(
        DecisionWrite(
            agent_id="refund-agent",
            run_id=run_id,
            index=0,
            tool_call_id=call_id,
            decision=decision(),
            now=key.now,
            event=event,
            key=key,
        )
    )


@pytest.fixture(params=RESERVING)
async def reserving(request: pytest.FixtureRequest) -> AsyncIterator[SnapshotStore]:
    """The stores whose ``record_decision`` takes a key."""
    async with open_store(request, request.param) as opened:
        assert opened.reserves_with_decisions
        yield opened


@pytest.fixture(params=OWN_WRITE)
async def own_write(request: pytest.FixtureRequest) -> AsyncIterator[SnapshotStore]:
    """The stores that reserve a key by its own write."""
    async with open_store(request, request.param) as opened:
        assert not opened.reserves_with_decisions
        yield opened


async def test_a_store_without_it_refuses_the_key(own_write: SnapshotStore) -> None:
    store = own_write
    await store.insert(snapshot("run"), b"[]")
    with pytest.raises(ValueError, match="reserves_with_decisions"):
        await _decide(store, "run", _key("k"))
    assert (await store.get("refund-agent", "run"))["toolCalls"][0].get("decision") is None  # type: ignore[index]
    assert await store.reserve_idempotency_key(KeyReservation(key_id="k", fingerprint="fp", now=T0, by="b")) is None


async def test_the_decision_and_its_key_are_written_together(reserving: SnapshotStore) -> None:
    store = reserving
    await store.insert(snapshot("run"), b"[]")

    written = await _decide(store, "run", _key("k"))

    assert written is not None
    assert written["toolCalls"][0]["decision"] == decision()
    held = await store.reserve_idempotency_key(
        KeyReservation(key_id="k", fingerprint="fp", now=T0 + MS, by="b", until=T0 + LEASE)
    )
    assert held is not None
    assert (held["result"], held["reservedBy"], held["reservedUntil"]) == (None, "a", T0 + LEASE)
    assert await store.renew_idempotency_key("k", by="a", until=T0 + 2 * LEASE)


async def test_a_key_another_request_holds_or_answered_leaves_the_run_and_the_key_unchanged(
    reserving: SnapshotStore,
) -> None:
    store = reserving
    await store.insert(snapshot("run"), b"[]")
    before = await store.get("refund-agent", "run")
    assert (
        await store.reserve_idempotency_key(
            KeyReservation(key_id="held", fingerprint="fp", now=T0, by="x", until=T0 + LEASE)
        )
        is None
    )
    assert (
        await store.reserve_idempotency_key(
            KeyReservation(key_id="answered", fingerprint="fp", now=T0, by="y", until=T0 + LEASE)
        )
        is None
    )
    await store.complete_idempotency_key(KeyAnswer(key_id="answered", result={"outcome": "first"}, by="y", now=T0))
    assert (
        await store.reserve_idempotency_key(
            KeyReservation(key_id="other", fingerprint="fp2", now=T0, by="z", until=T0 + LEASE)
        )
        is None
    )

    for key_id, holder, result in [("held", "x", None), ("answered", "y", {"outcome": "first"}), ("other", "z", None)]:
        with pytest.raises(IdempotencyKeyTakenError) as taken:
            await _decide(store, "run", _key(key_id, now=T0 + MS))
        assert (taken.value.existing["reservedBy"], taken.value.existing["result"]) == (holder, result)

    assert await store.get("refund-agent", "run") == before
    assert await store.list_events("refund-agent", "run") == []


async def test_a_decision_that_fails_its_conditions_reserves_nothing(reserving: SnapshotStore) -> None:
    store = reserving
    await store.insert(snapshot("run"), b"[]")

    assert await _decide(store, "run", _key("k"), call_id="not-this-call") is None
    assert await _decide(store, "gone", _key("k")) is None

    assert (
        await store.reserve_idempotency_key(
            KeyReservation(key_id="k", fingerprint="fp", now=T0 + MS, by="b", until=T0 + LEASE)
        )
        is None
    )


async def test_a_lapsed_reservation_is_taken_over_by_the_decision(reserving: SnapshotStore) -> None:
    store = reserving
    await store.insert(snapshot("run"), b"[]")
    assert (
        await store.reserve_idempotency_key(
            KeyReservation(key_id="k", fingerprint="fp", now=T0, by="dead", until=T0 + MS)
        )
        is None
    )

    written = await _decide(store, "run", _key("k", by="a", now=T0 + 2 * MS))

    assert written is not None
    assert not await store.renew_idempotency_key("k", by="dead", until=T0 + LEASE)
    held = await store.reserve_idempotency_key(
        KeyReservation(key_id="k", fingerprint="fp", now=T0 + 3 * MS, by="b", until=T0 + LEASE)
    )
    assert held is not None
    assert held["reservedBy"] == "a"
