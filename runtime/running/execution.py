"""One pydantic-ai agent call: start or continue, ending finished or with deferred tool calls."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai import Agent, AgentRunResult
from pydantic_ai.messages import AgentStreamEvent, ModelMessage
from pydantic_ai.models import Model
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults
from pydantic_core import to_jsonable_python

from ..registry import AnyAgent
from .decision_toolset import RunCapability, needs_decision_context
from .identity import CallIdentity
from .scope import RunScope, entered


@dataclass(kw_only=True)
class Finished:
    """The agent produced its final output."""

    output: Any
    """JSON-safe."""


@dataclass(kw_only=True)
class Deferred:
    """The agent stopped with deferred tool calls pending."""

    requests: DeferredToolRequests
    messages: list[ModelMessage]
    history: bytes
    """``messages`` as pydantic-ai JSON."""


EventReader = Callable[[AsyncIterable[AgentStreamEvent]], Awaitable[None]]
"""Reads the events of a node that runs tools (``UpdatePublisher.read``)."""


async def run_agent(
    agent: AnyAgent,
    scope: RunScope,
    *,
    model: Model | str | None,
    prompt: str | None = None,
    history: Sequence[ModelMessage] | None = None,
    results: DeferredToolResults | None = None,
    events: EventReader | None = None,
) -> Finished | Deferred:
    """Run ``agent`` with ``scope`` current, from a prompt or from a stored history (JSON) plus
    deferred results. With ``events``, the run is driven node by node (``Agent.iter``), each node
    running tool calls streamed into ``events``; ``model`` (``UpdatePublisher.reading``) reads its
    own answers' events, as pydantic-ai streams none.

    ``DeferredToolRequests`` is added to an ``output_type`` that lacks it, so any agent can suspend
    (pydantic-ai refuses that for an agent with output validators: those list it themselves).
    The run is a task of its own (awaited, cancelled with the caller): each time a streaming model
    yields, the event loop resumes only the run's frames, not those of the request that waits.
    ``CallIdentity`` gives every tool call an identity (``runtime.running.identity``);
    ``RunCapability`` (when ``needs_decision_context``) also shows a re-run tool only what was
    decided (``runtime.running.decision_toolset``).

    Raises:
        Exception: Whatever the model, a tool or pydantic-ai raised.
    """
    output_type = _output_type_with_deferred(agent)
    chosen: dict[str, Any] = {} if output_type is None else {"output_type": output_type}
    chosen.update(message_history=history, deferred_tool_results=results, model=model)
    result = await asyncio.get_running_loop().create_task(_run(agent, scope, prompt, events, chosen))
    output = result.output
    if isinstance(output, DeferredToolRequests):
        return Deferred(requests=output, messages=result.all_messages(), history=result.all_messages_json())
    return Finished(output=to_jsonable_python(output))


async def _run(
    agent: AnyAgent, scope: RunScope, prompt: str | None, events: EventReader | None, chosen: dict[str, Any]
) -> AgentRunResult[Any]:
    """``agent``'s run with ``scope`` current and its capability; with ``events``, each node that
    runs tool calls is streamed into them as pydantic-ai's ``Agent.iter`` yields it
    (``node.stream``; a capability's ``before_node_run`` and ``wrap_node_run`` then see it
    already streamed), and no other node's events are read."""
    capability = RunCapability if needs_decision_context(chosen["deferred_tool_results"]) else CallIdentity
    with entered(scope):
        if events is None:
            return await agent.run(prompt, capabilities=[capability(run_id=scope.run_id)], **chosen)
        async with agent.iter(prompt, capabilities=[capability(run_id=scope.run_id)], **chosen) as run:
            async for node in run:
                if Agent.is_call_tools_node(node) and node.model_response.tool_calls:
                    async with node.stream(run.ctx) as stream:
                        await events(stream)
    assert run.result is not None  # pydantic-ai's: a run ended without End raises
    return run.result


def can_stream(model: Model) -> bool:
    """Whether ``model`` streams: it implements ``request_stream`` (pydantic-ai's check), a
    ``FunctionModel`` with a ``stream_function``, a wrapper or fallback chain when all it wraps do."""
    if isinstance(model, FunctionModel):
        return model.stream_function is not None
    if isinstance(model, WrapperModel):
        return can_stream(model.wrapped)
    if isinstance(model, FallbackModel):
        return all(can_stream(m) for m in model.models)
    return type(model).request_stream is not Model.request_stream


def _output_type_with_deferred(agent: AnyAgent) -> list[Any] | None:
    spec: Any = agent.output_type
    items: list[Any] = list(spec) if isinstance(spec, Sequence) and not isinstance(spec, str) else [spec]
    if DeferredToolRequests in items:
        return None
    return [*items, DeferredToolRequests]
