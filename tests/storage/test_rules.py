"""Each rule of ``storage.rules`` on every store (memory, SQLite, FerretDB 1.24, DocumentDB): the
store operation applying it accepts exactly what the rule's condition matches (``rules.matches``
on the run as read before), on both sides of each condition. The sides the contract tests
(``test_contract_runs``, ``test_approvals``, ``test_deadlines``, ``test_webhook_deliveries``)
already assert are not repeated; last, properties of ``rules.matches`` itself."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import (
    ApprovalDocument,
    RunErrorDocument,
    SnapshotDocument,
    SnapshotStore,
    ToolCallDocument,
    WebhookDeliveryDocument,
    WebhookDeliveryStatus,
    rules,
)
from storage.protocol import (
    ApprovalWrite,
    ClaimedDeletion,
    ClaimedReplacement,
    ClaimRelease,
    ClaimRenewal,
    ClaimWrite,
    DecisionWrite,
    DeliveryLease,
    DeliveryListing,
    WebhookAttempt,
)
from storage.rules import AllOf, AnyOf, AtMost, Before, Equals, Length, NoValue, matches

from ._contract import MS, T0, decision, snapshot, tool_call

AGENT = "refund-agent"
NOW = T0 + timedelta(minutes=10)
ERROR: RunErrorDocument = {"type": "RuntimeError", "message": "model is down", "at": T0}


def _call(call_id: str, *, question: str | None = None, due: timedelta | None = None) -> ToolCallDocument:
    call = tool_call(call_id)
    if question is not None:
        call["questionId"] = question
    if due is not None:
        call["expiresAt"] = T0 + due
    return call


def _decided(call: ToolCallDocument) -> ToolCallDocument:
    return {**call, "decision": decision()}


def _approval(by: str) -> ApprovalDocument:
    return {"decidedBy": by, "decidedAt": T0}


async def _read(store: SnapshotStore, run_id: str, agent_id: str = AGENT) -> SnapshotDocument:
    doc = await store.get(agent_id, run_id)
    assert doc is not None, run_id
    return doc


async def _decide_all(store: SnapshotStore, run_id: str, *, now: datetime = T0, agent_id: str = AGENT) -> None:
    for index, call in enumerate((await _read(store, run_id, agent_id))["toolCalls"]):
        if call["decision"] is None:
            recorded = await store.record_decision(
                DecisionWrite(
                    agent_id=agent_id,
                    run_id=run_id,
                    index=index,
                    tool_call_id=call["toolCallId"],
                    question_id=call.get("questionId"),
                    decision=decision(),
                    now=now,
                )
            )
            assert recorded is not None


def _assert_derived(doc: SnapshotDocument) -> None:
    """The run's ``pendingCount`` and ``expiresAt`` are what its calls give (``rules.derived``)."""
    assert {"pendingCount": doc["pendingCount"], "expiresAt": doc.get("expiresAt")} == rules.derived(doc)


# -- pending call: record_decision and record_approval -------------------------------------------

PENDING_CASES = [
    # (case, agent asking, state of the run, index, toolCallId, questionId, accepted)
    ("the pending call", AGENT, "suspended", 0, "c1", "q1", True),
    ("a call stored without a question, read without one", AGENT, "suspended", 1, "c2", None, True),
    ("a wrong toolCallId", AGENT, "suspended", 0, "c2", "q1", False),
    ("a wrong questionId", AGENT, "suspended", 0, "c1", "q0", False),
    ("no questionId for a call waiting on one", AGENT, "suspended", 0, "c1", None, False),
    ("a questionId for a call stored without one", AGENT, "suspended", 1, "c2", "q1", False),
    ("an index past the calls", AGENT, "suspended", 2, "c1", "q1", False),
    ("another agent's run", "weather-agent", "suspended", 0, "c1", "q1", False),
    ("a decided call", AGENT, "decided", 0, "c1", "q1", False),
    ("a run that is not suspended", AGENT, "resuming", 0, "c1", "q1", False),
    ("a run that does not exist", AGENT, "missing", 0, "c1", "q1", False),
]


