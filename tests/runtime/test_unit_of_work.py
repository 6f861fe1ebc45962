"""One unit of work: a run's state change and the event that records it are never separated.

A crash is injected between the two steps of a write through the stores' test-only
``before_event`` hook (a ``BaseException``, as a process dying there: nothing after it runs). On
SQLite the two are one transaction, so the crash takes the state change back as well, and the
run is continued again later; on MongoDB the event is recorded inside the snapshot's own update
first, and the sweeper completes its append. In both cases, once the sweeper has recovered, the
run is gone and its log holds exactly one ``completed`` event. The memory store writes both in
one step of the event loop: nothing can come between them (no hook).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import pytest

from runtime import AgentRegistry, RunManager, StalledRunSweeper
from storage import MemorySnapshotStore, MongoSnapshotStore, SnapshotStore
from storage.protocol import ClaimedDeletion, ClaimWrite

from .test_sweeper import FLAKY, _decided, _later

GUESS = "guess-agent"


class _Crash(BaseException):
    """The process dying between the two steps."""


def _crash_once(store: SnapshotStore) -> None:
    async def crash(events: Sequence[Mapping[str, Any]]) -> None:
        store.before_event = None  # type: ignore[attr-defined]
        raise _Crash

    store.before_event = crash  # type: ignore[attr-defined]


@pytest.fixture
def durable(store: SnapshotStore) -> SnapshotStore:
    if isinstance(store, MemorySnapshotStore):
        pytest.skip("the memory store writes a change and its event in one step: nothing can come between")
    return store


async def test_a_crash_between_finishing_a_run_and_its_completed_event_loses_neither(
    durable: SnapshotStore, registry: AgentRegistry
) -> None:
    manager = RunManager(durable, registry, instance_id="instance-a", claim_ttl=30)
    run_id, _ = await _decided(manager)

    # when instance-a continues the run to its end and dies between deleting it and its event
    _crash_once(durable)
    with pytest.raises(_Crash):
        await StalledRunSweeper(_later(manager, "instance-a", 61), interval=1).sweep_once()

    # then, once another instance's sweeper ran after the claim expired
    outcomes = await StalledRunSweeper(_later(manager, "instance-b", 200), interval=1).sweep_once()

    # the run is gone and its log holds exactly one completed event
    assert await durable.get(FLAKY, run_id) is None
    events = await durable.list_events(FLAKY, run_id)
    assert [e["type"] for e in events].count("completed") == 1, [e["type"] for e in events]
    assert [o.status for o in outcomes] in ([], ["completed"])


async def test_a_run_whose_completion_is_recorded_reads_as_gone_until_its_event_is_appended(
    durable: SnapshotStore, registry: AgentRegistry
) -> None:
    manager = RunManager(durable, registry, instance_id="instance-a", claim_ttl=30)
    run_id, _ = await _decided(manager)

    # when instance-a finishes the run and dies between recording its completion and appending it
    async def crash_at_completion(events: Sequence[Mapping[str, Any]]) -> None:
        if any(event["type"] == "completed" for event in events):
            durable.before_event = None  # type: ignore[attr-defined]
            raise _Crash

    durable.before_event = crash_at_completion  # type: ignore[attr-defined]
    with pytest.raises(_Crash):
        await StalledRunSweeper(_later(manager, "instance-a", 61), interval=1).sweep_once()

    # then the run reads as stored only while its completion is not recorded: SQLite took the
    # whole write back (the run still resuming, no completed event); on MongoDB the completion is
    # inside the snapshot, waiting for the sweeper, so the run is finished and reads as gone
    stored = await durable.get(FLAKY, run_id)
    many = await durable.get_many([run_id])
    events = [e["type"] for e in await durable.list_events(FLAKY, run_id)]
    assert "completed" not in events, events
    if isinstance(durable, MongoSnapshotStore):
        assert (stored, many) == (None, [])
    else:
        assert stored is not None
        assert stored["status"] == "resuming"
        assert [run["_id"] for run in many] == [run_id]


async def test_a_crash_between_a_decision_and_its_event_loses_neither(
    durable: SnapshotStore, registry: AgentRegistry
) -> None:
    manager = RunManager(durable, registry, instance_id="instance-a", claim_ttl=30)
    started = await manager.start_run(FLAKY, "ship a book")
    assert started.run is not None
    call_id = started.run["toolCalls"][0]["toolCallId"]

    # when the process dies between recording the approval and its decision event
    _crash_once(durable)
    with pytest.raises(_Crash):
        await manager.approve(FLAKY, started.run_id, call_id)
    await StalledRunSweeper(_later(manager, "instance-b", 200), interval=1).sweep_once()

    # then either both are there or neither: a decision recorded has its event
    stored = await durable.get(FLAKY, started.run_id)
    events = [e["type"] for e in await durable.list_events(FLAKY, started.run_id)]
    decided = stored is None or stored["toolCalls"][0]["decision"] is not None
    assert decided == ("decision" in events), (stored, events)


async def test_a_change_whose_condition_failed_writes_no_event(store: SnapshotStore, registry: AgentRegistry) -> None:
    manager = RunManager(store, registry, instance_id="instance-a")
    run_id, _ = await _decided(manager)
    now = manager.now()
    assert await store.claim(
        ClaimWrite(agent_id=FLAKY, run_id=run_id, by="instance-a", until=now + timedelta(seconds=30), now=now)
    )
    journal_event = {
        "_id": "00000000000000000001-000000000000",
        "runId": run_id,
        "agentId": FLAKY,
        "type": "completed",
        "at": now,
        "by": None,
        "data": {"output": "x"},
    }

    # when another instance, which holds no claim, tries to finish the run
    deleted = await store.delete_claimed(
        ClaimedDeletion(agent_id=FLAKY, run_id=run_id, by="instance-z", event=journal_event)
    )  # type: ignore[arg-type]

    # then neither the deletion nor the event was written
    assert deleted is False
    assert await store.get(FLAKY, run_id) is not None
    assert "completed" not in [e["type"] for e in await store.list_events(FLAKY, run_id)]

    # and with the claim, both are
    assert await store.delete_claimed(
        ClaimedDeletion(agent_id=FLAKY, run_id=run_id, by="instance-a", event=journal_event)
    )  # type: ignore[arg-type]
    assert await store.get(FLAKY, run_id) is None
    assert [e["_id"] for e in await store.list_events(FLAKY, run_id) if e["type"] == "completed"] == [
        journal_event["_id"]
    ]


def _crash_before(store: SnapshotStore, event_type: str) -> None:
    """Crash once, just before an event of ``event_type`` is written with its state change."""

    async def crash(events: Sequence[Mapping[str, Any]]) -> None:
        if any(e["type"] == event_type for e in events):
            store.before_event = None  # type: ignore[attr-defined]
            raise _Crash

    store.before_event = crash  # type: ignore[attr-defined]


async def test_a_crash_between_suspending_a_continued_run_again_and_its_suspended_event_loses_neither(
    durable: SnapshotStore, registry: AgentRegistry
) -> None:
    manager = RunManager(durable, registry, instance_id="instance-a", claim_ttl=30)
    started = await manager.start_run(GUESS, "guess")
    assert started.run is not None

    # when instance-a continues the run after an odd answer, and dies between storing the next
    # question and its suspended event
    _crash_before(durable, "suspended")
    with pytest.raises(_Crash):
        await manager.resume(GUESS, started.run_id, None, 3)
    # its claim expires: instance-b's clock is 31 s ahead (so is every later write, and the log
    # stays in time order), and no real lease is so short that a loaded machine lets it lapse
    later = _later(manager, "instance-b", 31)
    await StalledRunSweeper(later, interval=1).sweep_once()

    # then the run waits on the next question, and the continuation's end is in the log before
    # anything else happens to the run
    stored = await durable.get(GUESS, started.run_id)
    assert stored is not None
    assert stored["status"] == "suspended"
    assert stored["toolCalls"][0]["suspendPayload"] == {"question": "An even number?", "attempt": 1}
    question = stored["toolCalls"][0]["questionId"]
    outcome = await later.resume(GUESS, started.run_id, None, 4, question_id=question)
    assert outcome.status == "completed"
    types = [e["type"] for e in await durable.list_events(GUESS, started.run_id)]
    for before, after in itertools.pairwise(types):
        assert (before, after) not in {("resumed", "decision"), ("takeover", "decision")}, " ".join(types)
    assert types.count("suspended") == 2, types
