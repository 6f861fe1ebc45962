"""The reviewers' queue of every store (``ReviewQueueStore``, issue 45): runs with a pending call
in queue order, earliest deadline first, then those without one, oldest first, walked by keyset;
the pending-call count; and the review claim's conditional write, cleared by the decision's."""

from __future__ import annotations

from datetime import timedelta

import pytest

from storage import (
    ApproverSeeingCount,
    QueueFilter,
    ReviewCandidates,
    ReviewClaimDocument,
    SnapshotDocument,
    SnapshotStore,
    queue_key,
)
from storage.protocol import ApprovalWrite, DecisionWrite, NoticeWrite, ReviewClaimWrite

from ._contract import T0, decision, feed_event, snapshot, tool_call

HOUR, SECOND = timedelta(hours=1), timedelta(seconds=1)


def _run(run_id: str, *, suspended: timedelta, deadline: timedelta | None = None, **fields: object) -> SnapshotDocument:
    call = tool_call("c1")
    if deadline is not None:
        call["expiresAt"] = T0 + deadline
    doc = snapshot(run_id, calls=[call], **fields)  # type: ignore[arg-type]
    doc["suspendedAt"] = doc["updatedAt"] = T0 + suspended
    return doc


async def _seed(store: SnapshotStore) -> None:
    runs = [
        _run("a", suspended=0 * SECOND, deadline=2 * HOUR),
        _run("b", suspended=1 * SECOND, deadline=1 * HOUR),
        _run("c", suspended=5 * SECOND),
        _run("d", suspended=3 * SECOND),
        _run("f", suspended=4 * SECOND, agent_id="weather-agent", resource="r2"),
    ]
    sub = _run("e", suspended=2 * SECOND, deadline=3 * HOUR)
    sub["parentRunId"] = "a"
    for doc in [*runs, sub]:
        await store.insert(doc, b"[]")


EVERY = QueueFilter()


async def _ids(store: SnapshotStore, queue_filter: QueueFilter = EVERY, **paging: object) -> list[str]:
    return [doc["_id"] for doc in await store.list_review_runs(queue_filter, **paging)]  # type: ignore[arg-type]


async def test_runs_are_listed_due_first_then_oldest_and_walked_by_keyset(store: SnapshotStore) -> None:
    await _seed(store)
    assert await _ids(store, limit=10) == ["b", "a", "e", "d", "f", "c"]
    walked: list[str] = []
    after = None
    while page := await store.list_review_runs(QueueFilter(), limit=2, after=after):
        walked.extend(doc["_id"] for doc in page)
        after = queue_key(page[-1])
    assert walked == ["b", "a", "e", "d", "f", "c"]
    assert await _ids(store, QueueFilter(agent_ids=frozenset({"weather-agent"})), limit=10) == ["f"]
    assert await _ids(store, QueueFilter(resource_ids=frozenset({"r2"})), limit=10) == ["f"]
    assert await _ids(store, QueueFilter(resource_id="r1", thread_id="t1"), limit=10) == ["b", "a", "e", "d", "c"]
    assert await _ids(store, QueueFilter(expires_before=T0 + 90 * 60 * SECOND), limit=10) == ["b"]
    assert await store.count_review_questions(QueueFilter()) == 5  # the sub-run's call is its supervisor's card
    assert await store.count_review_questions(QueueFilter(agent_ids=frozenset({"refund-agent"}))) == 4


async def test_a_decided_run_leaves_the_queue(store: SnapshotStore) -> None:
    await _seed(store)
    written = await store.record_decision(
        DecisionWrite(
            agent_id="refund-agent",
            run_id="d",
            index=0,
            tool_call_id="c1",
            decision=decision(),
            now=T0 + HOUR,
            event=feed_event("x", run_id="d"),
        )
    )
    assert written is not None
    assert await _ids(store, limit=10) == ["b", "a", "e", "f", "c"]
    assert await store.count_review_questions(QueueFilter()) == 4