async def _pending_run(store: SnapshotStore, state: str) -> str:
    """A run with call ``c1`` waiting on question ``q1`` and ``c2`` stored without a question, in ``state``."""
    run_id = uuid.uuid4().hex
    if state == "missing":
        return run_id
    doc = snapshot(run_id, calls=[_call("c1", question="q1"), _call("c2")])
    if state == "resuming":  # a run under a claim, its calls left as they were (the status alone refuses)
        doc["status"] = "resuming"
        doc["claim"] = {"by": "i1", "until": NOW + timedelta(hours=1)}
    await store.insert(doc, b"[]")
    if state == "decided":
        await _decide_all(store, run_id)
    return run_id


@pytest.mark.parametrize("write", ["record_decision", "record_approval"])
@pytest.mark.parametrize(
    ("agent_id", "state", "index", "call_id", "question", "accepted"),
    [case[1:] for case in PENDING_CASES],
    ids=[case[0] for case in PENDING_CASES],
)
async def test_a_decision_is_written_only_on_a_pending_call(
    store: SnapshotStore,
    write: str,
    agent_id: str,
    state: str,
    index: int,
    call_id: str,
    question: str | None,
    accepted: bool,
) -> None:
    run_id = await _pending_run(store, state)
    before = await store.get(AGENT, run_id)
    rule = rules.pending_call(agent_id, run_id, index, call_id, question)
    assert matches(rule, before or {}) is accepted

    if write == "record_decision":
        written = await store.record_decision(
            DecisionWrite(
                agent_id=agent_id,
                run_id=run_id,
                index=index,
                tool_call_id=call_id,
                question_id=question,
                decision=decision(),
                now=T0,
            )
        )
    else:
        written = await store.record_approval(
            ApprovalWrite(
                agent_id=agent_id,
                run_id=run_id,
                index=index,
                tool_call_id=call_id,
                question_id=question,
                approval=_approval("key:alice"),
                approvals_before=0,
                decision=None,
                now=T0,
            )
        )

    assert (written is not None) is accepted
    after = await store.get(AGENT, run_id)
    if written is None:
        assert after == before
    else:
        assert after == written
        assert before is not None
        assert written["version"] == before["version"] + 1
        changed = written["toolCalls"][index]
        if write == "record_decision":
            assert changed["decision"] == decision()
        else:
            assert changed.get("approvals") == [_approval("key:alice")]
        _assert_derived(written)


# -- approvals counted: record_approval ----------------------------------------------------------


@pytest.mark.parametrize(
    ("recorded", "approvals_before", "accepted"),
    [(0, 1, False), (1, 0, False), (1, 2, False), (1, 1, True), (0, 0, True)],
    ids=["one for none", "none for one", "two for one", "one for one", "none for none (absent)"],
)
async def test_an_approval_is_recorded_only_on_the_count_it_was_read_with(
    store: SnapshotStore, recorded: int, approvals_before: int, accepted: bool
) -> None:
    call = _call("c1")
    call["approvalsRequired"] = 3
    doc = snapshot(calls=[call])
    await store.insert(doc, b"[]")
    for n in range(recorded):
        assert await store.record_approval(
            ApprovalWrite(
                agent_id=AGENT,
                run_id=doc["_id"],
                index=0,
                tool_call_id="c1",
                approval=_approval(f"key:{n}"),
                approvals_before=n,
                decision=None,
                now=T0,
            )
        )
    before = await _read(store, doc["_id"])
    assert matches(rules.approvals_counted(0, approvals_before), before) is accepted

    written = await store.record_approval(
        ApprovalWrite(
            agent_id=AGENT,
            run_id=doc["_id"],
            index=0,
            tool_call_id="c1",
            approval=_approval("key:late"),
            approvals_before=approvals_before,
            decision=None,
            now=T0,
        )
    )

    assert (written is not None) is accepted
    after = await _read(store, doc["_id"])
    approvals = [a["decidedBy"] for a in after["toolCalls"][0].get("approvals", [])]
    assert approvals == [f"key:{n}" for n in range(recorded)] + (["key:late"] if accepted else [])


# -- claimable: claim ------------------------------------------------------------------------------

