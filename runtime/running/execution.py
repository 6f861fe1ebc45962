"""One pydantic-ai agent call: start or continue, ending finished or with deferred tool calls."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import CompletedStreamedResponse, Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
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
    deferred results; ``events`` (``UpdatePublisher.handle``) is its ``event_stream_handler`` (a
    model that cannot stream is asked for whole answers, ``WholeAnswers``).

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
    if events is not None:
        used = model if model is not None else agent.model
        if isinstance(used, Model) and not can_stream(used):
            model = WholeAnswers(used)
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


def can_stream(model: Model) -> bool:
    """Whether ``model`` answers a streamed request: it implements ``request_stream`` (as every
    provider's model does; pydantic-ai's own check), a ``FunctionModel`` only with a
    ``stream_function``, a wrapper or a fallback chain when all it wraps do."""
    if isinstance(model, FunctionModel):
        return model.stream_function is not None
    if isinstance(model, WrapperModel):
        return can_stream(model.wrapped)
    if isinstance(model, FallbackModel):
        return all(can_stream(m) for m in model.models)
    return type(model).request_stream is not Model.request_stream


class WholeAnswers(WrapperModel):
    """A model that cannot stream, asked for a stream: it answers with its whole response
    (``request``, as when nothing streams), handed over as an already-completed stream that
    sends no delta events (pydantic-ai's ``CompletedStreamedResponse``)."""

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        response: ModelResponse = await self.wrapped.request(messages, model_settings, model_request_parameters)
        yield CompletedStreamedResponse(response, model_request_parameters=model_request_parameters)


def _output_type_with_deferred(agent: AnyAgent) -> list[Any] | None:
    spec: Any = agent.output_type
    items: list[Any] = list(spec) if isinstance(spec, Sequence) and not isinstance(spec, str) else [spec]
    if DeferredToolRequests in items:
        return None
    return [*items, DeferredToolRequests]
