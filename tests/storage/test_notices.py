"""The store contract of a deadline's notices (``record_notice``, issue 45 part 3): a reminder and
an escalation are each recorded once, with their event, on a question still waiting; against the
memory store, a SQLite file and a real MongoDB-wire server (FerretDB)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from storage import NoticeKind, SnapshotStore
from storage.protocol import DecisionWrite, NoticeWrite

from ._contract import T0, decision, run_event, snapshot, tool_call

T1 = T0 + timedelta(seconds=1)


def notice(
    kind: NoticeKind,
    event_id: str,
    *,
    agent_id: str = "refund-agent",
    run_id: str = "run",
    question_id: str | None = None,
) -> NoticeWrite:
    """The ``kind`` notice of call ``c1`` (index 0) of ``run_id``, at ``T1``, with its event ``event_id``."""
    event = run_event(event_id, kind, run_id=run_id, at=T1, by="notices", data={"toolCallId": "c1"})
    return NoticeWrite(
        agent_id=agent_id,
        run_id=run_id,
        index=0,
        tool_call_id="c1",
        question_id=question_id,
        notice=kind,
        now=T1,
        event=event,
    )


async def test_a_notice_is_recorded_once_with_its_event(store: SnapshotStore) -> None:
    await store.insert(snapshot("run", calls=[tool_call("c1"), tool_call("c2")]), b"[]")

    first = await store.record_notice(notice("reminded", "001"))
    again = await store.record_notice(notice("reminded", "002"))
    escalated = await store.record_notice(notice("escalated", "003"))

    assert first is not None
    assert first["toolCalls"][0]["reminded"] is True
    assert "reminded" not in first["toolCalls"][1]
    assert again is None
    assert escalated is not None
    assert escalated["toolCalls"][0]["escalated"] is True
    stored = await store.get("refund-agent", "run")
    assert stored is not None
    assert stored["pendingCount"] == 2
    assert stored["toolCalls"][0]["reminded"] is True
    assert stored["toolCalls"][0]["escalated"] is True
    assert [(e["_id"], e["type"]) for e in await store.list_events("refund-agent", "run")] == [
        ("001", "reminded"),
        ("003", "escalated"),
    ]


async def test_a_notice_needs_the_question_still_waiting(store: SnapshotStore) -> None:
    call = tool_call("c1")
    call["questionId"] = "q1"
    await store.insert(snapshot("run", calls=[call]), b"[]")

    other_question = await store.record_notice(notice("reminded", "001", question_id="q0"))
    other_agent = await store.record_notice(notice("reminded", "002", agent_id="weather-agent", question_id="q1"))
    await store.record_decision(
        DecisionWrite(
            agent_id="refund-agent",
            run_id="run",
            index=0,
            tool_call_id="c1",
            question_id="q1",
            decision=decision(),
            now=T1,
        )
    )
    decided = await store.record_notice(notice("escalated", "003", question_id="q1"))

    assert (other_question, other_agent, decided) == (None, None, None)
    assert await store.list_events("refund-agent", "run") == []


async def test_a_notice_racing_on_two_clients_is_recorded_once(
    two_clients: tuple[SnapshotStore, SnapshotStore],
) -> None:
    first, second = two_clients
    for round_ in range(10):
        run_id = f"race-{round_}"
        await first.insert(snapshot(run_id), b"[]")

        results = await asyncio.gather(
            *(
                client.record_notice(notice("escalated", f"{round_}-{n}", run_id=run_id))
                for n, client in enumerate((first, second))
            )
        )

        assert len([r for r in results if r is not None]) == 1, round_
        assert len(await first.list_events("refund-agent", run_id)) == 1
