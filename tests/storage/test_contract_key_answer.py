"""``delete_claimed``'s ``key`` (part of the ``RunStore`` contract): an idempotency key's answer
written with the run's deletion, only when the deletion is, on every store; a crash before the
completion's commit leaves the run stored and the key unanswered on SQLite (MongoDB: unanswered)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from storage import EventDocument, KeyAnswer, KeyReservation, MemorySnapshotStore, MongoSnapshotStore, SnapshotStore
from storage.protocol import ClaimedDeletion

from ._contract import T0
from .test_contract_claim_updates import UNTIL, _claimed

ANSWER = KeyAnswer(key_id="k", result={"outcome": {"status": "completed"}}, by="req", now=T0)
COMPLETED: EventDocument = {
    "_id": "00000000000000000001-000000000000",
    "runId": "run",
    "agentId": "refund-agent",
    "type": "completed",
    "at": T0,
    "by": None,
    "data": {"output": "x"},
}


class _Crash(BaseException):
    """The process dying before the completion's commit."""


async def _result(store: SnapshotStore) -> dict[str, Any] | None:
    found = await store.reserve_idempotency_key(
        KeyReservation(key_id="k", fingerprint="fp", now=T0, by="other", until=UNTIL)
    )
    assert found is not None
    return found["result"]


async def test_the_deletion_writes_the_keys_answer_and_a_refused_one_none(store: SnapshotStore) -> None:
    assert (
        await store.reserve_idempotency_key(KeyReservation(key_id="k", fingerprint="fp", now=T0, by="req", until=UNTIL))
        is None
    )
    await _claimed(store)

    refused = await store.delete_claimed(
        ClaimedDeletion(agent_id="refund-agent", run_id="run", by="b", event=COMPLETED, key=ANSWER)
    )
    assert refused is False
    assert await _result(store) is None

    assert (
        await store.delete_claimed(
            ClaimedDeletion(agent_id="refund-agent", run_id="run", by="a", event=COMPLETED, key=ANSWER)
        )
        is True
    )
    assert await _result(store) == ANSWER.result
    assert await store.get("refund-agent", "run") is None


async def test_a_crash_before_the_completions_commit_leaves_the_key_unanswered(store: SnapshotStore) -> None:
    if isinstance(store, MemorySnapshotStore):
        pytest.skip("the memory store writes the deletion and the answer in one step: nothing can come between")
    assert (
        await store.reserve_idempotency_key(KeyReservation(key_id="k", fingerprint="fp", now=T0, by="req", until=UNTIL))
        is None
    )
    await _claimed(store)

    async def crash(events: Sequence[Mapping[str, Any]]) -> None:
        store.before_event = None  # type: ignore[attr-defined]
        raise _Crash

    store.before_event = crash  # type: ignore[attr-defined]
    with pytest.raises(_Crash):
        await store.delete_claimed(
            ClaimedDeletion(agent_id="refund-agent", run_id="run", by="a", event=COMPLETED, key=ANSWER)
        )

    assert await _result(store) is None
    if not isinstance(store, MongoSnapshotStore):  # SQLite took the whole write back
        stored = await store.get("refund-agent", "run")
        assert stored is not None
        assert stored["status"] == "resuming"
