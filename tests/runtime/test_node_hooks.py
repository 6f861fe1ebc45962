"""A continuation keeps pydantic-ai's node lifecycle: an agent's own capability sees each node
before it runs (``before_node_run``, which may replace it) and wraps its whole run
(``wrap_node_run``), so an approved tool runs exactly once, inside the wrapper, while its events
still reach ``runUpdates``. Without pydantic-ai's private names (``runtime.running.internals``)
a continuation runs through ``event_stream_handler``, with the same updates.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.run import AgentRun
from pydantic_ai.tools import DeferredToolRequests

from runtime import AgentRegistry
from runtime.demo import AGENTS as DEMO_AGENTS
from runtime.demo._script import latest_returns, scripted_model
from runtime.running import internals

from . import agents
from .conftest import Instance, update_kinds

WAIT = 30.0
"""Seconds to wait for a stream's end: a liveness bound, not a speed check."""

GUARDED = "guarded-agent"
LOG: list[str] = []


class _Guard(AbstractCapability[Any]):
    """Replaces each node that runs tool calls by a fresh copy of it (``before_node_run``), and
    records entering and leaving its run (``wrap_node_run``)."""

    async def before_node_run(self, ctx: RunContext[Any], *, node: Any) -> Any:
        if Agent.is_call_tools_node(node) and node.model_response.tool_calls:
            return dataclasses.replace(node)
        return node

    async def wrap_node_run(self, ctx: RunContext[Any], *, node: Any, handler: Any) -> Any:
        if not (Agent.is_call_tools_node(node) and node.model_response.tool_calls):
            return await handler(node)
        LOG.append("enter")
        try:
            return await handler(node)
        finally:
            LOG.append("exit")


async def _script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if [r for r in latest_returns(messages) if r.tool_name == "pay_out"]:
        return ModelResponse(parts=[TextPart("Paid out, thank you.")])
    return ModelResponse(parts=[ToolCallPart("pay_out", {"amount": 12})])


guarded_agent: Agent[None, Any] = Agent(
    scripted_model(_script, model_name="guarded"),
    name=GUARDED,
    output_type=[str, DeferredToolRequests],
    capabilities=[_Guard()],
)


@guarded_agent.tool_plain(requires_approval=True)
async def pay_out(amount: int) -> str:
    LOG.append("tool")
    return f"paid {amount}"


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    LOG.clear()
    yield
    LOG.clear()


@pytest.fixture
def registry() -> AgentRegistry:
    """The demo and test agents, and ``guarded-agent``."""
    return AgentRegistry({**DEMO_AGENTS, **agents.TEST_AGENTS, GUARDED: guarded_agent})


async def _approved(instance: Instance, agent_id: str, prompt: str) -> tuple[Any, list[Any]]:
    """The outcome of approving the run's one call, and every update a subscriber saw of it."""
    runs = instance.runs
    started = await runs.start_run(agent_id, prompt)
    assert started.status == "suspended", started
    assert started.run is not None
    (call_id,) = [c["toolCallId"] for c in started.run["toolCalls"]]
    LOG.clear()

    async def collect() -> list[Any]:
        async with asyncio.timeout(WAIT):
            return [update async for update in instance.subscribe(agent_id, started.run_id)]

    stream = asyncio.ensure_future(collect())
    await asyncio.sleep(0.2)
    outcome = await runs.approve(agent_id, started.run_id, call_id, principal="alice")
    return outcome, await stream


async def test_an_approved_tool_runs_once_inside_the_agents_own_node_wrapper(
    instance: Instance,
) -> None:
    # given an agent whose capability replaces each tool-call node and wraps its run
    # when its call is approved
    outcome, updates = await _approved(instance, GUARDED, "pay me")

    # then the tool ran once, after the replacement, inside the wrapper, and was published
    assert outcome.status == "completed"
    assert LOG == ["enter", "tool", "exit"]
    assert update_kinds(updates) == ["resumed", "tool_call_started", "tool_call_ended", "text", "completed"]
    assert updates[2].result == "paid 12"


def test_the_private_names_are_found_in_the_installed_pydantic_ai() -> None:
    assert internals.missing() == []
    assert internals.PROBLEMS == []


def test_a_missing_private_name_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(AgentRun, "_advance_graph")
    assert internals.missing() == ["pydantic_ai.run.AgentRun._advance_graph"]


@pytest.mark.parametrize(
    ("agent_id", "prompt", "kinds"),
    [
        (GUARDED, "pay me", ["resumed", "tool_call_started", "tool_call_ended", "text", "completed"]),
        (
            "refund-agent",
            "Please refund order 1042",
            ["resumed", "tool_call_started", "tool_call_ended", "text", "completed"],
        ),
        ("flaky-agent", "ship a book", ["resumed", "tool_call_started", "tool_call_ended", "completed"]),
    ],
)
async def test_without_the_private_names_a_continuation_publishes_the_same_updates(
    instance: Instance,
    monkeypatch: pytest.MonkeyPatch,
    agent_id: str,
    prompt: str,
    kinds: list[str],
) -> None:
    # given a pydantic-ai without the private names a continuation drives its nodes with
    driven, updates = await _approved(instance, agent_id, prompt)
    monkeypatch.setattr(internals, "PROBLEMS", ["pydantic_ai.run.AgentRun._advance_graph"])

    # when the same run is approved again from its start
    outcome, fallen_back = await _approved(instance, agent_id, prompt)

    # then it ends as driven, with the same updates (the tool once, inside the wrapper)
    assert (outcome.status, outcome.output) == (driven.status, driven.output)
    assert update_kinds(fallen_back) == update_kinds(updates) == kinds
    assert [(u.kind, u.tool_name, u.args, u.result, u.text) for u in fallen_back[1:-1]] == [
        (u.kind, u.tool_name, u.args, u.result, u.text) for u in updates[1:-1]
    ]
    if agent_id == GUARDED:
        assert LOG == ["enter", "tool", "exit"]