async def test_a_review_claim_is_one_conditional_write_and_the_decision_clears_it(store: SnapshotStore) -> None:
    await store.insert(snapshot("run"), b"[]")
    claim: ReviewClaimDocument = {"by": "key:x", "at": T0, "until": T0 + HOUR}

    async def write(version: int, value: ReviewClaimDocument | None, event_id: str) -> SnapshotDocument | None:
        return await store.record_review_claim(
            ReviewClaimWrite(
                agent_id="refund-agent",
                run_id="run",
                index=0,
                tool_call_id="c1",
                question_id=None,
                version=version,
                claim=value,
                now=T0,
                event=feed_event(event_id),
            )
        )

    claimed = await write(1, claim, "e1")
    assert claimed is not None
    assert claimed["toolCalls"][0]["reviewClaim"] == claim
    assert claimed["version"] == 2
    assert await write(1, {**claim, "by": "key:y"}, "e2") is None  # read before X's: nothing written
    assert (await store.get("refund-agent", "run"))["toolCalls"][0]["reviewClaim"] == claim  # type: ignore[index]
    released = await write(2, None, "e3")
    assert released is not None
    assert "reviewClaim" not in released["toolCalls"][0]
    assert await write(3, claim, "e4") is not None
    decided = await store.record_decision(
        DecisionWrite(
            agent_id="refund-agent",
            run_id="run",
            index=0,
            tool_call_id="c1",
            decision=decision(),
            now=T0,
            event=feed_event("e5"),
        )
    )
    assert decided is not None
    assert "reviewClaim" not in decided["toolCalls"][0]
    assert [e["_id"] for e in await store.list_events("refund-agent", "run")] == ["e1", "e3", "e4", "e5"]


