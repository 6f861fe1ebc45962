"""Every domain error of a decision, and that a refused decision writes nothing (docs/api.md "Errors")."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from runtime import (
    AgentNotFoundError,
    AgentRegistry,
    AmbiguousToolCallError,
    ErrorCode,
    RunManager,
    RunNotFoundError,
    RunOutcome,
    RunsgateError,
    ToolCallAlreadyDecidedError,
    ToolCallNotFoundError,
    WrongToolCallKindError,
)
from storage import MemorySnapshotStore, SnapshotDocument

REFUND = "refund-agent"


async def _two_order_run(manager: RunManager) -> tuple[str, list[str]]:
    started = await manager.start_run(REFUND, "Please refund orders 1042 and 1043")
    assert started.run is not None
    return started.run_id, [c["toolCallId"] for c in started.run["toolCalls"]]


async def _refused(
    manager: RunManager, agent_id: str, run_id: str, call: Callable[[], Awaitable[RunOutcome]]
) -> RunsgateError:
    """Make a refused call and check that neither the run nor its events changed."""
    before = await manager.store.get(agent_id, run_id)
    events_before = await manager.store.list_events(agent_id, run_id)
    with pytest.raises(RunsgateError) as caught:
        await call()
    assert await manager.store.get(agent_id, run_id) == before
    assert await manager.store.list_events(agent_id, run_id) == events_before
    return caught.value


async def test_unknown_agent(manager: RunManager) -> None:
    with pytest.raises(AgentNotFoundError) as caught:
        await manager.start_run("nobody", "hi")
    assert caught.value.code is ErrorCode.AGENT_NOT_FOUND
    assert caught.value.agent_id == "nobody"
    known = ", ".join(manager.agents.ids())
    assert caught.value.message == f"No agent is registered with id 'nobody'; known agents: {known}."

    with pytest.raises(AgentNotFoundError):
        await manager.approve("nobody", "run", "call")


async def test_another_agents_run_is_reported_exactly_like_a_missing_run(manager: RunManager) -> None:
    run_id, calls = await _two_order_run(manager)

    foreign = await _refused(manager, REFUND, run_id, lambda: manager.approve("weather-agent", run_id, calls[0]))
    missing = await _refused(manager, REFUND, run_id, lambda: manager.approve("weather-agent", "r-404", calls[0]))

    assert isinstance(foreign, RunNotFoundError)
    assert isinstance(missing, RunNotFoundError)
    assert foreign.code is ErrorCode.RUN_NOT_FOUND
    assert foreign.message.replace(run_id, "X") == missing.message.replace("r-404", "X")


async def test_unknown_tool_call(manager: RunManager) -> None:
    run_id, _ = await _two_order_run(manager)

    error = await _refused(manager, REFUND, run_id, lambda: manager.approve(REFUND, run_id, "call-404"))

    assert isinstance(error, ToolCallNotFoundError)
    assert (error.run_id, error.tool_call_id) == (run_id, "call-404")


async def test_resume_without_call_id_on_a_run_with_only_approvals(manager: RunManager) -> None:
    run_id, _ = await _two_order_run(manager)

    error = await _refused(manager, REFUND, run_id, lambda: manager.resume(REFUND, run_id, None, {}))

    assert isinstance(error, ToolCallNotFoundError)
    assert error.tool_call_id is None


async def test_resuming_an_approval_names_the_approval_mutations(manager: RunManager) -> None:
    run_id, calls = await _two_order_run(manager)

    error = await _refused(manager, REFUND, run_id, lambda: manager.resume(REFUND, run_id, calls[0], {}))

    assert isinstance(error, WrongToolCallKindError)
    assert error.expected == "approval"
    assert "approveToolCall" in error.message


async def test_a_second_decision_on_a_call_names_the_winning_decision(manager: RunManager) -> None:
    run_id, calls = await _two_order_run(manager)
    await manager.approve(REFUND, run_id, calls[0], principal="alice")

    error = await _refused(
        manager, REFUND, run_id, lambda: manager.decline(REFUND, run_id, calls[0], principal="mallory")
    )

    assert isinstance(error, ToolCallAlreadyDecidedError)
    assert error.code is ErrorCode.TOOL_CALL_ALREADY_DECIDED
    assert error.decision["kind"] == "approved"
    assert error.decision["decidedBy"] == "alice"
    assert "approved by alice" in error.message


async def test_resume_without_call_id_when_several_calls_wait_for_data(manager: RunManager) -> None:
    started = await manager.start_run("survey-agent", "questions please")
    assert started.run is not None
    ids = [c["toolCallId"] for c in started.run["toolCalls"]]

    error = await _refused(
        manager,
        "survey-agent",
        started.run_id,
        lambda: manager.resume("survey-agent", started.run_id, None, 1),
    )

    assert isinstance(error, AmbiguousToolCallError)
    assert error.tool_call_ids == ids
    assert len(ids) == 3


class _InterleavingStore(MemorySnapshotStore):
    """A memory store that yields to the event loop after each read, so concurrent requests interleave."""

    conflicts = 0

    async def get(self, agent_id: str, run_id: str) -> SnapshotDocument | None:
        doc = await super().get(agent_id, run_id)
        await asyncio.sleep(0)
        return doc

    async def record_decision(self, *args: Any, **kwargs: Any) -> SnapshotDocument | None:
        updated = await super().record_decision(*args, **kwargs)
        self.conflicts += updated is None
        return updated


@pytest.fixture
async def racing_store() -> AsyncIterator[_InterleavingStore]:
    store = _InterleavingStore()
    await store.open()
    yield store
    await store.close()


@pytest.fixture
def racing_manager(racing_store: _InterleavingStore, registry: AgentRegistry) -> RunManager:
    return RunManager(racing_store, registry, instance_id="instance-a")


async def test_two_racing_decisions_on_one_call_exactly_one_wins(
    racing_manager: RunManager, racing_store: _InterleavingStore
) -> None:
    # given both requests read the run while the call is still pending
    run_id, calls = await _two_order_run(racing_manager)

    # when
    results: tuple[Any, ...] = await asyncio.gather(
        racing_manager.approve(REFUND, run_id, calls[0], principal="alice"),
        racing_manager.decline(REFUND, run_id, calls[0], principal="bob"),
        return_exceptions=True,
    )

    # then the loser's conditional write failed and it reports the winner
    assert racing_store.conflicts == 1
    winners = [r for r in results if isinstance(r, RunOutcome)]
    losers = [r for r in results if isinstance(r, ToolCallAlreadyDecidedError)]
    assert len(winners) == 1
    assert len(losers) == 1
    assert losers[0].decision["decidedBy"] == "alice"
    stored = await racing_manager.store.get(REFUND, run_id)
    assert stored is not None
    assert stored["pendingCount"] == 1
    assert stored["toolCalls"][0]["decision"] == losers[0].decision
    decisions = [e for e in await racing_manager.store.list_events(REFUND, run_id) if e["type"] == "decision"]
    assert len(decisions) == 1