CLAIM_CASES = [
    # (case, calls decided of two, lease until (relative to NOW) or None, version offset, agent, accepted)
    ("every call pending", 0, None, None, AGENT, False),
    ("one of two calls decided", 1, None, None, AGENT, False),
    ("every call decided", 2, None, None, AGENT, True),
    ("every call decided, at the version read", 2, None, 0, AGENT, True),
    ("every call decided, at an older version", 2, None, -1, AGENT, False),
    ("every call decided, another agent's run", 2, None, None, "weather-agent", False),
    ("resuming under a live lease", 2, timedelta(seconds=1), None, AGENT, False),
    ("resuming under a lease ending now", 2, timedelta(0), None, AGENT, False),
    ("resuming under a lapsed lease", 2, -MS, None, AGENT, True),
    ("resuming under a lapsed lease, at the version read", 2, -MS, 0, AGENT, True),
    ("resuming under a lapsed lease, at an older version", 2, -MS, -1, AGENT, False),
    ("failed (lastError), every call decided", 2, "failed", None, AGENT, True),
]


@pytest.mark.parametrize(
    ("decided", "lease", "version_offset", "agent_id", "accepted"),
    [case[1:] for case in CLAIM_CASES],
    ids=[case[0] for case in CLAIM_CASES],
)
async def test_a_claim_takes_only_a_claimable_run(
    store: SnapshotStore,
    decided: int,
    lease: timedelta | str | None,
    version_offset: int | None,
    agent_id: str,
    accepted: bool,
) -> None:
    doc = snapshot(calls=[_call("c1"), _call("c2")])
    await store.insert(doc, b"[]")
    for index in range(decided):
        assert await store.record_decision(
            DecisionWrite(
                agent_id=AGENT,
                run_id=doc["_id"],
                index=index,
                tool_call_id=f"c{index + 1}",
                decision=decision(),
                now=T0,
            )
        )
    if isinstance(lease, timedelta):
        assert await store.claim(ClaimWrite(agent_id=AGENT, run_id=doc["_id"], by="i1", until=NOW + lease, now=T0))
    elif lease == "failed":  # continuing failed: back to suspended, lastError set (retryRun claims it)
        assert await store.claim(
            ClaimWrite(agent_id=AGENT, run_id=doc["_id"], by="i1", until=NOW + timedelta(seconds=1), now=T0)
        )
        assert await store.release_claim(ClaimRelease(agent_id=AGENT, run_id=doc["_id"], by="i1", error=ERROR, now=T0))
    before = await _read(store, doc["_id"])
    version = None if version_offset is None else before["version"] + version_offset
    rule = rules.all_of(rules.owned(agent_id, doc["_id"]), rules.claimable(NOW, version))
    assert matches(rule, before) is accepted

    until = NOW + timedelta(minutes=1)
    claimed = await store.claim(
        ClaimWrite(agent_id=agent_id, run_id=doc["_id"], by="i2", until=until, now=NOW, version=version)
    )

    assert (claimed is not None) is accepted
    after = await _read(store, doc["_id"])
    if claimed is None:
        assert after == before
    else:
        assert after == claimed
        assert (claimed["status"], claimed["claim"]) == ("resuming", {"by": "i2", "until": until})
        assert claimed["version"] == before["version"] + 1


# -- lease lapsed and stalled: list_stalled_runs ---------------------------------------------------


