"""The MongoDB store's conditional writes mean the same on both MongoDB test servers (FerretDB 2
on DocumentDB, and FerretDB 1.24), and on documents written by older runsgate versions.

DocumentDB answers a comparison with null through an array index (``{"toolCalls.0.decision":
None}``) as matching every document, where MongoDB and FerretDB 1.24 match only a null or missing
value (``_null_conditions``). These tests send every conditional write of the store and check that
no condition compares with null, and that documents in their older stored forms are still decided
exactly once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from storage import KeyAnswer, KeyReservation, MongoSnapshotStore, RunFilter, SnapshotStore
from storage.mongo import no_value
from storage.protocol import (
    ApprovalWrite,
    ClaimedDeletion,
    ClaimedReplacement,
    ClaimRelease,
    ClaimRenewal,
    ClaimWrite,
    DecisionWrite,
    DeliveryLease,
    RunPage,
    WebhookAttempt,
)

from ..conftest import open_store
from ._contract import T0, decision, feed_event, snapshot, tool_call
from ._null_conditions import WATCH

pytestmark = pytest.mark.mongo


@pytest.fixture(params=["mongo", "ferretdb1"])
async def mongo(request: pytest.FixtureRequest) -> AsyncIterator[MongoSnapshotStore]:
    """The MongoDB store on each test server: DocumentDB (or ``MONGODB_URI``), then FerretDB 1.24."""
    async with open_store(request, request.param) as store:
        assert isinstance(store, MongoSnapshotStore)
        yield store


VALUES = {"null": None, "string": "s", "document": {"kind": "approved"}, "empty document": {}, "zero": 0}
"""What a field may hold; ``missing`` is a document without it."""


@pytest.mark.parametrize("path", ["a", "n.b", "arr.0.b"])
async def test_no_value_matches_a_null_or_missing_field_only_on_every_path(
    mongo: MongoSnapshotStore, path: str
) -> None:
    # given documents whose field at `path` (top level, nested, through an array index) holds each value
    def holding(name: str) -> dict[str, object]:
        if name == "missing":
            return {"_id": name, "n": {}, "arr": [{}]}
        value = VALUES[name]
        return {"_id": name, "a": value, "n": {"b": value}, "arr": [{"b": value}]}

    collection = mongo.database["probe"]
    await collection.insert_many([holding(name) for name in [*VALUES, "missing"]])

    # when they are queried with no_value(path), alone and within an $or branch
    alone = {doc["_id"] async for doc in collection.find(no_value(path))}
    branch = {
        doc["_id"]
        async for doc in collection.find({"$or": [{"_id": "zero"}, {"_id": {"$ne": "zero"}, **no_value(path)}]})
    }

    # then exactly the null and the missing field match, on both engines
    assert alone == {"null", "missing"}
    assert branch == {"null", "missing", "zero"}


async def _every_conditional_write(store: SnapshotStore) -> None:
    """Each conditional write (and conditional read) of the store, each on a matching and on a
    non-matching document."""
    later = T0 + timedelta(seconds=60)
    two_person = tool_call("c2")
    two_person["approvalsRequired"] = 2
    asked = tool_call("c3", approval=False)
    asked["questionId"] = "q1"
    await store.insert(snapshot("run", calls=[tool_call("c1"), two_person, asked]), b"[]", event=feed_event("e1"))
    for _ in range(2):  # the second time, on a decided call
        await store.record_decision(
            DecisionWrite(
                agent_id="refund-agent", run_id="run", index=0, tool_call_id="c1", decision=decision(), now=T0
            )
        )
    approval = {"decidedBy": "key:alice", "decidedAt": T0}
    for before in (0, 0):  # the second time, on the wrong count
        await store.record_approval(
            ApprovalWrite(
                agent_id="refund-agent",
                run_id="run",
                index=1,
                tool_call_id="c2",
                approval=approval,
                approvals_before=before,
                decision=None,
                now=T0,
            )
        )
    for question in (None, "q1", "q1"):  # no question, then the question twice
        await store.record_decision(
            DecisionWrite(
                agent_id="refund-agent",
                run_id="run",
                index=2,
                tool_call_id="c3",
                question_id=question,
                decision=decision(),
                now=T0,
            )
        )
    await store.claim(ClaimWrite(agent_id="refund-agent", run_id="run", by="i1", until=later, now=T0))
    await store.record_approval(
        ApprovalWrite(
            agent_id="refund-agent",
            run_id="run",
            index=1,
            tool_call_id="c2",
            approval={"decidedBy": "key:bob", "decidedAt": T0},
            approvals_before=1,
            decision=decision(),
            now=T0,
        )
    )
    for by in ("i1", "i2"):
        await store.claim(ClaimWrite(agent_id="refund-agent", run_id="run", by=by, until=later, now=T0, version=5))
        await store.renew_claim(ClaimRenewal(agent_id="refund-agent", run_id="run", by=by, until=later))
    error = {"type": "RuntimeError", "message": "boom", "at": T0}
    await store.release_claim(ClaimRelease(agent_id="refund-agent", run_id="run", by="i1", error=error, now=T0))  # type: ignore[arg-type]
    await store.list_stalled_runs(now=later, idle_before=later, limit=10)
    await store.list_expired_runs(now=later, limit=10)
    await store.complete_pending_events(before=later, limit=10)
    await store.list_runs("refund-agent", RunFilter(thread_id="t1", expires_before=later), RunPage(limit=5))
    await store.count_runs("refund-agent", RunFilter(resource_id="r1"))
    await store.claim(ClaimWrite(agent_id="refund-agent", run_id="run", by="i3", until=later, now=T0))
    await store.replace_claimed(
        ClaimedReplacement(
            agent_id="refund-agent",
            run_id="run",
            by="i3",
            tool_calls=[tool_call("c4")],
            history=b"[]",
            history_id="h2",
            now=T0,
        )
    )
    await store.claim(ClaimWrite(agent_id="refund-agent", run_id="run", by="i4", until=later, now=T0))
    await store.delete_claimed(ClaimedDeletion(agent_id="refund-agent", run_id="run", by="i4", event=feed_event("e2")))

    for holder in ("a", "b"):
        await store.reserve_idempotency_key(
            KeyReservation(key_id="k", fingerprint="fp", now=T0, by=holder, until=T0 + timedelta(seconds=1))
        )
        await store.reserve_idempotency_key(
            KeyReservation(key_id="k", fingerprint="fp", now=later, by=holder, until=later)
        )  # lapsed: taken over
        await store.renew_idempotency_key("k", by=holder, until=later)
    await store.complete_idempotency_key(KeyAnswer(key_id="k", result={"ok": True}, by="b", now=later))
    await store.complete_idempotency_key(KeyAnswer(key_id="k", result={"ok": False}, by="b", now=later))
    await store.release_idempotency_key("k", by="b")

    delivery = {
        "_id": "e1.w1",
        "endpointId": "w1",
        "eventId": "e1",
        "agentId": "refund-agent",
        "runId": "run",
        "resourceId": "r1",
        "type": "run.suspended",
        "body": "{}",
        "status": "pending",
        "attempts": 0,
        "createdAt": T0,
        "nextAttemptAt": T0,
        "lastAttemptAt": None,
        "lastStatusCode": None,
        "lastError": None,
        "finishedAt": None,
        "lease": None,
    }
    await store.add_webhook_deliveries([delivery])  # type: ignore[list-item]
    for by in ("i1", "i2"):  # the second finds it leased
        await store.claim_webhook_deliveries(DeliveryLease(by=by, until=later, now=T0, limit=5))
    for _ in range(2):
        await store.finish_webhook_attempt(
            WebhookAttempt(
                delivery_id="e1.w1", by="i1", status="delivered", at=T0, next_attempt_at=T0, status_code=200, error=None
            )
        )
    await store.advance_webhook_cursor("w1:refund-agent", "e1")
    await store.advance_webhook_cursor("w1:refund-agent", "e2")


async def test_no_condition_of_the_store_compares_a_field_with_null(mongo: MongoSnapshotStore) -> None:
    with WATCH.recording() as found:
        await _every_conditional_write(mongo)

    assert found == []


async def test_a_decision_stored_in_the_first_schema_still_refuses_a_second_decision(mongo: MongoSnapshotStore) -> None:
    # given a run of schema version 1: its decision holds its resume data as a value, not JSON text
    doc = snapshot("old", calls=[tool_call("c1", approval=False), tool_call("c2")])
    doc["schemaVersion"] = 1
    doc["toolCalls"][0]["decision"] = {**decision("resumed"), "resumeData": {"name": "Paris"}}
    doc["pendingCount"] = 1
    await mongo.database["run_snapshots"].insert_one({**doc, "expiresAt": None})
    await mongo.database["run_histories"].insert_one({"_id": doc["historyId"], "runId": "old", "data": b""})

    # when a second decision arrives for the decided call, then one for the pending one
    again = await mongo.record_decision(
        DecisionWrite(
            agent_id="refund-agent", run_id="old", index=0, tool_call_id="c1", decision=decision("resumed"), now=T0
        )
    )
    pending = await mongo.record_decision(
        DecisionWrite(agent_id="refund-agent", run_id="old", index=1, tool_call_id="c2", decision=decision(), now=T0)
    )

    # then the decided call keeps its decision, and the pending one takes its own
    assert again is None
    assert pending is not None
    assert pending["toolCalls"][0]["decision"] == {**decision("resumed"), "resumeData": {"name": "Paris"}}
    assert pending["toolCalls"][1]["decision"] == decision()
    assert pending["pendingCount"] == 0


async def test_a_key_answered_before_answers_were_json_text_stays_answered(mongo: MongoSnapshotStore) -> None:
    # given an idempotency key completed by an older runsgate: its answer is a document under `result`
    answer = {"status": "COMPLETED", "runId": "r1"}
    await mongo.database["idempotency_keys"].insert_one(
        {"_id": "k", "fingerprint": "fp", "result": answer, "createdAt": T0, "reservedBy": "a", "reservedUntil": T0}
    )

    # when a retry comes after the reservation lapsed, and the old holder renews, completes, releases
    retry = await mongo.reserve_idempotency_key(
        KeyReservation(key_id="k", fingerprint="fp", now=T0 + timedelta(seconds=60), by="b", until=T0)
    )
    renewed = await mongo.renew_idempotency_key("k", by="a", until=T0 + timedelta(seconds=60))
    await mongo.complete_idempotency_key(KeyAnswer(key_id="k", result={"status": "FAILED"}, by="a", now=T0))
    await mongo.release_idempotency_key("k", by="a")

    # then the key keeps its first answer: the retry gets it, and nothing else changed it
    assert retry is not None
    assert retry["result"] == answer
    assert not renewed
    stored = await mongo.database["idempotency_keys"].find_one({"_id": "k"})
    assert stored is not None
    assert (stored["result"], stored["reservedBy"], "resultJson" in stored) == (answer, "a", False)
