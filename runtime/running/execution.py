"""One pydantic-ai agent call: start or continue, ending finished or with deferred tool calls."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model
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


async def run_agent(
    agent: AnyAgent,
    scope: RunScope,
    *,
    model: Model | str | None,
    prompt: str | None = None,
    history: Sequence[ModelMessage] | None = None,
    results: DeferredToolResults | None = None,
    events: EventStreamHandler[Any] | None = None,
) -> Finished | Deferred:
    """Run ``agent`` with ``scope`` current, from a prompt or from a stored history (JSON) plus
    deferred results; ``events`` (``UpdatePublisher.handle``) is its ``event_stream_handler``, and
    ``model`` then the continuation's ``ReadsStream`` (``UpdatePublisher.reading``), which reads
    the model's stream itself and answers pydantic-ai with a completed stream.

    ``DeferredToolRequests`` is added to an ``output_type`` that lacks it, so any agent can suspend
    (pydantic-ai refuses that for an agent with output validators: those list it themselves).
    The run is a task of its own (awaited, cancelled with the caller): each time a streaming model
    yields, the event loop resumes only the run's frames, not those of the request that waits.
    Its one capability of runsgate's, ``CallIdentity``, gives every tool call an identity
    (``runtime.running.identity``); when ``needs_decision_context``, ``RunCapability`` does that
    and also shows a tool re-run after a decision only what was decided
    (``runtime.running.decision_toolset``).

    Raises:
        Exception: Whatever the model, a tool or pydantic-ai raised.
    """
    output_type = _output_type_with_deferred(agent)
    capability = RunCapability if needs_decision_context(results) else CallIdentity
    capabilities = [capability(run_id=scope.run_id)]
    with entered(scope):
        chosen: dict[str, Any] = {} if output_type is None else {"output_type": output_type}
        result = await asyncio.get_running_loop().create_task(
            agent.run(
                prompt,
                message_history=history,
                deferred_tool_results=results,
                model=model,
                capabilities=capabilities,
                event_stream_handler=events,
                **chosen,
            )
        )
    output = result.output
    if isinstance(output, DeferredToolRequests):
        return Deferred(requests=output, messages=result.all_messages(), history=result.all_messages_json())
    return Finished(output=to_jsonable_python(output))


def _output_type_with_deferred(agent: AnyAgent) -> list[Any] | None:
    spec: Any = agent.output_type
    items: list[Any] = list(spec) if isinstance(spec, Sequence) and not isinstance(spec, str) else [spec]
    if DeferredToolRequests in items:
        return None
    return [*items, DeferredToolRequests]
