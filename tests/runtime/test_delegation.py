"""``delegate()`` beyond the demo: forwarded resume data, sub-run failures and retries."""

from __future__ import annotations

import pytest
from pydantic_ai import RunContext
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RunUsage

from runtime import AgentRegistry, RunManager, delegate, sub_run_id
from runtime.demo import CITY_QUESTION, LEDGER
from storage import EventDocument, MemorySnapshotStore, RunFilter, SnapshotDocument, StoreUnavailableError
from storage.protocol import EventsAfter

from . import agents

DISPATCHER = "dispatcher"


async def test_resume_data_given_to_the_outer_run_reaches_the_sub_agents_tool(manager: RunManager) -> None:
    # given
    started = await manager.start_run(DISPATCHER, "weather-agent: What's the weather like?")
    assert started.run is not None
    [call] = started.run["toolCalls"]
    assert call["toolName"] == "ask_city"
    assert call["requiresApproval"] is False
    assert call["suspendPayload"] == {"question": CITY_QUESTION}
    assert call["resumeSchema"] is not None
    assert call["resumeSchema"]["required"] == ["name"]

    # when
    outcome = await manager.resume(DISPATCHER, started.run_id, None, {"name": "Paris"})

    # then
    assert outcome.status == "completed"
    assert isinstance(outcome.output, str)
    assert outcome.output.startswith("relayed: The weather in Paris: ")
    assert await manager.store.count_runs("weather-agent", RunFilter()) == 0


async def test_a_failed_sub_run_fails_the_outer_run_and_retrying_the_outer_run_retries_it(
    manager: RunManager,
) -> None:
    # given the sub-agent's model fails when the approved call continues
    started = await manager.start_run(DISPATCHER, "flaky-agent: ship a book")
    assert started.run is not None
    outer_call = started.run["toolCalls"][0]
    inner_id = sub_run_id(started.run_id, outer_call["toolCallId"])
    agents.SWITCHES["model_down"] = True

    # when
    failed = await manager.approve(DISPATCHER, started.run_id, outer_call["toolCallId"], principal="alice")

    # then both runs are kept, with their errors and decisions
    assert failed.status == "failed"
    assert failed.error is not None
    assert "model is down" in failed.error
    inner = await manager.store.get("flaky-agent", inner_id)
    assert inner is not None
    assert inner["lastError"] is not None
    assert inner["pendingCount"] == 0
    outer = await manager.store.get(DISPATCHER, started.run_id)
    assert outer is not None
    assert outer["lastError"] is not None

    # when the model is back and the outer run is retried
    agents.SWITCHES["model_down"] = False
    done = await manager.retry(DISPATCHER, started.run_id)

    # then
    assert done.status == "completed"
    assert done.output == "relayed: done: shipped book"
    assert agents.SHIPPED == ["book"]  # the tool ran before the model failed; its result was kept
    assert await manager.store.get("flaky-agent", inner_id) is None


async def test_a_sub_run_that_completed_before_the_outer_run_failed_is_not_run_again(
    manager: RunManager,
) -> None:
    # given the sub-run completes, then the outer model fails
    started = await manager.start_run(DISPATCHER, "refund-agent: Please refund order 1042")
    assert started.run is not None
    agents.SWITCHES["dispatcher_down"] = True
    failed = await manager.approve(DISPATCHER, started.run_id, started.run["toolCalls"][0]["toolCallId"])
    assert failed.status == "failed"
    assert len(LEDGER) == 1

    # when the outer run is retried
    agents.SWITCHES["dispatcher_down"] = False
    done = await manager.retry(DISPATCHER, started.run_id)

    # then the sub-run's recorded output is used; the refund is not issued twice
    assert done.status == "completed"
    assert done.output == "relayed: Refund of $49.90 for order 1042 issued."
    assert len(LEDGER) == 1


async def test_delegate_outside_a_run_manager_is_a_clear_error() -> None:
    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage(), tool_call_id="c")

    with pytest.raises(RuntimeError, match="RunManager"):
        await delegate(ctx, "refund-agent", "hi")


class _SubRunNotStored(MemorySnapshotStore):
    """Fails the sub-run's ``insert`` as a SQLite file held locked for longer than the busy timeout."""

    async def insert(self, snapshot: SnapshotDocument, history: bytes, *, event: EventDocument | None = None) -> None:
        if snapshot["agentId"] != DISPATCHER:
            raise StoreUnavailableError("database is locked")
        await super().insert(snapshot, history, event=event)


async def test_a_start_whose_sub_run_could_not_be_stored_is_store_unavailable_not_failed(
    registry: AgentRegistry,
) -> None:
    store = _SubRunNotStored()
    manager = RunManager(store, registry, instance_id="instance-a")

    # when the supervisor's delegate() cannot store the sub-run
    with pytest.raises(StoreUnavailableError):
        await manager.start_run(DISPATCHER, "flaky-agent: ship a book")

    # then the client gets a retryable error, and nothing is stored or logged as failed
    assert await store.count_runs(DISPATCHER, RunFilter()) == 0
    assert await store.count_runs("flaky-agent", RunFilter()) == 0
    events = await store.list_events_after(EventsAfter(agent_id=DISPATCHER, after_event_id=None, limit=100))
    assert "failed" not in [e["type"] for e in events], events