async def test_the_stalled_runs_are_exactly_the_lapsed_leases_and_the_idle_decided_runs(store: SnapshotStore) -> None:
    idle_before = T0 - timedelta(minutes=1)
    long_ago = T0 - timedelta(hours=2)

    async def run(name: str, *, agent_id: str = AGENT, calls: int = 1, created: datetime = T0) -> str:
        doc = snapshot(f"{name}-{uuid.uuid4().hex[:6]}", agent_id=agent_id, created=created)
        doc["toolCalls"] = [_call(f"c{i}") for i in range(calls)]
        doc["pendingCount"] = calls
        await store.insert(doc, b"[]")
        return doc["_id"]

    async def claimed(name: str, until: datetime) -> str:
        run_id = await run(name)
        await _decide_all(store, run_id)
        assert await store.claim(ClaimWrite(agent_id=AGENT, run_id=run_id, by="dead", until=until, now=T0))
        return run_id

    lapsed = await claimed("lapsed", NOW - MS)
    ends_now = await claimed("lease-ends-now", NOW)
    live = await claimed("live", NOW + timedelta(minutes=1))
    idle = await run("idle", agent_id="weather-agent", created=long_ago)
    await _decide_all(store, idle, now=idle_before - MS, agent_id="weather-agent")
    at_bound = await run("idle-at-the-bound", created=long_ago)
    await _decide_all(store, at_bound, now=idle_before)
    fresh = await run("fresh", created=long_ago)
    await _decide_all(store, fresh)
    idle_pending = await run("idle-pending", created=long_ago)
    half = await run("idle-one-of-two-decided", calls=2, created=long_ago)
    assert await store.record_decision(
        DecisionWrite(
            agent_id=AGENT, run_id=half, index=0, tool_call_id="c0", decision=decision(), now=idle_before - MS
        )
    )
    failed = await run("idle-failed", created=long_ago)
    await _decide_all(store, failed, now=long_ago)
    assert await store.claim(
        ClaimWrite(agent_id=AGENT, run_id=failed, by="i1", until=long_ago + timedelta(minutes=1), now=long_ago)
    )
    assert await store.release_claim(ClaimRelease(agent_id=AGENT, run_id=failed, by="i1", error=ERROR, now=long_ago))

    everything = await store.get_many([lapsed, ends_now, live, idle, at_bound, fresh, idle_pending, half, failed])
    listed = await store.list_stalled_runs(now=NOW, idle_before=idle_before, limit=100)

    assert {d["_id"] for d in listed} == {lapsed, idle}
    assert {d["_id"] for d in everything if matches(rules.stalled(NOW, idle_before), d)} == {lapsed, idle}
    assert [d["_id"] for d in everything if matches(rules.lease_lapsed(NOW), d)] == [lapsed]
    assert [d["_id"] for d in listed] == [idle, lapsed]  # least recently updated first


# -- held: renew_claim, replace_claimed, delete_claimed, release_claim -----------------------------

HELD_CASES = [
    # (case, agent asking, claimant asking, state, accepted)
    ("the claimant", AGENT, "i1", "claimed", True),
    ("another claimant", AGENT, "i2", "claimed", False),
    ("the claimant, on another agent's run", "weather-agent", "i1", "claimed", False),
    ("the claimant, after it released the run", AGENT, "i1", "released", False),
    ("the claimant, after another took the run over", AGENT, "i1", "taken over", False),
]

Write = Callable[[SnapshotStore, str, str, str], Awaitable[object]]
HELD_WRITES: dict[str, Write] = {
    "renew_claim": lambda s, agent, run, by: s.renew_claim(
        ClaimRenewal(agent_id=agent, run_id=run, by=by, until=NOW + timedelta(hours=1))
    ),
    "replace_claimed": lambda s, agent, run, by: s.replace_claimed(
        ClaimedReplacement(
            agent_id=agent,
            run_id=run,
            by=by,
            tool_calls=[_call("c9")],
            history=b"[9]",
            history_id=uuid.uuid4().hex,
            now=NOW,
        )
    ),
    "delete_claimed": lambda s, agent, run, by: s.delete_claimed(ClaimedDeletion(agent_id=agent, run_id=run, by=by)),
    "release_claim": lambda s, agent, run, by: s.release_claim(
        ClaimRelease(agent_id=agent, run_id=run, by=by, error=ERROR, now=NOW)
    ),
}


@pytest.mark.parametrize("write", list(HELD_WRITES))
@pytest.mark.parametrize(
    ("agent_id", "by", "state", "accepted"), [case[1:] for case in HELD_CASES], ids=[case[0] for case in HELD_CASES]
)
async def test_a_continuations_write_needs_the_claim_held(
    store: SnapshotStore, write: str, agent_id: str, by: str, state: str, accepted: bool
) -> None:
    doc = snapshot()
    await store.insert(doc, b"[0]")
    await _decide_all(store, doc["_id"])
    assert await store.claim(
        ClaimWrite(agent_id=AGENT, run_id=doc["_id"], by="i1", until=T0 + timedelta(minutes=1), now=T0)
    )
    if state == "released":
        assert await store.release_claim(ClaimRelease(agent_id=AGENT, run_id=doc["_id"], by="i1", error=ERROR, now=T0))
    elif state == "taken over":
        later = T0 + timedelta(minutes=2)
        assert await store.claim(
            ClaimWrite(agent_id=AGENT, run_id=doc["_id"], by="i2", until=later + timedelta(minutes=1), now=later)
        )
    before = await _read(store, doc["_id"])
    assert matches(rules.held(agent_id, doc["_id"], by), before) is accepted

    result = await HELD_WRITES[write](store, agent_id, doc["_id"], by)

    assert bool(result) is accepted
    after = await store.get(AGENT, doc["_id"])
    if not accepted:
        assert after == before
        assert await store.load_history(AGENT, doc["_id"]) == b"[0]"
    elif write == "delete_claimed":
        assert after is None
    elif write == "renew_claim":
        assert after == {**before, "claim": {"by": by, "until": NOW + timedelta(hours=1)}}
    else:
        assert after is not None
        assert after["version"] == before["version"] + 1
        assert (after["status"], after["claim"]) == ("suspended", None)


