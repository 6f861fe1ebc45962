"""A continuation that fails keeps every decision; retry and claim takeover (docs/architecture.md "Continue")."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import pytest

from runtime import AgentRegistry, RunManager, RunNotReadyError, ToolCallAlreadyDecidedError
from storage import MemorySnapshotStore, SnapshotDocument, utcnow
from storage.protocol import ClaimWrite, DecisionWrite

from .._processes import scaled
from . import agents

FLAKY = "flaky-agent"


async def _approved_while_model_is_down(manager: RunManager) -> tuple[str, str]:
    started = await manager.start_run(FLAKY, "ship a book")
    assert started.status == "suspended"
    assert started.run is not None
    call_id = started.run["toolCalls"][0]["toolCallId"]
    agents.SWITCHES["model_down"] = True
    failed = await manager.approve(FLAKY, started.run_id, call_id, principal="alice")
    assert failed.status == "failed"
    return started.run_id, call_id


async def test_a_plain_agent_without_deferred_output_type_still_suspends(manager: RunManager) -> None:
    assert agents.flaky_agent.output_type is str

    started = await manager.start_run(FLAKY, "ship a book")

    assert started.status == "suspended"
    assert started.run is not None
    assert started.run["toolCalls"][0]["args"] == {"item": "book"}


async def test_a_model_error_on_continue_keeps_the_run_with_its_error_and_decisions(
    manager: RunManager,
) -> None:
    # given
    started = await manager.start_run(FLAKY, "ship a book")
    assert started.run is not None
    call_id = started.run["toolCalls"][0]["toolCallId"]
    agents.SWITCHES["model_down"] = True

    # when
    outcome = await manager.approve(FLAKY, started.run_id, call_id, principal="alice")

    # then
    assert outcome.status == "failed"
    assert outcome.error == "RuntimeError: model is down"
    stored = await manager.store.get(FLAKY, started.run_id)
    assert stored is not None
    assert outcome.run == stored
    assert stored["status"] == "suspended"
    assert stored["claim"] is None
    assert stored["pendingCount"] == 0
    assert stored["lastError"] is not None
    assert (stored["lastError"]["type"], stored["lastError"]["message"]) == ("RuntimeError", "model is down")
    decision = stored["toolCalls"][0]["decision"]
    assert decision is not None
    assert (decision["kind"], decision["decidedBy"]) == ("approved", "alice")
    events = await manager.store.list_events(FLAKY, started.run_id)
    assert [e["type"] for e in events][-2:] == ["resumed", "failed"]
    with pytest.raises(ToolCallAlreadyDecidedError):
        await manager.approve(FLAKY, started.run_id, call_id)


async def test_retry_completes_a_failed_run(manager: RunManager) -> None:
    # given
    run_id, _ = await _approved_while_model_is_down(manager)
    agents.SWITCHES["model_down"] = False

    # when
    outcome = await manager.retry(FLAKY, run_id, principal="ops")

    # then
    assert outcome.status == "completed"
    assert outcome.output == "done: shipped book"
    assert await manager.store.get(FLAKY, run_id) is None


async def test_a_tool_that_ran_before_the_model_failed_does_not_run_again_on_retry(any_manager: RunManager) -> None:
    # given the approved tool ran, then the model raised on the next turn
    manager = any_manager
    run_id, _ = await _approved_while_model_is_down(manager)
    assert agents.SHIPPED == ["book"]
    events = await manager.store.list_events(FLAKY, run_id)
    assert events[-1]["type"] == "failed"
    assert events[-1]["data"]["toolsRan"] is True

    # when the model is back and the run is retried
    agents.SWITCHES["model_down"] = False
    outcome = await manager.retry(FLAKY, run_id)

    # then the kept tool result is used: the tool ran exactly once
    assert outcome.status == "completed"
    assert outcome.output == "done: shipped book"
    assert agents.SHIPPED == ["book"]


async def test_a_retry_that_fails_again_still_keeps_the_tool_result(manager: RunManager) -> None:
    run_id, _ = await _approved_while_model_is_down(manager)

    again = await manager.retry(FLAKY, run_id)
    agents.SWITCHES["model_down"] = False
    done = await manager.retry(FLAKY, run_id)

    assert again.status == "failed"
    assert done.status == "completed"
    assert agents.SHIPPED == ["book"]


async def test_a_tool_error_on_continue_fails_the_run_too(manager: RunManager) -> None:
    started = await manager.start_run(FLAKY, "ship a book")
    assert started.run is not None
    agents.SWITCHES["tool_broken"] = True

    outcome = await manager.approve(FLAKY, started.run_id, started.run["toolCalls"][0]["toolCallId"])

    assert outcome.status == "failed"
    assert outcome.error is not None
    assert "warehouse unreachable" in outcome.error
    stored = await manager.store.get(FLAKY, started.run_id)
    assert stored is not None
    assert stored["lastError"] is not None
    assert agents.SHIPPED == []
    failed = (await manager.store.list_events(FLAKY, started.run_id))[-1]
    assert failed["type"] == "failed"
    assert "toolsRan" not in failed["data"]

    # when the warehouse is back, a retry runs the tool (it never completed)
    agents.SWITCHES["tool_broken"] = False
    done = await manager.retry(FLAKY, started.run_id)
    assert done.status == "completed"
    assert agents.SHIPPED == ["book"]


async def test_retry_refuses_a_run_that_still_waits_for_decisions(manager: RunManager) -> None:
    started = await manager.start_run(FLAKY, "ship a book")

    with pytest.raises(RunNotReadyError) as caught:
        await manager.retry(FLAKY, started.run_id)

    assert "waiting for a decision" in caught.value.message
    stored = await manager.store.get(FLAKY, started.run_id)
    assert stored == started.run


async def test_retry_refuses_a_run_another_instance_is_continuing_then_takes_it_over_once_expired(
    manager: RunManager,
) -> None:
    # given another instance claimed the failed run
    run_id, _ = await _approved_while_model_is_down(manager)
    agents.SWITCHES["model_down"] = False
    now = utcnow()
    claimed = await manager.store.claim(
        ClaimWrite(agent_id=FLAKY, run_id=run_id, by="instance-b", until=now + timedelta(seconds=60), now=now)
    )
    assert claimed is not None

    # when / then: its claim is live
    with pytest.raises(RunNotReadyError) as caught:
        await manager.retry(FLAKY, run_id)
    assert "another instance" in caught.value.message

    # given the claim expired (instance-b died)
    later = RunManager(
        manager.store,
        manager.agents,
        instance_id="instance-a",
        clock=lambda: utcnow() + timedelta(seconds=61),
    )

    # when
    outcome = await later.retry(FLAKY, run_id)

    # then
    assert outcome.status == "completed"
    events = await manager.store.list_events(FLAKY, run_id)
    takeover = [e for e in events if e["type"] == "takeover"]
    assert len(takeover) == 1
    assert takeover[0]["by"] == "instance-a"
    assert takeover[0]["data"]["previousClaim"]["by"] == "instance-b"


async def test_the_claim_is_renewed_while_the_agent_runs(manager: RunManager) -> None:
    # given a continuation that lasts longer than the claim's time to live
    # (renewed every third of its TTL: a TTL of 1 s survives the event loop stalling 0.6 s)
    lease = scaled(1.0)
    short = RunManager(manager.store, manager.agents, instance_id="instance-a", claim_ttl=lease)
    started = await short.start_run("slow-agent", "deploy please")
    assert started.run is not None
    agents.SWITCHES["delay"] = 2.7 * lease
    continuing = asyncio.create_task(
        short.approve("slow-agent", started.run_id, started.run["toolCalls"][0]["toolCallId"])
    )

    # when another instance tries to take the run over after the first expiry would have passed
    await asyncio.sleep(2 * lease)
    other = RunManager(manager.store, manager.agents, instance_id="instance-b")

    # then the renewed claim keeps it away
    with pytest.raises(RunNotReadyError):
        await other.retry("slow-agent", started.run_id)
    outcome = await continuing
    assert outcome.status == "completed"


class _ClaimedElsewhereStore(MemorySnapshotStore):
    """Every claim fails, as when another instance claimed the run first; a decision claims
    nothing, as when the run changed after it was read (``rules.last_pending``)."""

    async def record_decision(self, write: DecisionWrite) -> SnapshotDocument | None:
        return await super().record_decision(replace(write, claim=None))

    async def claim(self, *args: object, **kwargs: object) -> SnapshotDocument | None:
        return None


async def test_a_run_claimed_elsewhere_is_reported_as_resuming(registry: AgentRegistry) -> None:
    manager = RunManager(_ClaimedElsewhereStore(), registry, instance_id="instance-a")
    started = await manager.start_run(FLAKY, "ship a book")
    assert started.run is not None

    outcome = await manager.approve(FLAKY, started.run_id, started.run["toolCalls"][0]["toolCallId"])

    assert outcome.status == "resuming"
    assert agents.SHIPPED == []
    stored = await manager.store.get(FLAKY, started.run_id)
    assert stored is not None
    assert stored["pendingCount"] == 0
