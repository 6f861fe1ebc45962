"""Tool- and client-defined JSON is stored and read back unchanged on every store (issue 14, part 5).

Any JSON value a model, a tool or a client produces (keys starting with ``$`` or holding ``.``,
empty keys, unicode, integers beyond 64 bits, floats, deep nesting) goes in and comes out equal,
wherever runsgate keeps it: a tool call's ``args``, ``suspendPayload`` and ``resumeSchema``, a
decision's ``resumeData`` and ``reason``, an event's ``data``, an idempotency key's ``result``.
The reported instances first, then a Hypothesis property over generated JSON, on the memory
store, a SQLite file and FerretDB (docs/storage.md "Stored JSON").
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from pymongo.errors import DocumentTooLarge

from storage import (
    DecisionDocument,
    EventDocument,
    KeyAnswer,
    KeyReservation,
    RunFilter,
    SnapshotDocument,
    SnapshotStore,
    ToolCallDocument,
)
from storage.protocol import DecisionWrite, EventsAfter
from storage.strict_json import NotStrictJsonError
from tests._servers import mongo_store

from ._contract import snapshot

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class Address(BaseModel):
    street: str
    city: str


class Customer(BaseModel):
    """A resume schema with a nested model: its JSON Schema has ``$defs`` and ``$ref``."""

    name: str
    address: Address


AWKWARD_ARGS: dict[str, Any] = {
    "$set": {"a.b": 1, "$inc": [{"x.y.z": True}]},
    "": {"": ""},
    "big": [2**63, -(2**63) - 1, 2**64, 10**30, -(10**40)],
    "floats": [1.5, -0.0, 1e-300, 1.7976931348623157e308, 5e-324],
    "unicode": "café ☕ 𝄞 \u0000 \u2028",
    "$": None,
}


def call(call_id: str, *, args: Any = None, payload: Any = None, schema: Any = None) -> ToolCallDocument:
    return {
        "toolCallId": call_id,
        "toolName": "tool",
        "args": args,
        "requiresApproval": args is not None,
        "suspendPayload": payload,
        "resumeSchema": schema,
        "decision": None,
    }


def decided(resume_data: Any, reason: str | None = None) -> DecisionDocument:
    return {
        "kind": "resumed",
        "decidedAt": T0,
        "decidedBy": "alice",
        "reason": reason,
        "resumeData": resume_data,
        "idempotencyKey": None,
    }


def event(run_id: str, data: dict[str, Any], index: int = 0) -> EventDocument:
    return {
        "_id": f"{index:020d}-{uuid.uuid4().hex[:12]}",
        "runId": run_id,
        "agentId": "json-agent",
        "threadId": None,
        "resourceId": None,
        "type": "completed",
        "at": T0,
        "by": "alice",
        "data": data,
    }


async def _stored(store: SnapshotStore, doc: SnapshotDocument) -> SnapshotDocument:
    """Insert ``doc``; check that ``get`` and the listing return it unchanged; return it as read."""
    await store.insert(doc, b"[]")
    got = await store.get(doc["agentId"], doc["_id"])
    assert got == doc
    listed = [d for d in await store.list_runs(doc["agentId"], RunFilter()) if d["_id"] == doc["_id"]]
    assert listed == [doc]
    assert await store.get_many([doc["_id"]]) == [doc]
    return got


# -- the reported instances ----------------------------------------------------------------------------


async def test_a_resume_schema_of_a_nested_pydantic_model_is_stored(store: SnapshotStore) -> None:
    schema = Customer.model_json_schema()
    assert "$defs" in schema
    assert "$ref" in str(schema)

    await _stored(store, snapshot(agent_id="json-agent", calls=[call("c1", payload={"q": "who?"}, schema=schema)]))


async def test_approval_args_with_dollar_and_dotted_keys_and_big_integers_are_stored(store: SnapshotStore) -> None:
    await _stored(store, snapshot(agent_id="json-agent", calls=[call("c1", args=AWKWARD_ARGS)]))


async def test_the_answers_so_far_and_the_approval_metadata_of_a_call_are_stored(store: SnapshotStore) -> None:
    # given a call that was answered twice (client JSON) and whose tool passed metadata to
    # ApprovalRequired (tool JSON), both with keys MongoDB refuses as field names
    asked = call("c1", args=AWKWARD_ARGS)
    asked["answers"] = [AWKWARD_ARGS, {"a.b": [2**70]}]
    asked["approvalMetadata"] = {"$why": "over the limit", "x.y": -(2**65)}

    await _stored(store, snapshot(agent_id="json-agent", calls=[asked]))


async def test_resume_data_and_reason_of_a_decision_are_stored(store: SnapshotStore) -> None:
    doc = snapshot(agent_id="json-agent", calls=[call("c1", payload=AWKWARD_ARGS), call("c2", payload=None)])
    await store.insert(doc, b"[]")

    updated = await store.record_decision(
        DecisionWrite(
            agent_id="json-agent",
            run_id=doc["_id"],
            index=0,
            tool_call_id="c1",
            decision=decided(AWKWARD_ARGS, "$why.not"),
            now=T0,
        )
    )

    assert updated is not None
    assert updated["toolCalls"][0]["decision"] == decided(AWKWARD_ARGS, "$why.not")
    got = await store.get("json-agent", doc["_id"])
    assert got is not None
    assert got["toolCalls"][0]["decision"] == decided(AWKWARD_ARGS, "$why.not")


async def test_a_completed_events_output_is_stored(store: SnapshotStore) -> None:
    stored = event("r1", {"output": AWKWARD_ARGS})
    await store.append_event(stored)

    assert await store.list_events("json-agent", "r1") == [stored]
    assert await store.list_events_after(EventsAfter(agent_id="json-agent", after_event_id=None, limit=10)) == [stored]


async def test_an_idempotency_result_is_stored(store: SnapshotStore) -> None:
    assert (
        await store.reserve_idempotency_key(KeyReservation(key_id="json-agent:resumeRun:k", fingerprint="fp", now=T0))
        is None
    )
    await store.complete_idempotency_key(
        KeyAnswer(key_id="json-agent:resumeRun:k", result={"outcome": {"output": AWKWARD_ARGS}}, now=T0)
    )

    again = await store.reserve_idempotency_key(
        KeyReservation(key_id="json-agent:resumeRun:k", fingerprint="fp", now=T0)
    )

    assert again is not None
    assert again["result"] == {"outcome": {"output": AWKWARD_ARGS}}


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")], ids=["inf", "-inf", "nan"])
async def test_a_float_no_json_holds_is_refused_by_every_store_and_nothing_is_written(
    store: SnapshotStore, value: float
) -> None:
    # RFC 8259 has no NaN or Infinity: a store writes neither (docs/storage.md "Stored JSON")
    doc = snapshot(agent_id="json-agent", calls=[call("c1", args={"amount": value})])

    with pytest.raises(NotStrictJsonError):
        await store.insert(doc, b"[]")
    with pytest.raises(NotStrictJsonError):
        await store.append_event(event("r-inf", {"output": [value]}))

    assert await store.get("json-agent", doc["_id"]) is None
    assert await store.list_events("json-agent", "r-inf") == []


# -- the property -------------------------------------------------------------------------------------

KEYS = st.one_of(
    st.sampled_from(["", "$", "$ref", "$defs", "a.b", ".", "$x.y", "_id", "\u0000", "é", "𝄞"]),
    st.text(max_size=8),
)
NUMBERS = st.one_of(
    st.integers(min_value=-(2**64), max_value=2**64),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=False, allow_infinity=False),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=12))


def json_values(max_leaves: int = 25) -> st.SearchStrategy[Any]:
    """Any JSON value: awkward keys, unicode, big integers, floats, nested objects and lists."""
    return st.recursive(
        SCALARS,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
        max_leaves=max_leaves,
    )


def deep(value: Any, depth: int) -> Any:
    """``value`` nested ``depth`` levels deep, alternating objects and lists."""
    for level in range(depth):
        value = {"$d": value} if level % 2 else [value]
    return value


@settings(
    max_examples=25,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    args=json_values(),
    payload=json_values(),
    schema=st.dictionaries(KEYS, json_values(8), max_size=4),
    resume_data=json_values(),
    reason=st.one_of(st.none(), st.text(max_size=20)),
    output=json_values(),
    depth=st.integers(0, 60),
)
async def test_any_json_is_stored_and_read_back_unchanged(
    store: SnapshotStore,
    args: Any,
    payload: Any,
    schema: dict[str, Any],
    resume_data: Any,
    reason: str | None,
    output: Any,
    depth: int,
) -> None:
    # given JSON from a model (args), a tool (payload, schema, output) and a client (resume data, reason)
    doc = snapshot(
        agent_id="json-agent",
        calls=[call("c1", args={"value": args}), call("c2", payload=deep(payload, depth), schema=schema)],
    )

    # when it is stored in a snapshot, a decision, an event and an idempotency key
    await _stored(store, doc)
    decision = decided(resume_data, reason)
    updated = await store.record_decision(
        DecisionWrite(
            agent_id="json-agent",
            run_id=doc["_id"],
            index=1,
            tool_call_id="c2",
            decision=decision,
            now=T0 + timedelta(seconds=1),
        )
    )
    stored_event = event(doc["_id"], {"output": output, "reason": reason})
    await store.append_event(stored_event)
    key = f"json-agent:resumeRun:{uuid.uuid4().hex}"
    await store.reserve_idempotency_key(KeyReservation(key_id=key, fingerprint="fp", now=T0))
    await store.complete_idempotency_key(KeyAnswer(key_id=key, result={"outcome": {"output": output}}, now=T0))

    # then each place reads it back unchanged
    assert updated is not None
    assert updated["toolCalls"][1]["decision"] == decision
    got = await store.get("json-agent", doc["_id"])
    assert got is not None
    assert got["toolCalls"][0]["args"] == {"value": args}
    assert got["toolCalls"][1]["suspendPayload"] == deep(payload, depth)
    assert got["toolCalls"][1]["resumeSchema"] == schema
    assert got["toolCalls"][1]["decision"] == decision
    assert await store.list_events("json-agent", doc["_id"]) == [stored_event]
    replayed = await store.reserve_idempotency_key(KeyReservation(key_id=key, fingerprint="fp", now=T0))
    assert replayed is not None
    assert replayed["result"] == {"outcome": {"output": output}}


@pytest.mark.mongo
async def test_mongo_stores_json_as_text_and_still_reads_documents_written_before(mongodb_uri: str) -> None:
    store = mongo_store(mongodb_uri)
    await store.open()
    try:
        # given a snapshot, an event and a key written by this version, and one of each written before
        doc = snapshot("new", agent_id="json-agent", calls=[call("c1", args={"$ref": 2**70})])
        await store.insert(doc, b"[]")
        old = snapshot("old", agent_id="json-agent", calls=[call("c1", args={"order_id": 1042})])
        old["schemaVersion"] = 1
        await store.database["run_snapshots"].insert_one(dict(old))
        await store.database["run_events"].insert_one(dict(event("old", {"output": "done"})))
        await store.database["idempotency_keys"].insert_one(
            {"_id": "old-key", "fingerprint": "fp", "result": {"outcome": {"output": 1}}, "createdAt": T0}
        )

        # then the new one holds JSON text, and both read back as written
        raw = await store.database["run_snapshots"].find_one({"_id": "new"})
        assert raw is not None
        assert raw["toolCalls"][0]["argsJson"] == '{"$ref":1180591620717411303424}'
        assert "args" not in raw["toolCalls"][0]
        assert await store.get("json-agent", "new") == doc
        assert await store.get("json-agent", "old") == old
        assert [e["data"] for e in await store.list_events("json-agent", "old")] == [{"output": "done"}]
        replayed = await store.reserve_idempotency_key(KeyReservation(key_id="old-key", fingerprint="fp", now=T0))
        assert replayed is not None
        assert replayed["result"] == {"outcome": {"output": 1}}
    finally:
        await store.drop_all()
        await store.close()


@pytest.mark.mongo
async def test_a_snapshot_mongo_refuses_leaves_no_history_behind(mongodb_uri: str) -> None:
    store = mongo_store(mongodb_uri)
    await store.open()
    try:
        # given a snapshot over MongoDB's 16 MB document limit
        doc = snapshot(agent_id="json-agent", calls=[call("c1", payload="x" * (17 * 1024 * 1024))])

        # when it is inserted, the store refuses it
        with pytest.raises(DocumentTooLarge):
            await store.insert(doc, b"[]")

        # then neither the run nor its history is stored
        assert await store.get("json-agent", doc["_id"]) is None
        assert await store.database["run_histories"].count_documents({}) == 0
    finally:
        await store.drop_all()
        await store.close()