# -- expired: list_expired_runs --------------------------------------------------------------------


async def test_a_run_is_expired_from_its_earliest_pending_deadline_on(store: SnapshotStore) -> None:
    due = timedelta(minutes=5)
    soon = snapshot(calls=[_call("c1", due=due), _call("c2")])
    # its earlier deadline is decided: the run's deadline is the later one
    later = snapshot(calls=[_call("c1", due=due - timedelta(minutes=1)), _call("c2", due=due + timedelta(minutes=1))])
    none = snapshot(calls=[_call("c1")])
    for doc in (soon, later, none):
        await store.insert(doc, b"[]")
    assert await store.record_decision(
        DecisionWrite(agent_id=AGENT, run_id=later["_id"], index=0, tool_call_id="c1", decision=decision(), now=T0)
    )
    everything = await store.get_many([soon["_id"], later["_id"], none["_id"]])

    for at, expected in [
        (T0 + due - MS, []),
        (T0 + due, [soon["_id"]]),
        (T0 + due + timedelta(minutes=1) - MS, [soon["_id"]]),
        (T0 + due + timedelta(minutes=1), [soon["_id"], later["_id"]]),
        (T0 + timedelta(days=1), [soon["_id"], later["_id"]]),
    ]:
        listed = await store.list_expired_runs(now=at, limit=10)
        assert [d["_id"] for d in listed] == expected, at
        assert sorted(d["_id"] for d in everything if matches(rules.expired(at), d)) == sorted(expected), at


# -- pending count and earliest deadline: the derived fields of every write ---------------------------


async def test_the_pending_count_and_deadline_follow_the_calls_of_a_rewrite_and_each_decision(
    store: SnapshotStore,
) -> None:
    doc = snapshot(calls=[_call("c0", due=timedelta(minutes=1))])
    await store.insert(doc, b"[]")
    await _decide_all(store, doc["_id"])
    assert await store.claim(
        ClaimWrite(agent_id=AGENT, run_id=doc["_id"], by="i1", until=T0 + timedelta(minutes=1), now=T0)
    )

    # when the run suspends again with decided and pending calls, some with deadlines
    calls = [
        _decided(_call("a", due=timedelta(minutes=5))),  # decided: its earlier deadline does not count
        _call("b", due=timedelta(minutes=30)),
        _call("c"),
        _call("d", due=timedelta(minutes=20)),
        _decided(_call("e")),
    ]
    replaced = await store.replace_claimed(
        ClaimedReplacement(
            agent_id=AGENT,
            run_id=doc["_id"],
            by="i1",
            tool_calls=calls,
            history=b"[1]",
            history_id=uuid.uuid4().hex,
            now=T0,
        )
    )
    assert replaced is not None
    assert (replaced["pendingCount"], replaced.get("expiresAt")) == (3, T0 + timedelta(minutes=20))
    _assert_derived(replaced)
    assert await _read(store, doc["_id"]) == replaced

    # then deciding the call with the earliest deadline moves the run's to the next one
    for index, call_id, pending, deadline in [(3, "d", 2, 30), (2, "c", 1, 30), (1, "b", 0, None)]:
        before = await _read(store, doc["_id"])
        decided = await store.record_decision(
            DecisionWrite(
                agent_id=AGENT, run_id=doc["_id"], index=index, tool_call_id=call_id, decision=decision(), now=T0
            )
        )
        assert decided is not None
        assert decided["pendingCount"] == pending == rules.pending_count(before["toolCalls"]) - 1
        assert decided.get("expiresAt") == rules.earliest_deadline(before["toolCalls"], deciding=index)
        assert decided.get("expiresAt") == (None if deadline is None else T0 + timedelta(minutes=deadline))
        _assert_derived(decided)
        assert await _read(store, doc["_id"]) == decided