def _mixed_runs() -> list[SnapshotDocument]:
    """Runs of three agents, every thread and resource (none too), 1 to 3 calls, some sub-runs."""
    runs = []
    for number in range(24):
        calls = [tool_call(f"c{index}") for index in range(1 + number % 3)]
        doc = snapshot(
            f"m{number:02}",
            agent_id=("refund-agent", "weather-agent", "mail-agent")[number % 3],
            thread=(None, "t1", "t2")[number // 3 % 3],
            resource=(None, "r1", "r2")[number // 9 % 3],
            calls=calls,
        )
        if number % 7 == 6:
            doc["parentRunId"] = "m00"
        runs.append(doc)
    return runs


QUEUE_FILTERS = [
    QueueFilter(),
    QueueFilter(agent_ids=frozenset({"refund-agent"})),
    QueueFilter(agent_ids=frozenset({"weather-agent", "mail-agent"})),
    QueueFilter(thread_id="t1"),
    QueueFilter(resource_id="r2"),
    QueueFilter(thread_id="t2", resource_id="r1"),
    QueueFilter(resource_ids=frozenset({"r1", "r2"})),
    QueueFilter(agent_ids=frozenset({"mail-agent"}), thread_id="t1", resource_ids=frozenset({"r2"})),
    QueueFilter(resource_id="r1", resource_ids=frozenset({"r2"})),
    QueueFilter(resource_id="r1", resource_ids=frozenset({"r1"})),
]


def _expected(runs: list[SnapshotDocument], f: QueueFilter) -> int:
    """The pending calls of the waiting runs ``f`` matches, sub-runs left out (counted by hand)."""
    return sum(
        doc["pendingCount"]
        for doc in runs
        if doc["status"] == "suspended"
        and doc["parentRunId"] is None
        and (f.agent_ids is None or doc["agentId"] in f.agent_ids)
        and (f.thread_id is None or doc["threadId"] == f.thread_id)
        and (f.resource_id is None or doc["resourceId"] == f.resource_id)
        and (f.resource_ids is None or doc["resourceId"] in f.resource_ids)
    )


async def test_the_count_sums_the_pending_calls_of_every_filter_combination(store: SnapshotStore) -> None:
    runs = _mixed_runs()
    await store.insert_many([(doc, b"[]") for doc in runs[:12]])
    for doc in runs[12:]:
        await store.insert(doc, b"[]")
    for doc in runs[1::4]:  # a call of some runs decided
        written = await store.record_decision(
            DecisionWrite(
                agent_id=doc["agentId"], run_id=doc["_id"], index=0, tool_call_id="c0", decision=decision(), now=T0
            )
        )
        assert written is not None
        doc.update(written)
    for f in QUEUE_FILTERS:
        assert await store.count_review_questions(f) == _expected(runs, f), f


async def test_an_empty_set_of_agents_or_resources_matches_nothing(store: SnapshotStore) -> None:
    await _seed(store)
    for empty in (QueueFilter(agent_ids=frozenset()), QueueFilter(resource_ids=frozenset())):
        assert await _ids(store, empty, limit=10) == []
        assert await store.count_review_questions(empty) == 0


async def _candidate_ids(
    store: SnapshotStore, candidates: ReviewCandidates, queue_filter: QueueFilter = EVERY, *, limit: int = 100
) -> list[str]:
    """Every candidate run's id, walked ``limit`` at a time by run id."""
    walked: list[str] = []
    after = None
    while True:
        page = await store.list_review_candidates(queue_filter, candidates, limit=limit, after=after)
        walked.extend(doc["_id"] for doc in page)
        if len(page) < limit:
            return walked
        after = page[-1]["_id"]


async def _seed_candidates(store: SnapshotStore) -> None:
    """Runs by starter (``s-`` known, ``u-`` unknown), approver (``a-``) and pending tool (``t-``)."""
    approved = tool_call("c1")
    approved["approvalsRequired"] = 3
    approved["approvals"] = [{"decidedBy": "key:alice", "decidedAt": T0}]
    docs = [
        snapshot("a-1", calls=[approved, tool_call("c2", approval=False)]),
        snapshot("s-1"),
        snapshot("s-2", resource="r2"),
        snapshot("s-3"),
        snapshot("t-1", agent_id="weather-agent", calls=[tool_call("c1", approval=False)]),
        snapshot("t-2", agent_id="weather-agent", thread="t2", calls=[tool_call("c1", approval=False)]),
        snapshot("u-1"),
    ]
    starters = {"s-1": "key:alice", "s-2": "key:alice", "s-3": None}  # s-3: in-process code; u-1: unknown
    for doc in docs:
        if doc["_id"] != "u-1":
            doc["startedBy"] = starters.get(doc["_id"], "key:carol")
    sub = snapshot("s-sub")
    sub["startedBy"], sub["parentRunId"] = "key:alice", "s-1"
    resuming = snapshot("s-resuming")
    resuming["startedBy"], resuming["status"] = "key:alice", "resuming"
    for doc in [*docs, sub, resuming]:
        await store.insert(doc, b"[]")


async def test_candidate_runs_are_listed_by_each_part_once_in_run_id_order(store: SnapshotStore) -> None:
    await _seed_candidates(store)
    assert await _candidate_ids(store, ReviewCandidates()) == []
    assert await _candidate_ids(store, ReviewCandidates(approver="key:alice")) == ["a-1"]
    assert await _candidate_ids(store, ReviewCandidates(approver="key:bob")) == []
    assert await _candidate_ids(store, ReviewCandidates(starter="key:alice")) == ["s-1", "s-2"]
    assert await _candidate_ids(store, ReviewCandidates(unknown_starter=True)) == ["u-1"]
    assert await _candidate_ids(store, ReviewCandidates(tool_names=frozenset({"ask_city"}))) == ["a-1", "t-1", "t-2"]
    every = ReviewCandidates(
        approver="key:alice", starter="key:alice", unknown_starter=True, tool_names=frozenset({"ask_city"})
    )
    expected = ["a-1", "s-1", "s-2", "t-1", "t-2", "u-1"]
    assert await _candidate_ids(store, every) == expected
    for limit in (1, 2, 4):
        assert await _candidate_ids(store, every, limit=limit) == expected
    assert await _candidate_ids(store, every, QueueFilter(agent_ids=frozenset({"weather-agent"}))) == ["t-1", "t-2"]
    assert await _candidate_ids(store, every, QueueFilter(thread_id="t2")) == ["t-2"]
    assert await _candidate_ids(store, every, QueueFilter(resource_ids=frozenset({"r2"}))) == ["s-2"]
    assert await _candidate_ids(store, every, QueueFilter(resource_id="r1", agent_ids=frozenset())) == []
    assert await store.list_review_candidates(EVERY, every, limit=0) == []


async def test_a_candidate_run_follows_its_writes(store: SnapshotStore) -> None:
    await _seed_candidates(store)
    weather = ReviewCandidates(tool_names=frozenset({"ask_city"}))
    written = await store.record_decision(
        DecisionWrite(
            agent_id="weather-agent",
            run_id="t-1",
            index=0,
            tool_call_id="c1",
            decision=decision("resumed"),
            now=T0 + HOUR,
            event=feed_event("x", agent_id="weather-agent", run_id="t-1"),
        )
    )
    assert written is not None
    assert await _candidate_ids(store, weather) == ["a-1", "t-2"]  # t-1 left the queue
    bob = ReviewCandidates(approver="key:bob")
    assert await _candidate_ids(store, bob) == []
    approval = await store.record_approval(
        ApprovalWrite(
            agent_id="refund-agent",
            run_id="a-1",
            index=0,
            tool_call_id="c1",
            approval={"decidedBy": "key:bob", "decidedAt": T0 + HOUR},
            approvals_before=1,
            decision=None,
            now=T0 + HOUR,
            event=feed_event("y", run_id="a-1"),
        )
    )
    assert approval is not None
    assert await _candidate_ids(store, bob) == ["a-1"]


async def test_a_count_seeing_an_approver_tells_whether_a_waiting_run_holds_its_approval(
    store: SnapshotStore,
) -> None:
    if not isinstance(store, ApproverSeeingCount):
        pytest.skip("the store's queue total does not tell it (ApproverSeeingCount)")
    await _seed_candidates(store)
    for f in (EVERY, QueueFilter(agent_ids=frozenset({"weather-agent"})), QueueFilter(thread_id="t2")):
        total = await store.count_review_questions(f)
        # key:alice approved in a-1, a waiting run; key:bob in none: no candidate of that part to read
        assert (await store.count_review_questions_seeing(f, "key:bob")) == (total, False), f
        assert (await store.count_review_questions_seeing(f, "key:alice"))[0] == total, f
    assert (await store.count_review_questions_seeing(EVERY, "key:alice"))[1] is True
    assert await store.count_review_questions_seeing(QueueFilter(agent_ids=frozenset()), "key:alice") == (0, False)


async def test_claimed_and_escalated_runs_are_candidate_parts_that_follow_their_writes(store: SnapshotStore) -> None:
    claimed = tool_call("c1")
    claimed["reviewClaim"] = {"by": "key:x", "at": T0, "until": T0 + HOUR}
    lapsed = tool_call("c1")
    lapsed["reviewClaim"] = {"by": "key:y", "at": T0, "until": T0}  # lapsed: still a candidate
    escalated = tool_call("c2", approval=False)
    escalated["escalated"] = True
    for doc in (
        snapshot("c-1", calls=[claimed]),
        snapshot("c-2", calls=[lapsed, escalated]),
        snapshot("e-1", calls=[tool_call("c1"), escalated]),
        snapshot("n-2"),
    ):
        await store.insert(doc, b"[]")
    claims, escalations = ReviewCandidates(claimed=True), ReviewCandidates(escalated=True)
    assert await _candidate_ids(store, claims) == ["c-1", "c-2"]
    assert await _candidate_ids(store, escalations) == ["c-2", "e-1"]
    assert await _candidate_ids(store, ReviewCandidates(claimed=True, escalated=True)) == ["c-1", "c-2", "e-1"]
    written = await store.record_review_claim(
        ReviewClaimWrite(
            agent_id="refund-agent",
            run_id="n-2",
            index=0,
            tool_call_id="c1",
            question_id=None,
            version=1,
            claim={"by": "key:z", "at": T0, "until": T0 + HOUR},
            now=T0,
            event=feed_event("claimed"),
        )
    )
    assert written is not None
    assert await _candidate_ids(store, claims) == ["c-1", "c-2", "n-2"]
    event = feed_event("escalated", run_id="n-2")
    noticed = await store.record_notice(
        NoticeWrite(
            agent_id="refund-agent",
            run_id="n-2",
            index=0,
            tool_call_id="c1",
            question_id=None,
            notice="escalated",
            now=T0,
            event=event,
        )
    )
    assert noticed is not None
    assert await _candidate_ids(store, escalations) == ["c-2", "e-1", "n-2"]
