"""The store contract of deadlines (issue 18 part 2), on every store (memory, SQLite, MongoDB/FerretDB).

A call's ``expiresAt`` survives the store; the run's ``expiresAt`` is the earliest deadline of its
calls still pending, derived by the store on insert, decision and rewrite; ``expiresBefore``
filters on it with keyset paging and counts; ``list_expired_runs`` returns only runs past a
deadline; ``record_decision`` writes the ``expired`` event before the ``decision`` event.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from storage import EventDocument, RunFilter, SnapshotStore, ToolCallDocument, sort_key
from storage.protocol import ClaimedReplacement, ClaimWrite, DecisionWrite, RunPage

from ._contract import T0, decision, snapshot, tool_call


def deadline_call(call_id: str, minutes: int | None) -> ToolCallDocument:
    call = tool_call(call_id)
    if minutes is not None:
        call["expiresAt"] = T0 + timedelta(minutes=minutes)
        call["onExpiry"] = "decline"
    return call


def event(event_type: str, run_id: str, n: int) -> EventDocument:
    return {
        "_id": f"{n:020d}-{uuid.uuid4().hex[:12]}",
        "runId": run_id,
        "agentId": "refund-agent",
        "threadId": "t1",
        "resourceId": "r1",
        "type": event_type,  # type: ignore[typeddict-item]
        "at": T0,
        "by": "expiry",
        "data": {"n": n},
    }


async def test_the_runs_deadline_is_the_earliest_pending_one_kept_current(store: SnapshotStore) -> None:
    # given a run with deadlines in 30 and 10 minutes and a call without one
    doc = snapshot(calls=[deadline_call("a", 30), deadline_call("b", 10), deadline_call("c", None)])
    await store.insert(doc, b"[]")

    # then the run's deadline is the earliest, and each call keeps its own
    stored = await store.get("refund-agent", doc["_id"])
    assert stored is not None
    assert stored.get("expiresAt") == T0 + timedelta(minutes=10)
    assert [c.get("expiresAt") for c in stored["toolCalls"]] == [
        T0 + timedelta(minutes=30),
        T0 + timedelta(minutes=10),
        None,
    ]
    assert [c.get("onExpiry") for c in stored["toolCalls"]] == ["decline", "decline", None]

    # when the earliest is decided, then the next earliest; then the last one
    updated = await store.record_decision(
        DecisionWrite(
            agent_id="refund-agent", run_id=doc["_id"], index=1, tool_call_id="b", decision=decision(), now=T0
        )
    )
    assert updated is not None
    assert updated.get("expiresAt") == T0 + timedelta(minutes=30)
    updated = await store.record_decision(
        DecisionWrite(
            agent_id="refund-agent", run_id=doc["_id"], index=0, tool_call_id="a", decision=decision(), now=T0
        )
    )
    assert updated is not None
    assert updated.get("expiresAt") is None
    reread = await store.get("refund-agent", doc["_id"])
    assert reread is not None
    assert reread.get("expiresAt") is None


async def test_a_rewrite_takes_the_deadlines_of_its_new_calls(store: SnapshotStore) -> None:
    # given a run whose every call is decided and claimed
    doc = snapshot(calls=[deadline_call("a", 5)])
    await store.insert(doc, b"[]")
    await store.record_decision(
        DecisionWrite(
            agent_id="refund-agent", run_id=doc["_id"], index=0, tool_call_id="a", decision=decision(), now=T0
        )
    )
    assert await store.claim(
        ClaimWrite(agent_id="refund-agent", run_id=doc["_id"], by="i1", until=T0 + timedelta(minutes=1), now=T0)
    )

    # when it suspends again with a new question due in 90 minutes
    replaced = await store.replace_claimed(
        ClaimedReplacement(
            agent_id="refund-agent",
            run_id=doc["_id"],
            by="i1",
            tool_calls=[deadline_call("a2", 90)],
            history=b"[1]",
            history_id=uuid.uuid4().hex,
            now=T0,
        )
    )

    # then the run's deadline is the new one, and the expiry pass sees it only after it
    assert replaced is not None
    assert replaced.get("expiresAt") == T0 + timedelta(minutes=90)
    assert await store.list_expired_runs(now=T0 + timedelta(minutes=89), limit=10) == []
    found = await store.list_expired_runs(now=T0 + timedelta(minutes=90), limit=10)
    assert [d["_id"] for d in found] == [doc["_id"]]


async def test_list_expired_runs_reads_only_runs_past_a_deadline_earliest_first(store: SnapshotStore) -> None:
    # given runs due in 1, 2 and 3 minutes (inserted out of order) and runs without a deadline
    due = {m: snapshot(calls=[deadline_call("c", m)]) for m in (3, 1, 2)}
    for doc in due.values():
        await store.insert(doc, b"[]")
    await store.insert_many([(snapshot(calls=[deadline_call("c", None)]), b"[]") for _ in range(3)])

    # when the expiry pass looks at minute 2
    found = await store.list_expired_runs(now=T0 + timedelta(minutes=2), limit=10)

    # then only the runs due by then, earliest first; the limit holds
    assert [d["_id"] for d in found] == [due[1]["_id"], due[2]["_id"]]
    assert [d["_id"] for d in await store.list_expired_runs(now=T0 + timedelta(hours=1), limit=1)] == [due[1]["_id"]]

    # and a decided call no longer counts
    await store.record_decision(
        DecisionWrite(
            agent_id="refund-agent", run_id=due[1]["_id"], index=0, tool_call_id="c", decision=decision(), now=T0
        )
    )
    found = await store.list_expired_runs(now=T0 + timedelta(minutes=2), limit=10)
    assert [d["_id"] for d in found] == [due[2]["_id"]]


async def test_expires_before_filters_pages_and_counts(store: SnapshotStore) -> None:
    # given six runs created a minute apart, due in 0..5 hours, and two without a deadline
    docs = [
        snapshot(created=T0 + timedelta(minutes=i), calls=[deadline_call("c", 60 * i)], thread="t1" if i % 2 else "t2")
        for i in range(6)
    ]
    docs += [snapshot(created=T0 + timedelta(minutes=10 + i), calls=[deadline_call("c", None)]) for i in range(2)]
    for doc in docs:
        await store.insert(doc, b"[]")
    bound = T0 + timedelta(hours=3, microseconds=500)  # below a millisecond: due at 3 h does not match

    # when listing the runs due before 3 hours
    expiring = RunFilter(expires_before=bound)
    listed = await store.list_runs("refund-agent", expiring)

    # then runs 0, 1, 2 and 3 (due before it), newest first, and the count agrees
    assert [d["_id"] for d in listed] == [docs[i]["_id"] for i in (3, 2, 1, 0)]
    assert await store.count_runs("refund-agent", expiring) == 4
    # a bound at exactly 3 h excludes the run due then: "before" is strict
    assert await store.count_runs("refund-agent", RunFilter(expires_before=T0 + timedelta(hours=3))) == 3

    # keyset pages and skip/limit walk the same runs
    first = await store.list_runs("refund-agent", expiring, RunPage(limit=2))
    rest = await store.list_runs("refund-agent", expiring, RunPage(after=sort_key(first[-1])))
    assert [d["_id"] for d in first + rest] == [d["_id"] for d in listed]
    assert [d["_id"] for d in await store.list_runs("refund-agent", expiring, RunPage(skip=1, limit=2))] == [
        docs[2]["_id"],
        docs[1]["_id"],
    ]
    last = await store.list_runs("refund-agent", expiring, RunPage(limit=1, from_end=True))
    assert [d["_id"] for d in last] == [docs[0]["_id"]]
    before = await store.list_runs("refund-agent", expiring, RunPage(before=sort_key(listed[-1])))
    assert [d["_id"] for d in before] == [d["_id"] for d in listed[:-1]]

    # combined with the other filters
    odd = RunFilter(expires_before=bound, thread_id="t1")
    assert [d["_id"] for d in await store.list_runs("refund-agent", odd)] == [docs[3]["_id"], docs[1]["_id"]]
    assert await store.count_runs("refund-agent", odd) == 2
    dated = RunFilter(expires_before=bound, from_date=T0 + timedelta(minutes=1), to_date=T0 + timedelta(minutes=2))
    assert await store.count_runs("refund-agent", dated) == 2
    allowed = RunFilter(expires_before=bound, resource_ids=frozenset({"r1"}))
    assert await store.count_runs("refund-agent", allowed) == 4
    hidden = RunFilter(expires_before=bound, resource_ids=frozenset({"other"}))
    assert await store.list_runs("refund-agent", hidden) == []
    assert await store.count_runs("refund-agent", hidden) == 0
    assert await store.count_runs("other-agent", expiring) == 0


async def test_the_expired_event_is_written_before_the_decision_event_in_one_unit(store: SnapshotStore) -> None:
    # given a run with a call
    doc = snapshot(calls=[deadline_call("c", 1)])
    await store.insert(doc, b"[]")

    # when the decision is recorded with its expired event before it
    updated = await store.record_decision(
        DecisionWrite(
            agent_id="refund-agent",
            run_id=doc["_id"],
            index=0,
            tool_call_id="c",
            decision=decision("declined"),
            now=T0,
            event=event("decision", doc["_id"], 2),
            preceding_events=[event("expired", doc["_id"], 1)],
        )
    )

    # then both are in the log, in that order
    assert updated is not None
    assert [e["type"] for e in await store.list_events("refund-agent", doc["_id"])] == ["expired", "decision"]

    # and a second attempt on the decided call writes neither
    again = await store.record_decision(
        DecisionWrite(
            agent_id="refund-agent",
            run_id=doc["_id"],
            index=0,
            tool_call_id="c",
            decision=decision(),
            now=T0,
            event=event("decision", doc["_id"], 4),
            preceding_events=[event("expired", doc["_id"], 3)],
        )
    )
    assert again is None
    assert len(await store.list_events("refund-agent", doc["_id"])) == 2
