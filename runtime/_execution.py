"""One pydantic-ai agent call: start or continue, ending finished or with deferred tool calls."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

from ._decision_toolset import DecisionCapability, needs_decision_context
from ._identity import CallIdentity
from ._json import jsonable
from ._scope import RunScope, entered
from .registry import AnyAgent


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


async def run_agent(
    agent: AnyAgent,
    scope: RunScope,
    *,
    model: Model | str | None,
    prompt: str | None = None,
    history: Sequence[ModelMessage] | None = None,
    results: DeferredToolResults | None = None,
) -> Finished | Deferred:
    """Run ``agent`` with ``scope`` current, from a prompt or from a stored history (parsed with
    ``ModelMessagesTypeAdapter``) plus results.

    An agent whose ``output_type`` lacks ``DeferredToolRequests`` gets it added for the run, so
    any registered agent can suspend. ``CallIdentity`` gives every tool call the model makes an
    identity of runsgate's own (``runtime._identity``). ``DecisionCapability`` is added to a run that re-runs a
    call with answers or one not approved, so a tool re-run after a decision sees only what was
    decided (``runtime._decision_toolset``; ``needs_decision_context``).
    (pydantic-ai refuses a run-time ``output_type`` for an
    agent with output validators: such agents must list ``DeferredToolRequests`` themselves.)

    Raises:
        Exception: Whatever the model, a tool or pydantic-ai raised.
    """
    output_type = _output_type_with_deferred(agent)
    capabilities: list[Any] = [CallIdentity()]
    if needs_decision_context(results):
        capabilities.append(DecisionCapability())
    with entered(scope):
        if output_type is None:
            result = await agent.run(
                prompt,
                message_history=history,
                deferred_tool_results=results,
                model=model,
                capabilities=capabilities,
            )
        else:
            result = await agent.run(
                prompt,
                output_type=output_type,
                message_history=history,
                deferred_tool_results=results,
                model=model,
                capabilities=capabilities,
            )
    output = result.output
    if isinstance(output, DeferredToolRequests):
        return Deferred(requests=output, messages=result.all_messages(), history=result.all_messages_json())
    return Finished(output=jsonable(output))


def _output_type_with_deferred(agent: AnyAgent) -> list[Any] | None:
    spec: Any = agent.output_type
    items: list[Any] = list(spec) if isinstance(spec, Sequence) and not isinstance(spec, str) else [spec]
    if DeferredToolRequests in items:
        return None
    return [*items, DeferredToolRequests]
