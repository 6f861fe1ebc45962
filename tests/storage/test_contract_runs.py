"""The ``RunStore`` part of the store contract (snapshots, histories, decisions, claims, stalled runs),
run against the memory store, a SQLite file and a real MongoDB server (the ``store`` fixture)."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta

import pytest

from storage import (
    SCHEMA_VERSION,
    DuplicateRunError,
    MongoSnapshotStore,
    NewerSchemaError,
    RunErrorDocument,
    RunFilter,
    SnapshotStore,
    SQLiteSnapshotStore,
    rules,
    sort_key,
)
from storage.protocol import (
    ClaimedDeletion,
    ClaimedReplacement,
    ClaimRelease,
    ClaimRenewal,
    ClaimWrite,
    DecisionWrite,
    RunPage,
)
from tests._servers import mongo_store

from ._contract import T0, decision, feed_event, snapshot, tool_call


async def test_insert_get_and_history_roundtrip(store: SnapshotStore) -> None:
    doc = snapshot("run-1")
    await store.insert(doc, b'[{"kind":"request"}]')

    got = await store.get("refund-agent", "run-1")

    assert got == doc
    assert await store.load_history("refund-agent", "run-1") == b'[{"kind":"request"}]'


async def test_a_history_is_read_by_the_id_its_claim_holder_read(store: SnapshotStore) -> None:
    """``load_history(history_id=...)``: the history stored under that id; an id no longer stored
    reads the run's own history."""
    doc = snapshot("run-1")
    await store.insert(doc, b'[{"kind":"request"}]')

    by_id = await store.load_history("refund-agent", "run-1", history_id=doc["historyId"])
    unknown = await store.load_history("refund-agent", "run-1", history_id="gone")

    assert by_id == unknown == b'[{"kind":"request"}]'


async def test_another_agents_run_is_invisible(store: SnapshotStore) -> None:
    await store.insert(snapshot("run-1", agent_id="refund-agent"), b"[]")

    assert await store.get("weather-agent", "run-1") is None
    assert await store.load_history("weather-agent", "run-1") is None
    assert await store.list_runs("weather-agent", RunFilter()) == []
    assert await store.count_runs("weather-agent", RunFilter()) == 0


async def test_duplicate_insert_is_refused_and_keeps_the_first(store: SnapshotStore) -> None:
    first = snapshot("run-1")
    await store.insert(first, b"first")

    with pytest.raises(DuplicateRunError):
        await store.insert(snapshot("run-1", thread="other"), b"second")

    assert await store.get("refund-agent", "run-1") == first
    assert await store.load_history("refund-agent", "run-1") == b"first"


async def test_listing_is_newest_first_then_by_id_descending(store: SnapshotStore) -> None:
    docs = [
        snapshot("a", created=T0),
        snapshot("b", created=T0 + timedelta(seconds=1)),
        snapshot("c", created=T0 + timedelta(seconds=1)),
        snapshot("d", created=T0 - timedelta(days=1)),
    ]
    for doc in docs:
        await store.insert(doc, b"[]")

    listed = await store.list_runs("refund-agent", RunFilter())

    assert [d["_id"] for d in listed] == ["c", "b", "a", "d"]
    assert await store.count_runs("refund-agent", RunFilter()) == 4


async def test_filters_combine_and_date_bounds_are_inclusive(store: SnapshotStore) -> None:
    await store.insert(snapshot("old", created=T0 - timedelta(hours=1), thread="t1", resource="r1"), b"[]")
    await store.insert(snapshot("edge-from", created=T0, thread="t1", resource="r1"), b"[]")
    await store.insert(snapshot("mid", created=T0 + timedelta(minutes=30), thread="t2", resource="r1"), b"[]")
    await store.insert(snapshot("edge-to", created=T0 + timedelta(hours=1), thread="t1", resource="r2"), b"[]")
    await store.insert(snapshot("late", created=T0 + timedelta(hours=2), thread="t1", resource="r1"), b"[]")

    async def ids(f: RunFilter) -> list[str]:
        listed = [d["_id"] for d in await store.list_runs("refund-agent", f)]
        assert await store.count_runs("refund-agent", f) == len(listed)
        return listed

    window = RunFilter(from_date=T0, to_date=T0 + timedelta(hours=1))
    assert await ids(window) == ["edge-to", "mid", "edge-from"]
    assert await ids(RunFilter(thread_id="t1")) == ["late", "edge-to", "edge-from", "old"]
    assert await ids(RunFilter(resource_id="r1")) == ["late", "mid", "edge-from", "old"]
    assert await ids(RunFilter(thread_id="t1", resource_id="r1", from_date=T0)) == ["late", "edge-from"]
    assert await ids(RunFilter(thread_id="nope")) == []


