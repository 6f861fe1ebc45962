"""Scripted models that stream (issue 29 part 1's prerequisite), and one that cannot.

With an ``event_stream_handler`` (or ``Agent.run_stream_events``) pydantic-ai asks the model for a
streamed answer. The demo agents' models (``runtime.demo._script.scripted_model``) give one: the
same response as a whole answer, as text deltas and tool-call deltas. A ``FunctionModel`` without a
``stream_function`` (every test agent's) cannot, and still runs through the ``RunManager`` as before.
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Any

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    AgentStreamEvent,
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    ModelMessage,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
    ToolCallPartDelta,
)
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.tools import DeferredToolRequests

from runtime import RunManager
from runtime.demo import AGENTS
from runtime.demo import _script as script_module
from runtime.demo._script import ARGS_CHUNK, scripted_model

from . import agents

PROMPTS = {
    "refund-agent": "Hello, can you help me?",
    "weather-agent": "What's the weather in Paris?",
    "support-supervisor": "Hello there",
}
"""A prompt per demo agent that completes without waiting for anyone (text as the final answer)."""


async def _streamed(agent: Agent[None, Any], prompt: str) -> tuple[Any, list[ModelMessage], list[AgentStreamEvent]]:
    events: list[AgentStreamEvent] = []

    async def handler(ctx: RunContext[Any], stream: AsyncIterable[AgentStreamEvent]) -> None:
        async for event in stream:
            events.append(event)

    result = await agent.run(prompt, event_stream_handler=handler)
    return result.output, result.all_messages(), events


def _shape(messages: list[ModelMessage]) -> list[list[tuple[str, Any]]]:
    """What the model said and was told, without ids, timestamps or usage (a tool call's args as a dict)."""
    shape = []
    for message in messages:
        parts: list[tuple[str, Any]] = []
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                parts.append(("tool-call", (part.tool_name, part.args_as_dict())))
            else:
                parts.append((part.part_kind, getattr(part, "content", None)))
        shape.append(parts)
    return shape


def test_every_demo_agent_has_a_prompt_here() -> None:
    assert set(PROMPTS) == set(AGENTS)


@pytest.mark.parametrize("agent_id", sorted(PROMPTS))
async def test_a_demo_agent_streams_its_answer_in_text_deltas_and_ends_as_when_run_whole(agent_id: str) -> None:
    # given a demo agent, and what it answers when run whole (no stream handler)
    agent = AGENTS[agent_id]
    whole = await agent.run(PROMPTS[agent_id])
    assert isinstance(whole.output, str)

    # when it is run with pydantic-ai's event stream handler
    output, messages, events = await _streamed(agent, PROMPTS[agent_id])

    # then its answer arrived as several text deltas, which add up to the same output
    starts = [e.part.content for e in events if isinstance(e, PartStartEvent) and isinstance(e.part, TextPart)]
    deltas = [
        e.delta.content_delta for e in events if isinstance(e, PartDeltaEvent) and isinstance(e.delta, TextPartDelta)
    ]
    assert len(starts) == 1
    assert len(deltas) >= 2, deltas
    assert starts[0] + "".join(deltas) == output == whole.output
    # and the run said and did the same as the whole run
    assert _shape(messages) == _shape(whole.all_messages())


async def test_a_demo_agent_streams_its_tool_calls_and_suspends_as_when_run_whole() -> None:
    # given the refund agent, which looks the order up, then asks to refund it (an approval)
    agent = AGENTS["refund-agent"]
    whole = await agent.run("Please refund order 1042")

    # when it is run with the event stream handler
    output, messages, events = await _streamed(agent, "Please refund order 1042")

    # then each tool call started with its name, and its JSON arguments came in deltas
    started = [e.part for e in events if isinstance(e, PartStartEvent) and isinstance(e.part, ToolCallPart)]
    assert [part.tool_name for part in started] == ["lookup_order", "issue_refund"]
    arg_deltas = [
        e.delta.args_delta for e in events if isinstance(e, PartDeltaEvent) and isinstance(e.delta, ToolCallPartDelta)
    ]
    assert len(arg_deltas) >= 2
    assert all(isinstance(delta, str) and len(delta) <= ARGS_CHUNK for delta in arg_deltas)
    # and both calls were announced, but only the lookup returned: the refund waits for an approval
    called = [e.part.tool_name for e in events if isinstance(e, FunctionToolCallEvent)]
    returned = [e.part.tool_name for e in events if isinstance(e, FunctionToolResultEvent)]
    assert called == ["lookup_order", "issue_refund"]
    assert returned == ["lookup_order"]
    assert isinstance(output, DeferredToolRequests)
    assert isinstance(whole.output, DeferredToolRequests)
    assert [(c.tool_name, c.args_as_dict()) for c in output.approvals] == [
        ("issue_refund", {"order_id": 1042, "amount": 49.9})
    ]
    assert [(c.tool_name, c.args_as_dict()) for c in whole.output.approvals] == [
        ("issue_refund", {"order_id": 1042, "amount": 49.9})
    ]
    assert [c.tool_call_id for c in output.approvals] == [started[1].tool_call_id]
    assert _shape(messages) == _shape(whole.all_messages())


async def test_a_scripted_model_streams_thinking_and_paces_its_deltas(monkeypatch: pytest.MonkeyPatch) -> None:
    # given a scripted model that thinks, then answers, paced like a remote model
    async def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ThinkingPart("The user greets me."), TextPart("Hello to you too.")])

    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(script_module.asyncio, "sleep", sleep)
    agent = Agent(scripted_model(script, model_name="thinker", time_to_first_token=0.2, time_per_token=0.02))

    # when it is run streamed
    output, messages, events = await _streamed(agent, "Hi")

    # then the thinking and the text came as deltas, and each delta waited as the model says
    thinking = [e for e in events if isinstance(e, PartDeltaEvent) and isinstance(e.delta, ThinkingPartDelta)]
    assert thinking
    assert output == "Hello to you too."
    assert isinstance(messages[-1], ModelResponse)
    assert [type(p) for p in messages[-1].parts] == [ThinkingPart, TextPart]
    assert messages[-1].parts[0].content == "The user greets me."  # type: ignore[union-attr]
    items = 4 + 4  # "The " "user " "greets " "me." then "Hello " "to " "you " "too."
    assert slept == [0.2] + [0.02] * (items - 1)


async def test_a_model_that_cannot_stream_still_runs_through_the_run_manager(manager: RunManager) -> None:
    # given a test agent whose FunctionModel has no stream_function: it cannot answer streamed
    agent = agents.TEST_AGENTS["flaky-agent"]
    with pytest.raises(AssertionError, match="stream_function"):
        await _streamed(agent, "Ship it")

    # when the run manager starts it and a person approves its call
    started = await manager.start_run("flaky-agent", "Ship it")
    assert started.status == "suspended"
    assert started.run is not None
    [call] = started.run["toolCalls"]
    outcome = await manager.approve("flaky-agent", started.run_id, call["toolCallId"])

    # then it ran as it always has: suspended for the approval, then completed
    assert outcome.status == "completed"
    assert outcome.output == "done: shipped book"
    assert agents.SHIPPED == ["book"]
