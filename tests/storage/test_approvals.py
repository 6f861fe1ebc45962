"""The store contract of two-person approval (``record_approval``) and of writes recording several
events at once (a suspension with the decisions a policy made), against the memory store, a
SQLite file and a real MongoDB-wire server (FerretDB)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from storage import ApprovalDocument, EventDocument, SnapshotStore
from storage.protocol import ApprovalWrite, ClaimedReplacement, ClaimWrite, DecisionWrite

from ._contract import T0, decision, run_event, snapshot, tool_call

T1 = T0 + timedelta(seconds=1)


def approval(by: str, at: object = T0) -> ApprovalDocument:
    return {"decidedBy": by, "decidedAt": at}  # type: ignore[typeddict-item]


def event(event_id: str, event_type: str = "approval", run_id: str = "run") -> EventDocument:
    return run_event(event_id, event_type, run_id=run_id, by="key:alice", data={"n": event_id})


async def _two_person_run(store: SnapshotStore, run_id: str = "run") -> None:
    call = tool_call("c1")
    call["approvalsRequired"] = 2
    await store.insert(snapshot(run_id, calls=[call, tool_call("c2")]), b"[]")


async def test_approvals_are_appended_only_on_the_count_they_were_read_with(store: SnapshotStore) -> None:
    await _two_person_run(store)

    # the first approval: recorded with its event, the call still pending
    first = await store.record_approval(
        ApprovalWrite(
            agent_id="refund-agent",
            run_id="run",
            index=0,
            tool_call_id="c1",
            approval=approval("key:alice"),
            approvals_before=0,
            decision=None,
            now=T0,
            event=event("001"),
        )
    )
    assert first is not None
    assert first["toolCalls"][0]["approvals"] == [approval("key:alice")]
    assert first["toolCalls"][0]["decision"] is None
    assert first["toolCalls"][0]["approvalsRequired"] == 2
    assert first["pendingCount"] == 2
    assert first["version"] == 2

    # another approval read on the same state (none recorded) is refused, and writes nothing
    stale = await store.record_approval(
        ApprovalWrite(
            agent_id="refund-agent",
            run_id="run",
            index=0,
            tool_call_id="c1",
            approval=approval("key:bob"),
            approvals_before=0,
            decision=None,
            now=T0,
            event=event("002"),
        )
    )
    assert stale is None

    # the last approval needed sets the decision too, with both its events
    last = await store.record_approval(
        ApprovalWrite(
            agent_id="refund-agent",
            run_id="run",
            index=0,
            tool_call_id="c1",
            approval=approval("key:bob", T1),
            approvals_before=1,
            decision=decision(),
            now=T1,
            event=[event("003"), event("004", "decision")],
        )
    )
    assert last is not None
    assert last["toolCalls"][0]["approvals"] == [approval("key:alice"), approval("key:bob", T1)]
    assert last["toolCalls"][0]["decision"] == decision()
    assert last["pendingCount"] == 1
    assert last["version"] == 3
    assert await store.get("refund-agent", "run") == last

    # and once decided, no approval is recorded any more
    late = await store.record_approval(
        ApprovalWrite(
            agent_id="refund-agent",
            run_id="run",
            index=0,
            tool_call_id="c1",
            approval=approval("key:carol"),
            approvals_before=2,
            decision=decision(),
            now=T1,
            event=event("005"),
        )
    )
    assert late is None
    events = await store.list_events("refund-agent", "run")
    assert [(e["_id"], e["type"]) for e in events] == [("001", "approval"), ("003", "approval"), ("004", "decision")]


async def test_an_approval_checks_the_call_and_question_as_a_decision_does(store: SnapshotStore) -> None:
    call = tool_call("c1")
    call["questionId"] = "q1"
    await store.insert(snapshot("run", calls=[call]), b"[]")

    for index, call_id, question, agent in [
        (0, "c1", "q0", "refund-agent"),
        (0, "c2", "q1", "refund-agent"),
        (1, "c1", "q1", "refund-agent"),
        (0, "c1", "q1", "weather-agent"),
    ]:
        refused = await store.record_approval(
            ApprovalWrite(
                agent_id=agent,
                run_id="run",
                index=index,
                tool_call_id=call_id,
                question_id=question,
                approval=approval("key:alice"),
                approvals_before=0,
                decision=None,
                now=T0,
            )
        )
        assert refused is None, (index, call_id, question, agent)
    stored = await store.get("refund-agent", "run")
    assert stored is not None
    assert "approvals" not in stored["toolCalls"][0]
    assert stored["version"] == 1


async def test_a_suspension_is_written_with_several_events(store: SnapshotStore) -> None:
    decided = tool_call("c1")
    decided["decision"] = decision()
    doc = snapshot("run", calls=[decided, tool_call("c2")])
    doc["pendingCount"] = 1

    await store.insert(doc, b"[]", event=[event("001", "suspended"), event("002", "decision")])

    assert await store.get("refund-agent", "run") == doc
    assert [e["_id"] for e in await store.list_events("refund-agent", "run")] == ["001", "002"]

    # and suspended again by its continuation, with every new call decided by a policy
    await store.record_decision(
        DecisionWrite(agent_id="refund-agent", run_id="run", index=1, tool_call_id="c2", decision=decision(), now=T0)
    )
    assert await store.claim(ClaimWrite(agent_id="refund-agent", run_id="run", by="a", until=T1, now=T0)) is not None
    again = tool_call("c3")
    again["decision"] = decision()
    replaced = await store.replace_claimed(
        ClaimedReplacement(
            agent_id="refund-agent",
            run_id="run",
            by="a",
            tool_calls=[again],
            history=b"[1]",
            history_id="h2",
            now=T1,
            event=[event("003", "decision"), event("004", "decision")],
        )
    )
    assert replaced is not None
    assert replaced["pendingCount"] == 0
    assert [e["_id"] for e in await store.list_events("refund-agent", "run")] == ["001", "002", "003", "004"]


async def test_the_last_approval_racing_on_two_clients_is_recorded_once(
    two_clients: tuple[SnapshotStore, SnapshotStore],
) -> None:
    """Two stores on one database (two connections or clients, as two instances would have)
    record the second approval of the same call at once, each having read one approval: exactly
    one is recorded, with the decision."""
    first, second = two_clients
    for round_ in range(10):
        run_id = f"race-{round_}"
        await _two_person_run(first, run_id)
        await first.record_approval(
            ApprovalWrite(
                agent_id="refund-agent",
                run_id=run_id,
                index=0,
                tool_call_id="c1",
                approval=approval("key:alice"),
                approvals_before=0,
                decision=None,
                now=T0,
            )
        )

        results = await asyncio.gather(
            *(
                client.record_approval(
                    ApprovalWrite(
                        agent_id="refund-agent",
                        run_id=run_id,
                        index=0,
                        tool_call_id="c1",
                        approval=approval(by),
                        approvals_before=1,
                        decision={**decision(), "decidedBy": by},
                        now=T1,
                        event=event(f"{round_}-{by}", run_id=run_id),
                    )
                )
                for client, by in [(first, "key:bob"), (second, "key:carol")]
            )
        )

        winners = [r for r in results if r is not None]
        assert len(winners) == 1, round_
        stored = await first.get("refund-agent", run_id)
        assert stored == winners[0]
        assert len(stored["toolCalls"][0]["approvals"]) == 2
        assert stored["pendingCount"] == 1
        assert len(await first.list_events("refund-agent", run_id)) == 1