async def test_date_bounds_below_a_millisecond_do_not_widen_the_range(store: SnapshotStore) -> None:
    await store.insert(snapshot("x", created=T0), b"[]")

    just_after = T0 + timedelta(microseconds=400)

    assert await store.count_runs("refund-agent", RunFilter(from_date=just_after)) == 0
    assert await store.count_runs("refund-agent", RunFilter(to_date=just_after)) == 1


async def test_skip_limit_and_keyset_bounds(store: SnapshotStore) -> None:
    for i in range(7):
        await store.insert(snapshot(f"r{i}", created=T0 + timedelta(seconds=i // 2)), b"[]")
    everything = await store.list_runs("refund-agent", RunFilter())
    order = [d["_id"] for d in everything]
    assert order == ["r6", "r5", "r4", "r3", "r2", "r1", "r0"]

    page = await store.list_runs("refund-agent", RunFilter(), RunPage(limit=2, skip=2))
    after = await store.list_runs("refund-agent", RunFilter(), RunPage(limit=3, after=sort_key(everything[1])))
    before = await store.list_runs("refund-agent", RunFilter(), RunPage(before=sort_key(everything[3])))
    last = await store.list_runs(
        "refund-agent", RunFilter(), RunPage(limit=2, before=sort_key(everything[5]), from_end=True)
    )
    between = await store.list_runs(
        "refund-agent", RunFilter(), RunPage(after=sort_key(everything[0]), before=sort_key(everything[4]))
    )

    assert [d["_id"] for d in page] == ["r4", "r3"]
    assert [d["_id"] for d in after] == ["r4", "r3", "r2"]
    assert [d["_id"] for d in before] == ["r6", "r5", "r4"]
    assert [d["_id"] for d in last] == ["r3", "r2"]
    assert [d["_id"] for d in between] == ["r5", "r4", "r3"]


async def test_record_decision_answers_only_the_question_it_was_read_for(store: SnapshotStore) -> None:
    # given a call that already waits on its next question (q2): the tool asked again after an answer
    asked = tool_call("c1", approval=False)
    asked["questionId"] = "q2"
    await store.insert(snapshot("run", calls=[asked]), b"[]")

    # when a late decision read for the earlier question (q1) is recorded
    late = await store.record_decision(
        DecisionWrite(
            agent_id="refund-agent",
            run_id="run",
            index=0,
            tool_call_id="c1",
            question_id="q1",
            decision=decision("resumed"),
            now=T0,
        )
    )
    current = await store.record_decision(
        DecisionWrite(
            agent_id="refund-agent",
            run_id="run",
            index=0,
            tool_call_id="c1",
            question_id="q2",
            decision=decision("resumed"),
            now=T0,
        )
    )

    # then it is refused, and the question that waits gets its own answer
    assert late is None
    assert current is not None
    assert current["toolCalls"][0]["decision"] == decision("resumed")


async def test_a_decision_read_from_a_call_without_a_question_is_refused_once_the_call_waits_on_one(
    store: SnapshotStore,
) -> None:
    # given a run stored before calls had a questionId (a call without one answers question None)
    old = tool_call("c1", approval=False)
    await store.insert(snapshot("old", calls=[old]), b"[]")
    # and a run whose call waits on question q2 (the same call asked again since it was read)
    asked = tool_call("c1", approval=False)
    asked["questionId"] = "q2"
    await store.insert(snapshot("asked", calls=[asked]), b"[]")

    # when a decision read while the call had no question is recorded on each
    on_old = await store.record_decision(
        DecisionWrite(
            agent_id="refund-agent",
            run_id="old",
            index=0,
            tool_call_id="c1",
            question_id=None,
            decision=decision("resumed"),
            now=T0,
        )
    )
    on_asked = await store.record_decision(
        DecisionWrite(
            agent_id="refund-agent",
            run_id="asked",
            index=0,
            tool_call_id="c1",
            question_id=None,
            decision=decision("resumed"),
            now=T0,
        )
    )

    # then the call without a question takes it, and the call waiting on q2 refuses it
    assert on_old is not None
    assert on_old["toolCalls"][0]["decision"] == decision("resumed")
    assert on_asked is None
    stored = await store.get("refund-agent", "asked")
    assert stored is not None
    assert stored["toolCalls"][0]["decision"] is None


async def test_record_decision_is_conditional_and_counts_down(store: SnapshotStore) -> None:
    await store.insert(snapshot("run", calls=[tool_call("c1"), tool_call("c2")]), b"[]")

    first = await store.record_decision(
        DecisionWrite(agent_id="refund-agent", run_id="run", index=1, tool_call_id="c2", decision=decision(), now=T0)
    )
    again = await store.record_decision(
        DecisionWrite(
            agent_id="refund-agent", run_id="run", index=1, tool_call_id="c2", decision=decision("declined"), now=T0
        )
    )
    wrong_id = await store.record_decision(
        DecisionWrite(agent_id="refund-agent", run_id="run", index=0, tool_call_id="c2", decision=decision(), now=T0)
    )
    other_agent = await store.record_decision(
        DecisionWrite(agent_id="weather-agent", run_id="run", index=0, tool_call_id="c1", decision=decision(), now=T0)
    )

    assert first is not None
    assert first["pendingCount"] == 1
    assert first["version"] == 2
    assert first["toolCalls"][1]["decision"] == decision()
    assert first["toolCalls"][0]["decision"] is None
    assert again is None
    assert wrong_id is None
    assert other_agent is None
    stored = await store.get("refund-agent", "run")
    assert stored == first


async def test_claim_needs_every_call_decided_and_is_exclusive(store: SnapshotStore) -> None:
    await store.insert(snapshot("run", calls=[tool_call("c1"), tool_call("c2")]), b"[]")
    until = T0 + timedelta(seconds=60)

    early = await store.claim(ClaimWrite(agent_id="refund-agent", run_id="run", by="i1", until=until, now=T0))
    await store.record_decision(
        DecisionWrite(agent_id="refund-agent", run_id="run", index=0, tool_call_id="c1", decision=decision(), now=T0)
    )
    await store.record_decision(
        DecisionWrite(agent_id="refund-agent", run_id="run", index=1, tool_call_id="c2", decision=decision(), now=T0)
    )
    won = await store.claim(ClaimWrite(agent_id="refund-agent", run_id="run", by="i1", until=until, now=T0))
    lost = await store.claim(ClaimWrite(agent_id="refund-agent", run_id="run", by="i2", until=until, now=T0))
    late_decision = await store.record_decision(
        DecisionWrite(agent_id="refund-agent", run_id="run", index=0, tool_call_id="c1", decision=decision(), now=T0)
    )

    assert early is None
    assert won is not None
    assert won["status"] == "resuming"
    assert won["claim"] == {"by": "i1", "until": until}
    assert lost is None
    assert late_decision is None


async def test_expired_claim_is_taken_over_and_the_old_holder_is_fenced(store: SnapshotStore) -> None:
    await store.insert(snapshot("run"), b"old")
    await store.record_decision(
        DecisionWrite(agent_id="refund-agent", run_id="run", index=0, tool_call_id="c1", decision=decision(), now=T0)
    )
    await store.claim(
        ClaimWrite(agent_id="refund-agent", run_id="run", by="i1", until=T0 + timedelta(seconds=10), now=T0)
    )

    too_soon = await store.claim(
        ClaimWrite(
            agent_id="refund-agent",
            run_id="run",
            by="i2",
            until=T0 + timedelta(seconds=70),
            now=T0 + timedelta(seconds=5),
        )
    )
    renewed_by_other = await store.renew_claim(
        ClaimRenewal(agent_id="refund-agent", run_id="run", by="i2", until=T0 + timedelta(days=1))
    )
    takeover = await store.claim(
        ClaimWrite(
            agent_id="refund-agent",
            run_id="run",
            by="i2",
            until=T0 + timedelta(seconds=80),
            now=T0 + timedelta(seconds=20),
        )
    )
    stale_delete = await store.delete_claimed(ClaimedDeletion(agent_id="refund-agent", run_id="run", by="i1"))
    stale_renew = await store.renew_claim(
        ClaimRenewal(agent_id="refund-agent", run_id="run", by="i1", until=T0 + timedelta(days=1))
    )

    assert too_soon is None
    assert renewed_by_other is False
    assert takeover is not None
    assert takeover["claim"] == {"by": "i2", "until": T0 + timedelta(seconds=80)}
    assert takeover["toolCalls"][0]["decision"] == decision()
    assert stale_delete is False
    assert stale_renew is False
    assert await store.load_history("refund-agent", "run") == b"old"


async def test_a_claim_is_renewed_by_one_write_while_held(store: SnapshotStore) -> None:
    await store.insert(snapshot("run"), b"[]")
    await store.record_decision(
        DecisionWrite(agent_id="refund-agent", run_id="run", index=0, tool_call_id="c1", decision=decision(), now=T0)
    )
    await store.claim(
        ClaimWrite(agent_id="refund-agent", run_id="run", by="i1", until=T0 + timedelta(seconds=10), now=T0)
    )
    later = T0 + timedelta(minutes=5)

    by_other = await store.renew_claim(ClaimRenewal(agent_id="refund-agent", run_id="run", by="i2", until=later))
    renewed = await store.renew_claim(ClaimRenewal(agent_id="refund-agent", run_id="run", by="i1", until=later))

    assert ClaimRenewal(agent_id="refund-agent", run_id="run", by="i1", until=later).condition == rules.held(
        "refund-agent", "run", "i1"
    )
    assert (by_other, renewed) == (False, True)
    got = await store.get("refund-agent", "run")
    assert got is not None
    assert got["claim"] == {"by": "i1", "until": later}


async def test_a_claim_writes_its_events_with_it_and_a_refused_claim_none(store: SnapshotStore) -> None:
    await store.insert(snapshot("run"), b"[]")
    await store.record_decision(
        DecisionWrite(agent_id="refund-agent", run_id="run", index=0, tool_call_id="c1", decision=decision(), now=T0)
    )
    takeover = {**feed_event("001-takeover"), "type": "takeover", "by": "i1", "data": {"previousClaim": None}}
    resumed = {**feed_event("002-resumed"), "type": "resumed", "by": "alice", "data": {"instanceId": "i1"}}
    refused_event = {**feed_event("003-resumed"), "type": "resumed", "data": {"instanceId": "i2"}}

    won = await store.claim(
        ClaimWrite(
            agent_id="refund-agent",
            run_id="run",
            by="i1",
            until=T0 + timedelta(seconds=60),
            now=T0,
            events=[takeover, resumed],
        )
    )
    lost = await store.claim(
        ClaimWrite(
            agent_id="refund-agent",
            run_id="run",
            by="i2",
            until=T0 + timedelta(seconds=60),
            now=T0,
            events=[refused_event],
        )
    )

    assert won is not None
    assert won["claim"] == {"by": "i1", "until": T0 + timedelta(seconds=60)}
    assert lost is None
    logged = await store.list_events("refund-agent", "run")
    assert [(e["_id"], e["type"], e["by"], e["data"]) for e in logged] == [
        ("001-takeover", "takeover", "i1", {"previousClaim": None}),
        ("002-resumed", "resumed", "alice", {"instanceId": "i1"}),
    ]
    stored = await store.get("refund-agent", "run")
    assert stored == won


async def test_a_claim_at_a_version_the_run_has_left_is_refused_and_writes_no_event(store: SnapshotStore) -> None:
    await store.insert(snapshot("run"), b"[]")
    read = await store.record_decision(
        DecisionWrite(agent_id="refund-agent", run_id="run", index=0, tool_call_id="c1", decision=decision(), now=T0)
    )
    assert read is not None
    first = await store.claim(
        ClaimWrite(agent_id="refund-agent", run_id="run", by="i1", until=T0 + timedelta(seconds=10), now=T0)
    )
    assert first is not None
    later = T0 + timedelta(seconds=20)
    takeover = {**feed_event("001-takeover"), "type": "takeover", "by": "i2", "data": {"previousClaim": None}}

    # i2 read the run before i1 claimed it: its events would name no previous claim
    stale = await store.claim(
        ClaimWrite(
            agent_id="refund-agent",
            run_id="run",
            by="i2",
            until=later,
            now=later,
            events=[takeover],
            version=read["version"],
        )
    )
    current = await store.claim(
        ClaimWrite(agent_id="refund-agent", run_id="run", by="i2", until=later, now=later, version=first["version"])
    )

    assert stale is None
    assert current is not None
    assert current["claim"] == {"by": "i2", "until": later}
    assert await store.list_events("refund-agent", "run") == []


async def test_replace_claimed_stores_new_calls_and_history(store: SnapshotStore) -> None:
    await store.insert(snapshot("run"), b"old")
    await store.record_decision(
        DecisionWrite(agent_id="refund-agent", run_id="run", index=0, tool_call_id="c1", decision=decision(), now=T0)
    )
    await store.claim(
        ClaimWrite(agent_id="refund-agent", run_id="run", by="i1", until=T0 + timedelta(seconds=60), now=T0)
    )
    later = T0 + timedelta(seconds=3)

    lost = await store.replace_claimed(
        ClaimedReplacement(
            agent_id="refund-agent",
            run_id="run",
            by="i2",
            tool_calls=[tool_call("x")],
            history=b"nope",
            history_id="h-x",
            now=later,
        )
    )
    replaced = await store.replace_claimed(
        ClaimedReplacement(
            agent_id="refund-agent",
            run_id="run",
            by="i1",
            tool_calls=[tool_call("c9", approval=False)],
            history=b"new",
            history_id="h-new",
            now=later,
        )
    )

    assert lost is None
    assert replaced is not None
    assert replaced["status"] == "suspended"
    assert replaced["claim"] is None
    assert replaced["pendingCount"] == 1
    assert replaced["suspendedAt"] == later
    assert replaced["createdAt"] == T0
    assert [c["toolCallId"] for c in replaced["toolCalls"]] == ["c9"]
    assert await store.load_history("refund-agent", "run") == b"new"


async def test_delete_claimed_removes_the_run_and_its_history(store: SnapshotStore) -> None:
    await store.insert(snapshot("run"), b"h")
    await store.record_decision(
        DecisionWrite(agent_id="refund-agent", run_id="run", index=0, tool_call_id="c1", decision=decision(), now=T0)
    )
    await store.claim(
        ClaimWrite(agent_id="refund-agent", run_id="run", by="i1", until=T0 + timedelta(seconds=60), now=T0)
    )

    deleted = await store.delete_claimed(ClaimedDeletion(agent_id="refund-agent", run_id="run", by="i1"))

    assert deleted is True
    assert await store.get("refund-agent", "run") is None
    assert await store.load_history("refund-agent", "run") is None
    assert await store.count_runs("refund-agent", RunFilter()) == 0


class _Crash(BaseException):
    """The process dying between recording a run's completion and appending its event."""


async def test_a_run_whose_completion_is_recorded_is_neither_listed_nor_counted_once_get_reads_it_as_gone(
    store: SnapshotStore,
) -> None:
    # given two runs, one claimed and finished by a process that dies once its completion is
    # recorded (SQLite takes the whole write back; the memory store writes it in one step)
    await store.insert(snapshot("finished", created=T0 + timedelta(seconds=1)), b"h")
    await store.insert(snapshot("waiting", created=T0), b"h")
    await store.record_decision(
        DecisionWrite(
            agent_id="refund-agent", run_id="finished", index=0, tool_call_id="c1", decision=decision(), now=T0
        )
    )
    await store.claim(
        ClaimWrite(agent_id="refund-agent", run_id="finished", by="i1", until=T0 + timedelta(seconds=60), now=T0)
    )
    completed = {**feed_event("001-completed", run_id="finished"), "type": "completed"}
    if hasattr(store, "before_event"):

        async def crash(events: object) -> None:
            store.before_event = None  # type: ignore[attr-defined]
            raise _Crash

        store.before_event = crash  # type: ignore[attr-defined]
        with pytest.raises(_Crash):
            await store.delete_claimed(
                ClaimedDeletion(agent_id="refund-agent", run_id="finished", by="i1", event=completed)
            )
    else:
        await store.delete_claimed(
            ClaimedDeletion(agent_id="refund-agent", run_id="finished", by="i1", event=completed)
        )

    # when the runs are read one by one, together, listed and counted
    readable = [run_id for run_id in ("finished", "waiting") if await store.get("refund-agent", run_id) is not None]
    together = [doc["_id"] for doc in await store.get_many(["finished", "waiting"])]
    listed = [doc["_id"] for doc in await store.list_runs("refund-agent", RunFilter())]
    paged = [doc["_id"] for doc in await store.list_runs("refund-agent", RunFilter(), RunPage(limit=1))]
    counted = await store.count_runs("refund-agent", RunFilter())

    # then every read agrees on which runs are stored
    assert sorted(together) == readable
    assert listed == readable
    assert paged == readable[:1]
    assert counted == len(readable)


async def test_release_claim_keeps_decisions_and_records_the_error(store: SnapshotStore) -> None:
    await store.insert(snapshot("run"), b"h")
    await store.record_decision(
        DecisionWrite(agent_id="refund-agent", run_id="run", index=0, tool_call_id="c1", decision=decision(), now=T0)
    )
    await store.claim(
        ClaimWrite(agent_id="refund-agent", run_id="run", by="i1", until=T0 + timedelta(seconds=60), now=T0)
    )
    error = {"type": "ModelHTTPError", "message": "boom", "at": T0}

    released = await store.release_claim(
        ClaimRelease(agent_id="refund-agent", run_id="run", by="i1", error=error, now=T0)
    )  # type: ignore[arg-type]
    retried = await store.claim(
        ClaimWrite(agent_id="refund-agent", run_id="run", by="i2", until=T0 + timedelta(seconds=60), now=T0)
    )

    assert released is not None
    assert released["status"] == "suspended"
    assert released["lastError"] == error
    assert released["toolCalls"][0]["decision"] == decision()
    assert retried is not None
    assert await store.load_history("refund-agent", "run") == b"h"


async def test_release_claim_with_a_history_keeps_the_tool_results(store: SnapshotStore) -> None:
    await store.insert(snapshot("run"), b"before the tools ran")
    await store.record_decision(
        DecisionWrite(agent_id="refund-agent", run_id="run", index=0, tool_call_id="c1", decision=decision(), now=T0)
    )
    await store.claim(
        ClaimWrite(agent_id="refund-agent", run_id="run", by="i1", until=T0 + timedelta(seconds=60), now=T0)
    )
    error: RunErrorDocument = {"type": "ModelHTTPError", "message": "boom", "at": T0}

    lost = await store.release_claim(
        ClaimRelease(
            agent_id="refund-agent", run_id="run", by="i2", error=error, now=T0, history=b"stale", history_id="h-stale"
        )
    )
    released = await store.release_claim(
        ClaimRelease(
            agent_id="refund-agent",
            run_id="run",
            by="i1",
            error=error,
            now=T0,
            history=b"tools ran",
            history_id="h-new",
        )
    )

    assert lost is None
    assert released is not None
    assert released["historyId"] == "h-new"
    assert released["lastError"] == error
    assert released["toolCalls"][0]["decision"] == decision()
    assert await store.load_history("refund-agent", "run") == b"tools ran"


async def test_stalled_runs_are_expired_claims_and_idle_decided_runs(store: SnapshotStore) -> None:
    minute = timedelta(minutes=1)
    # pending: still waits for a decision; never stalled
    await store.insert(snapshot("pending"), b"h")
    # expired: claimed by an instance whose claim ran out
    await store.insert(snapshot("expired"), b"h")
    await store.record_decision(
        DecisionWrite(
            agent_id="refund-agent", run_id="expired", index=0, tool_call_id="c1", decision=decision(), now=T0
        )
    )
    await store.claim(ClaimWrite(agent_id="refund-agent", run_id="expired", by="dead", until=T0 + minute, now=T0))
    # live: claimed, claim still valid at T0 + 2 min
    await store.insert(snapshot("live", agent_id="weather-agent"), b"h")
    await store.record_decision(
        DecisionWrite(agent_id="weather-agent", run_id="live", index=0, tool_call_id="c1", decision=decision(), now=T0)
    )
    await store.claim(ClaimWrite(agent_id="weather-agent", run_id="live", by="alive", until=T0 + 5 * minute, now=T0))
    # orphan: every call decided, never claimed (its instance died in between)
    await store.insert(snapshot("orphan", agent_id="weather-agent"), b"h")
    await store.record_decision(
        DecisionWrite(
            agent_id="weather-agent", run_id="orphan", index=0, tool_call_id="c1", decision=decision(), now=T0 - minute
        )
    )
    # fresh: every call decided just now; its instance is about to claim it
    await store.insert(snapshot("fresh"), b"h")
    await store.record_decision(
        DecisionWrite(agent_id="refund-agent", run_id="fresh", index=0, tool_call_id="c1", decision=decision(), now=T0)
    )
    # failed: continuing failed; left to retryRun
    await store.insert(snapshot("failed"), b"h")
    await store.record_decision(
        DecisionWrite(agent_id="refund-agent", run_id="failed", index=0, tool_call_id="c1", decision=decision(), now=T0)
    )
    await store.claim(ClaimWrite(agent_id="refund-agent", run_id="failed", by="i1", until=T0 + minute, now=T0))
    error: RunErrorDocument = {"type": "RuntimeError", "message": "model is down", "at": T0}
    await store.release_claim(
        ClaimRelease(agent_id="refund-agent", run_id="failed", by="i1", error=error, now=T0 - 2 * minute)
    )

    stalled = await store.list_stalled_runs(now=T0 + 2 * minute, idle_before=T0 - minute / 2, limit=10)
    first = await store.list_stalled_runs(now=T0 + 2 * minute, idle_before=T0 - minute / 2, limit=1)

    assert [d["_id"] for d in stalled] == ["orphan", "expired"]
    assert [d["_id"] for d in first] == ["orphan"]


async def test_open_refuses_snapshots_of_a_newer_schema(store: SnapshotStore) -> None:
    newer = snapshot("from-the-future")
    newer["schemaVersion"] = SCHEMA_VERSION + 1
    await store.insert(newer, b"h")

    reopened: SnapshotStore = store
    if isinstance(store, MongoSnapshotStore):
        reopened = mongo_store(store.uri)
    elif isinstance(store, SQLiteSnapshotStore):
        reopened = SQLiteSnapshotStore(store.path)
    with pytest.raises(NewerSchemaError) as refused:
        await reopened.open()

    assert (refused.value.found, refused.value.known) == (SCHEMA_VERSION + 1, SCHEMA_VERSION)
    assert f"schema version {SCHEMA_VERSION + 1}" in str(refused.value)
    assert await store.get("refund-agent", "from-the-future") == newer


async def test_get_many_returns_existing_runs_of_any_agent(store: SnapshotStore) -> None:
    await store.insert(snapshot("a", agent_id="refund-agent"), b"[]")
    await store.insert(snapshot("b", agent_id="weather-agent"), b"[]")

    got = await store.get_many(["b", "missing", "a", "a"])

    assert sorted(d["_id"] for d in got) == ["a", "b"]


async def test_insert_many_then_list(store: SnapshotStore) -> None:
    docs = [snapshot(f"bulk-{i}", created=T0 + timedelta(seconds=i)) for i in range(50)]

    await store.insert_many([(d, b"[]") for d in docs])

    assert await store.count_runs("refund-agent", RunFilter()) == 50
    listed = await store.list_runs("refund-agent", RunFilter(), RunPage(limit=3))
    assert [d["_id"] for d in listed] == ["bulk-49", "bulk-48", "bulk-47"]
    assert await store.load_history("refund-agent", "bulk-7") == b"[]"


async def test_skip_limit_and_count_within_a_filtered_date_range_after_bulk_and_single_inserts(
    store: SnapshotStore,
) -> None:
    # given runs of two threads over 20 seconds, half in bulk and half one by one
    docs = [
        snapshot(f"r{i:02d}", created=T0 + timedelta(seconds=i), thread=f"t{i % 2}", resource="r1") for i in range(20)
    ]
    await store.insert_many([(d, b"[]") for d in docs[::2]])
    for d in docs[1::2]:
        await store.insert(d, b"[]")
    window = RunFilter(thread_id="t1", from_date=T0 + timedelta(seconds=5), to_date=T0 + timedelta(seconds=15))

    # when a page is skipped into, taken from the end, and counted
    second_page = await store.list_runs("refund-agent", window, RunPage(limit=2, skip=2))
    past_the_end = await store.list_runs("refund-agent", window, RunPage(limit=2, skip=10))
    oldest = await store.list_runs("refund-agent", window, RunPage(limit=2, from_end=True))

    # then only t1 runs created in [5 s, 15 s] count, newest first
    assert await store.count_runs("refund-agent", window) == 6  # r15 r13 r11 r09 r07 r05
    assert [d["_id"] for d in second_page] == ["r11", "r09"]
    assert past_the_end == []
    assert [d["_id"] for d in oldest] == ["r07", "r05"]


@pytest.mark.mongo
async def test_history_over_16_mb_is_stored_and_read_back(mongodb_uri: str) -> None:

    mongo = mongo_store(mongodb_uri)
    await mongo.open()
    try:
        history = os.urandom(17 * 1024 * 1024)  # incompressible: still 17 MB after zlib
        await mongo.insert(snapshot("big"), history)

        assert await mongo.load_history("refund-agent", "big") == history
        assert await mongo.count_runs("refund-agent", RunFilter()) == 1
    finally:
        await mongo.drop_all()
        await mongo.close()


async def test_two_clients_deciding_two_calls_of_one_run_at_once_keep_both(
    two_clients: tuple[SnapshotStore, SnapshotStore],
) -> None:
    """Two stores on one database (two connections or clients, as two processes would have)
    race on different calls of one run: both decisions are kept.

    FerretDB 1.24 does not apply conditional updates atomically; without the run write lease
    one decision was lost in about a third of the rounds.
    """
    first, second = two_clients
    for round_ in range(10):
        run_id = f"race-{round_}"
        await first.insert(snapshot(run_id, calls=[tool_call("c1"), tool_call("c2")]), b"[]")

        results = await asyncio.gather(
            first.record_decision(
                DecisionWrite(
                    agent_id="refund-agent", run_id=run_id, index=0, tool_call_id="c1", decision=decision(), now=T0
                )
            ),
            second.record_decision(
                DecisionWrite(
                    agent_id="refund-agent",
                    run_id=run_id,
                    index=1,
                    tool_call_id="c2",
                    decision=decision("declined"),
                    now=T0,
                )
            ),
        )

        stored = await second.get("refund-agent", run_id)
        assert all(r is not None for r in results)
        assert stored is not None
        assert [c["decision"] for c in stored["toolCalls"]] == [decision(), decision("declined")]
        assert stored["pendingCount"] == 0
        assert stored["version"] == 3