async def test_the_deadline_moves_with_the_last_approval_only(store: SnapshotStore) -> None:
    two_person = _call("c1", due=timedelta(minutes=10))
    two_person["approvalsRequired"] = 2
    doc = snapshot(calls=[two_person, _call("c2", due=timedelta(minutes=40))])
    await store.insert(doc, b"[]")

    first = await store.record_approval(
        ApprovalWrite(
            agent_id=AGENT,
            run_id=doc["_id"],
            index=0,
            tool_call_id="c1",
            approval=_approval("key:alice"),
            approvals_before=0,
            decision=None,
            now=T0,
        )
    )
    assert first is not None
    assert (first["pendingCount"], first.get("expiresAt")) == (2, T0 + timedelta(minutes=10))
    _assert_derived(first)

    last = await store.record_approval(
        ApprovalWrite(
            agent_id=AGENT,
            run_id=doc["_id"],
            index=0,
            tool_call_id="c1",
            approval=_approval("key:bob"),
            approvals_before=1,
            decision=decision(),
            now=T0,
        )
    )
    assert last is not None
    assert (last["pendingCount"], last.get("expiresAt")) == (1, T0 + timedelta(minutes=40))
    _assert_derived(last)
    assert await _read(store, doc["_id"]) == last


# -- finished at: finish_webhook_attempt -------------------------------------------------------------


@pytest.mark.parametrize("status", ["pending", "delivered", "failed"])
async def test_a_delivery_is_finished_at_its_last_attempt_unless_still_pending(
    store: SnapshotStore, status: WebhookDeliveryStatus
) -> None:
    delivery: WebhookDeliveryDocument = {
        "_id": "00000000000000000001-abc.e1",
        "endpointId": "e1",
        "eventId": "00000000000000000001-abc",
        "agentId": AGENT,
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
    await store.add_webhook_deliveries([delivery])
    [leased] = await store.claim_webhook_deliveries(DeliveryLease(by="i1", until=NOW, now=T0, limit=1))
    at = T0 + timedelta(seconds=3)

    assert await store.finish_webhook_attempt(
        WebhookAttempt(
            delivery_id=leased["_id"],
            by="i1",
            status=status,
            at=at,
            next_attempt_at=at + timedelta(seconds=5),
            status_code=200,
            error=None,
        )
    )

    [stored] = await store.list_webhook_deliveries(DeliveryListing(status=status, resource_ids=None, limit=5))
    assert stored["finishedAt"] == rules.finished_at(status, at)
    assert stored["finishedAt"] == (None if status == "pending" else at)
    assert (stored["attempts"], stored["lastAttemptAt"], stored["lease"]) == (1, at, None)


# -- the meaning of a condition: rules.matches -------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "0", "1"])
PATHS = st.lists(KEYS, min_size=1, max_size=3).map(".".join)
STAMPS = st.integers(-3, 3).map(lambda n: T0 + n * MS)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.sampled_from(["x", "1"]), STAMPS)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)),
    max_leaves=8,
)
DOCS = st.dictionaries(KEYS, VALUES, max_size=4)
LEAVES = st.one_of(
    st.builds(Equals, PATHS, st.one_of(st.integers(-2, 2), st.sampled_from(["x", "1"]))),
    st.builds(NoValue, PATHS),
    st.builds(Before, PATHS, STAMPS),
    st.builds(AtMost, PATHS, STAMPS),
    st.builds(Length, PATHS, st.integers(0, 3)),
)
CONDITIONS = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda cs: AllOf(tuple(cs))),
        st.lists(inner, max_size=3).map(lambda cs: AnyOf(tuple(cs))),
    ),
    max_leaves=6,
)
PROPERTIES = settings(max_examples=300, derandomize=True, database=None, deadline=None)


def _found(doc: Mapping[str, Any], path: str) -> tuple[bool, Any]:
    """Walked independently of ``value_at``: (present, value) at ``path``."""
    current: Any = doc
    for part in path.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return False, None
    return True, current


