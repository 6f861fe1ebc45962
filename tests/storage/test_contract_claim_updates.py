"""The ``updates`` of a claim's writes (part of the ``RunStore`` contract): run-update batches
written with ``claim``, ``record_decision``'s ``claim``, ``replace_claimed``, ``delete_claimed``
and ``release_claim`` when the write succeeds, in order, and never when it fails, on every store."""

from __future__ import annotations

from datetime import timedelta

from storage import DecisionClaim, RunUpdateBatchDocument, SnapshotStore
from storage.protocol import ClaimedDeletion, ClaimedReplacement, ClaimRelease, ClaimWrite, DecisionWrite

from ._contract import T0, decision, snapshot, tool_call

UNTIL = T0 + timedelta(seconds=60)
C = "01700000000000000001-aaaaaaaaaaaa"


def _batch(seq: int) -> RunUpdateBatchDocument:
    ident = f"{C}.{seq:08d}"
    return {"_id": ident, "agentId": "refund-agent", "runId": "run", "at": T0, "updates": f'[{{"id": "{ident}"}}]'}


async def _stored(store: SnapshotStore) -> list[str]:
    return [b["_id"] for b in await store.list_run_updates("refund-agent", "run", after=None, limit=100)]


async def _claimed(store: SnapshotStore, *batches: RunUpdateBatchDocument) -> None:
    done = snapshot("run")
    done["toolCalls"][0]["decision"] = decision()
    done["pendingCount"] = 0
    await store.insert(done, b"[]")
    assert (
        await store.claim(
            ClaimWrite(agent_id="refund-agent", run_id="run", by="a", until=UNTIL, now=T0, updates=batches)
        )
        is not None
    )


async def test_a_claim_writes_its_updates_and_a_refused_claim_none(store: SnapshotStore) -> None:
    await _claimed(store, _batch(0), _batch(1))

    refused = await store.claim(
        ClaimWrite(agent_id="refund-agent", run_id="run", by="b", until=UNTIL, now=T0, updates=[_batch(2)])
    )

    assert refused is None
    assert await _stored(store) == [_batch(0)["_id"], _batch(1)["_id"]]
    [first, _] = await store.list_run_updates("refund-agent", "run", after=None, limit=100)
    assert first == _batch(0)


async def test_the_decision_that_claims_writes_the_claims_updates(store: SnapshotStore) -> None:
    await store.insert(snapshot("run", calls=[tool_call("c1"), tool_call("c2")]), b"[]")
    claim = DecisionClaim(by="a", until=UNTIL, version=1, updates=[_batch(0)])

    # a decision leaving a call waiting claims nothing, and writes no update
    first = await store.record_decision(
        DecisionWrite(
            agent_id="refund-agent", run_id="run", index=0, tool_call_id="c1", decision=decision(), now=T0, claim=claim
        )
    )
    assert first is not None
    assert first["status"] == "suspended"
    assert await _stored(store) == []

    last = DecisionClaim(by="a", until=UNTIL, version=first["version"], updates=[_batch(0)])
    written = await store.record_decision(
        DecisionWrite(
            agent_id="refund-agent", run_id="run", index=1, tool_call_id="c2", decision=decision(), now=T0, claim=last
        )
    )
    assert written is not None
    assert written["status"] == "resuming"
    assert await _stored(store) == [_batch(0)["_id"]]


async def test_the_end_of_a_claim_writes_its_updates_only_while_held(store: SnapshotStore) -> None:
    await _claimed(store, _batch(0))

    assert not await store.delete_claimed(
        ClaimedDeletion(agent_id="refund-agent", run_id="run", by="b", updates=[_batch(1)])
    )
    assert await store.delete_claimed(
        ClaimedDeletion(agent_id="refund-agent", run_id="run", by="a", updates=[_batch(2), _batch(3)])
    )

    assert await _stored(store) == [_batch(0)["_id"], _batch(2)["_id"], _batch(3)["_id"]]


async def test_suspending_again_and_releasing_write_their_updates_only_while_held(store: SnapshotStore) -> None:
    await _claimed(store)
    error = {"type": "ValueError", "message": "no", "at": T0}

    assert (
        await store.release_claim(
            ClaimRelease(agent_id="refund-agent", run_id="run", by="b", error=error, now=T0, updates=[_batch(0)])
        )
        is None
    )
    released = await store.release_claim(
        ClaimRelease(agent_id="refund-agent", run_id="run", by="a", error=error, now=T0, updates=[_batch(1)])
    )
    assert released is not None
    assert await store.claim(ClaimWrite(agent_id="refund-agent", run_id="run", by="a", until=UNTIL, now=T0)) is not None
    calls = [tool_call("c9")]
    lost = await store.replace_claimed(
        ClaimedReplacement(
            agent_id="refund-agent",
            run_id="run",
            by="b",
            tool_calls=calls,
            history=b"[]",
            history_id="h-b",
            now=T0,
            updates=[_batch(2)],
        )
    )
    assert lost is None
    replaced = await store.replace_claimed(
        ClaimedReplacement(
            agent_id="refund-agent",
            run_id="run",
            by="a",
            tool_calls=calls,
            history=b"[]",
            history_id="h-a",
            now=T0,
            updates=[_batch(3)],
        )
    )
    assert replaced is not None

    assert await _stored(store) == [_batch(1)["_id"], _batch(3)["_id"]]
