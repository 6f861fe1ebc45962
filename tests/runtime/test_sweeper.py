"""``StalledRunSweeper``: runs nobody continues are taken over (issue 3 "claims and crashes")."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

from runtime import AgentRegistry, RunManager, StalledRunSweeper
from runtime.continuing import continuation as _continuation
from storage import SnapshotStore, StoreUnavailableError, utcnow
from storage.protocol import ClaimWrite, DecisionWrite

from . import agents

FLAKY = "flaky-agent"


async def _decided(manager: RunManager) -> tuple[str, str]:
    """A flaky-agent run whose only call is approved in the store, nobody continuing it."""
    started = await manager.start_run(FLAKY, "ship a book")
    assert started.run is not None
    call_id = started.run["toolCalls"][0]["toolCallId"]
    now = manager.now()
    recorded = await manager.store.record_decision(
        DecisionWrite(
            agent_id=FLAKY,
            run_id=started.run_id,
            index=0,
            tool_call_id=call_id,
            question_id=started.run["toolCalls"][0]["questionId"],
            decision={
                "kind": "approved",
                "decidedAt": now,
                "decidedBy": "alice",
                "reason": None,
                "resumeData": None,
                "idempotencyKey": None,
            },
            now=now,
        )
    )
    assert recorded is not None
    return started.run_id, call_id


def _later(manager: RunManager, instance_id: str, seconds: float) -> RunManager:
    """Another instance on the same store whose clock is ``seconds`` ahead."""
    return RunManager(
        manager.store,
        manager.agents,
        instance_id=instance_id,
        claim_ttl=manager.claim_ttl,
        clock=lambda: utcnow() + timedelta(seconds=seconds),
    )


async def test_a_run_whose_claim_expired_is_finished_by_the_sweeper(any_manager: RunManager) -> None:
    # given instance-dead claimed the run, then died (its claim is never renewed)
    run_id, _ = await _decided(any_manager)
    now = any_manager.now()
    claimed = await any_manager.store.claim(
        ClaimWrite(agent_id=FLAKY, run_id=run_id, by="instance-dead", until=now + timedelta(seconds=30), now=now)
    )
    assert claimed is not None
    early = StalledRunSweeper(_later(any_manager, "instance-b", 10), interval=1)
    late = StalledRunSweeper(_later(any_manager, "instance-b", 31), interval=1)

    # when / then: nothing to do while the claim is live
    assert await early.sweep_once() == []
    assert agents.SHIPPED == []

    # when the claim expired
    outcomes = await late.sweep_once()

    # then
    assert [(o.run_id, o.status) for o in outcomes] == [(run_id, "completed")]
    assert agents.SHIPPED == ["book"]
    assert await any_manager.store.get(FLAKY, run_id) is None
    events = await any_manager.store.list_events(FLAKY, run_id)
    takeover = [e for e in events if e["type"] == "takeover"]
    assert [(e["by"], e["data"]["previousClaim"]["by"]) for e in takeover] == [("instance-b", "instance-dead")]
    assert [e["type"] for e in events][-3:] == ["takeover", "resumed", "completed"]


async def test_a_decided_run_nobody_claimed_is_continued_after_the_grace_period(manager: RunManager) -> None:
    run_id, _ = await _decided(manager)
    soon = StalledRunSweeper(_later(manager, "instance-b", 5), interval=1, idle_grace=60)
    after_grace = StalledRunSweeper(_later(manager, "instance-b", 61), interval=1, idle_grace=60)

    assert await soon.sweep_once() == []
    outcomes = await after_grace.sweep_once()

    assert [(o.run_id, o.status) for o in outcomes] == [(run_id, "completed")]
    assert agents.SHIPPED == ["book"]
    events = await manager.store.list_events(FLAKY, run_id)
    assert [e["type"] for e in events][-3:] == ["takeover", "resumed", "completed"]
    assert events[-3]["data"]["previousClaim"] is None


async def test_failed_runs_and_runs_waiting_for_decisions_are_left_alone(manager: RunManager) -> None:
    waiting = await manager.start_run(FLAKY, "ship a book")
    failed_id, _ = await _decided(manager)
    agents.SWITCHES["model_down"] = True
    assert (await manager.retry(FLAKY, failed_id)).status == "failed"
    agents.SWITCHES["model_down"] = False
    sweeper = StalledRunSweeper(_later(manager, "instance-b", 3600), interval=1)

    assert await sweeper.sweep_once() == []
    assert (await manager.store.get(FLAKY, waiting.run_id)) == waiting.run
    stored = await manager.store.get(FLAKY, failed_id)
    assert stored is not None
    assert stored["lastError"] is not None


async def test_two_sweepers_racing_for_one_run_continue_it_once(registry: AgentRegistry, store: SnapshotStore) -> None:
    manager = RunManager(store, registry, instance_id="instance-a")
    run_id, _ = await _decided(manager)
    sweepers = [StalledRunSweeper(_later(manager, f"instance-{i}", 120), interval=1) for i in range(3)]

    results = await asyncio.gather(*(s.sweep_once() for s in sweepers))

    statuses = sorted(o.status for outcomes in results for o in outcomes)
    assert statuses.count("completed") == 1
    assert set(statuses) <= {"completed", "resuming"}
    assert agents.SHIPPED == ["book"]
    assert await store.get(FLAKY, run_id) is None


async def test_run_forever_sweeps_until_cancelled(manager: RunManager) -> None:
    run_id, _ = await _decided(manager)
    sweeper = StalledRunSweeper(_later(manager, "instance-b", 120), interval=0.05)

    task = asyncio.create_task(sweeper.run_forever())
    try:
        async with asyncio.timeout(10):
            while await manager.store.get(FLAKY, run_id) is not None:  # noqa: ASYNC110 (polls the store)
                await asyncio.sleep(0.02)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    assert agents.SHIPPED == ["book"]


def test_the_interval_must_be_positive(manager: RunManager) -> None:
    with pytest.raises(ValueError, match="interval"):
        StalledRunSweeper(manager, interval=0)


async def test_an_instance_paused_after_its_claim_runs_nothing_once_another_took_the_run_over(
    any_manager: RunManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given instance-a claims a decided run (its `resumed` is written with the claim), then is paused
    store = any_manager.store
    run_id, _ = await _decided(any_manager)
    claimed, paused = asyncio.Event(), asyncio.Event()
    original = store.claim

    async def claim_then_pause(write: ClaimWrite) -> object:
        held = await original(write)
        if write.by == "instance-a":
            claimed.set()
            await paused.wait()
            # a's own clock saw the pause: longer than the claim's lease
            monkeypatch.setattr(_continuation, "monotonic", lambda: time.monotonic() + 61)
        return held

    monkeypatch.setattr(store, "claim", claim_then_pause)
    instance_a = asyncio.create_task(any_manager.retry(FLAKY, run_id))
    await claimed.wait()

    # when its claim expires and instance-b takes the run over and finishes it, then a wakes up
    outcomes = await StalledRunSweeper(_later(any_manager, "instance-b", 61), interval=1).sweep_once()
    assert [o.status for o in outcomes] == ["completed"]
    paused.set()
    late = await instance_a

    # then a wrote nothing after its claim: the log shows a's claim, b's takeover of it and b's
    # continuation, and the tool ran once
    assert late.status == "resuming"
    events = await store.list_events(FLAKY, run_id)
    continuation = [
        (e["type"], e["data"].get("instanceId") or e["by"])
        for e in events
        if e["type"] in ("takeover", "resumed", "completed")
    ]
    assert continuation == [
        ("resumed", "instance-a"),
        ("takeover", "instance-b"),
        ("resumed", "instance-b"),
        ("completed", None),
    ], continuation
    assert [e["data"]["previousClaim"]["by"] for e in events if e["type"] == "takeover"] == ["instance-a"]
    assert agents.SHIPPED == ["book"]


@pytest.mark.parametrize("aged", [0.0, 21.0])
async def test_a_claim_is_renewed_before_the_tool_runs_only_once_a_third_of_its_lease_passed(
    any_manager: RunManager, monkeypatch: pytest.MonkeyPatch, aged: float
) -> None:
    # given an approval whose claim (60 s) is `aged` seconds old, by this instance's clock, when
    # the run continues
    store = any_manager.store
    started = await any_manager.start_run(FLAKY, "ship a book")
    assert started.run is not None
    renewals: list[str] = []
    original_renew, original_decide = store.renew_claim, store.record_decision

    async def renew(*args: object, **kwargs: object) -> bool:
        renewals.append(f"renewed, tools run: {agents.SHIPPED}")
        return await original_renew(*args, **kwargs)  # type: ignore[arg-type]

    async def decide_then_age(*args: object, **kwargs: object) -> object:
        written = await original_decide(*args, **kwargs)  # type: ignore[arg-type]
        monkeypatch.setattr(_continuation, "monotonic", lambda: time.monotonic() + aged)
        return written

    monkeypatch.setattr(store, "renew_claim", renew)
    monkeypatch.setattr(store, "record_decision", decide_then_age)

    # when it is approved
    outcome = await any_manager.approve(FLAKY, started.run_id, started.run["toolCalls"][0]["toolCallId"])

    # then a fresh claim is not renewed (no write), an older one once, before any tool ran
    assert outcome.status == "completed"
    assert agents.SHIPPED == ["book"]
    assert renewals == ([] if aged == 0 else ["renewed, tools run: []"])


async def test_a_claim_whose_first_renewal_fails_is_in_the_log_before_the_next_takeover(
    any_manager: RunManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given instance-a takes a decided run over, is paused after its claim for longer than a third
    # of its lease (so it renews the claim before it runs anything), and the store fails that renewal
    store = any_manager.store
    run_id, _ = await _decided(any_manager)
    original, original_claim = store.renew_claim, store.claim

    async def down(*args: object, **kwargs: object) -> bool:
        raise StoreUnavailableError("the store is down")

    async def claim_then_pause(*args: object, **kwargs: object) -> object:
        held = await original_claim(*args, **kwargs)  # type: ignore[arg-type]
        monkeypatch.setattr(_continuation, "monotonic", lambda: time.monotonic() + 21)
        return held

    monkeypatch.setattr(store, "renew_claim", down)
    monkeypatch.setattr(store, "claim", claim_then_pause)
    assert await StalledRunSweeper(_later(any_manager, "instance-a", 61), interval=1).sweep_once() == []
    assert agents.SHIPPED == []

    # when the store is back, a's claim expires and instance-b takes the run over
    monkeypatch.setattr(store, "renew_claim", original)
    monkeypatch.setattr(store, "claim", original_claim)
    outcomes = await StalledRunSweeper(_later(any_manager, "instance-b", 200), interval=1).sweep_once()

    # then the log shows a's claim before b's takeover names it
    assert [o.status for o in outcomes] == ["completed"]
    events = await store.list_events(FLAKY, run_id)
    continuation = [
        (e["type"], e["by"], (e["data"].get("previousClaim") or {}).get("by"), e["data"].get("instanceId"))
        for e in events
        if e["type"] in ("takeover", "resumed", "completed")
    ]
    assert continuation == [
        ("takeover", "instance-a", None, None),
        ("resumed", None, None, "instance-a"),
        ("takeover", "instance-b", "instance-a", None),
        ("resumed", None, None, "instance-b"),
        ("completed", None, None, None),
    ], continuation
    assert agents.SHIPPED == ["book"]


async def test_a_takeover_read_before_another_claim_names_the_claim_it_replaces(any_manager: RunManager) -> None:
    # given a sweeper read a decided run, then instance-dead claimed it and died
    store = any_manager.store
    run_id, _ = await _decided(any_manager)
    read = await store.get(FLAKY, run_id)
    assert read is not None
    now = any_manager.now()
    assert await store.claim(
        ClaimWrite(agent_id=FLAKY, run_id=run_id, by="instance-dead", until=now + timedelta(seconds=30), now=now)
    )

    # when, after that claim expired, instance-b takes the run over from what it read, then sweeps
    stale = await _later(any_manager, "instance-b", 61).take_over(read)
    outcomes = await StalledRunSweeper(_later(any_manager, "instance-b", 62), interval=1).sweep_once()

    # then the stale attempt claimed nothing, and the takeover names instance-dead's claim
    assert stale.status == "resuming"
    assert [o.status for o in outcomes] == ["completed"]
    events = await store.list_events(FLAKY, run_id)
    previous = [(e["data"]["previousClaim"] or {}).get("by") for e in events if e["type"] == "takeover"]
    assert previous == ["instance-dead"], [(e["type"], e["by"], e["data"]) for e in events]
    assert agents.SHIPPED == ["book"]