@PROPERTIES
@given(doc=DOCS, path=PATHS, value=st.one_of(st.integers(-2, 2), st.sampled_from(["x", "1"])))
def test_no_value_is_missing_or_null_and_excludes_every_equals(doc: dict[str, Any], path: str, value: Any) -> None:
    present, found = _found(doc, path)
    assert matches(NoValue(path), doc) is (not present or found is None)
    assert not (matches(NoValue(path), doc) and matches(Equals(path, value), doc))
    # equality keeps the type: 1 is neither True nor "1"
    assert matches(Equals(path, value), doc) is (present and type(found) is type(value) and found == value)


@PROPERTIES
@given(doc=DOCS, path=PATHS, at=STAMPS)
def test_before_is_strict_at_most_is_not_and_neither_holds_without_a_datetime(
    doc: dict[str, Any], path: str, at: datetime
) -> None:
    _, found = _found(doc, path)
    before, at_most = matches(Before(path, at), doc), matches(AtMost(path, at), doc)
    if not isinstance(found, datetime):
        assert (before, at_most) == (False, False)
    else:
        assert (before, at_most) == (found < at, found <= at)
        assert (at_most and not before) if found == at else before == at_most


@PROPERTIES
@given(doc=DOCS, path=PATHS, count=st.integers(0, 3))
def test_a_missing_or_null_list_has_length_zero(doc: dict[str, Any], path: str, count: int) -> None:
    present, found = _found(doc, path)
    if not present or found is None:
        assert matches(Length(path, count), doc) is (count == 0)
    elif isinstance(found, list | dict | str):
        assert matches(Length(path, count), doc) is (len(found) == count)


@PROPERTIES
@given(doc=DOCS, first=st.lists(CONDITIONS, max_size=3), second=st.lists(CONDITIONS, max_size=3))
def test_all_of_and_any_of_combine_as_all_and_any(doc: dict[str, Any], first: list[Any], second: list[Any]) -> None:
    def safe(condition: Any) -> bool | None:
        try:
            return matches(condition, doc)
        except TypeError:  # Length of a scalar: no store writes one
            return None

    results = [safe(c) for c in first + second]
    if None in results:
        return
    both = AllOf((AllOf(tuple(first)), AllOf(tuple(second))))
    either = AnyOf((AnyOf(tuple(first)), AnyOf(tuple(second))))
    assert matches(both, doc) is all(results) is matches(AllOf(tuple(first + second)), doc)
    assert matches(either, doc) is any(results) is matches(AnyOf(tuple(first + second)), doc)
    assert matches(AllOf(()), doc)
    assert not matches(AnyOf(()), doc)


def test_equals_refuses_none() -> None:
    with pytest.raises(ValueError, match="NoValue"):
        Equals("lastError", None)  # type: ignore[arg-type]


@PROPERTIES
@given(
    due=st.lists(st.one_of(st.none(), st.integers(-3, 3)), min_size=1, max_size=4),
    decided=st.lists(st.booleans(), min_size=4, max_size=4),
    index=st.integers(0, 3),
    version=st.integers(1, 3),
)
def test_deciding_gives_what_the_decided_run_derives(
    due: list[int | None], decided: list[bool], index: int, version: int
) -> None:
    """``rules.deciding`` gives the run's derived fields as they are once call ``index`` is decided
    (``rules.derived``), and the claim only on a run meeting ``claiming``; ``None`` off ``condition``."""
    calls = [_call(f"c{i}", due=None if d is None else timedelta(minutes=d)) for i, d in enumerate(due)]
    calls = [_decided(c) if decided[i] else c for i, c in enumerate(calls)]
    doc = snapshot("r1", calls=calls)
    doc["version"], doc["pendingCount"] = 2, rules.pending_count(calls)
    index = index % len(calls)
    pending = rules.pending_call(AGENT, "r1", index, f"c{index}", None)
    found = rules.deciding(doc, pending, index, rules.last_pending(version))
    if decided[index]:
        assert found is None
        return
    after: SnapshotDocument = {**doc, "toolCalls": [_decided(c) if i == index else c for i, c in enumerate(calls)]}
    assert found is not None
    assert {"pendingCount": found.pending_count, "expiresAt": found.expires_at} == rules.derived(after)
    assert found.claimed is (version == 2 and doc["pendingCount"] == 1) is matches(rules.last_pending(version), doc)
    assert rules.deciding(doc, pending, index) == rules.Decided(False, found.pending_count, found.expires_at)
