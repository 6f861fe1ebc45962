"""One pydantic-ai agent call: start or continue, ending finished or with deferred tool calls."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from pydantic_ai import Agent, AgentRunResult, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import AgentStreamEvent, ModelMessage, ModelResponse
from pydantic_ai.models import CompletedStreamedResponse, Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults
from pydantic_core import to_jsonable_python

from ..registry import AnyAgent
from . import internals
from .decision_toolset import RunCapability, needs_decision_context
from .identity import CallIdentity, ChosenModels, IdentifyingModel
from .internals import EventReader
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
    events: EventReader | None = None,
) -> Finished | Deferred:
    """Run ``agent`` with ``scope`` current, from a prompt or from a stored history (JSON) plus
    deferred results. With ``events`` (``UpdatePublisher.read``), each node running tool calls is
    read by it, inside the node hooks (``internals.drive``), and ``model``
    (``UpdatePublisher.reading``) reads its own answers; without ``drive`` (``internals.PROBLEMS``)
    ``events`` reads the ``event_stream_handler`` (a model that cannot stream: ``WholeAnswers``).

    ``DeferredToolRequests`` is added to an ``output_type`` that lacks it, so any agent can suspend
    (pydantic-ai refuses that for an agent with output validators: those list it themselves).
    The run is a task of its own (awaited, cancelled with the caller). ``CallIdentity`` gives
    every call an identity, as a capability or through a driven run's ``IdentifyingModel`` (an
    agent without capabilities of its own; else ``ChosenModels`` wraps a model they choose);
    ``RunCapability`` (``needs_decision_context``) also shows a re-run tool only what was decided.

    Raises:
        Exception: Whatever the model, a tool or pydantic-ai raised.
    """
    output_type = _output_type_with_deferred(agent)
    chosen: dict[str, Any] = {} if output_type is None else {"output_type": output_type}
    chosen.update(message_history=history, deferred_tool_results=results)
    if events is not None and internals.PROBLEMS and isinstance(model, Model) and not can_stream(model):
        model = WholeAnswers(model)
    chosen.update(model=model)
    result = await asyncio.get_running_loop().create_task(_run(agent, scope, prompt, events, chosen))
    output = result.output
    if isinstance(output, DeferredToolRequests):
        return Deferred(requests=output, messages=result.all_messages(), history=result.all_messages_json())
    return Finished(output=to_jsonable_python(output))


async def _run(
    agent: AnyAgent, scope: RunScope, prompt: str | None, events: EventReader | None, chosen: dict[str, Any]
) -> AgentRunResult[Any]:
    """``agent``'s run with ``scope`` current and its capability; with ``events``, driven by
    ``internals.drive``, or with ``events`` as its ``event_stream_handler``."""
    plain = _plain(agent)
    identity = (RunCapability if needs_decision_context(chosen["deferred_tool_results"]) else CallIdentity)(
        run_id=scope.run_id
    )
    capabilities: list[AbstractCapability[Any]] = [identity]
    with entered(scope):
        if events is None:
            return await agent.run(prompt, capabilities=capabilities, **chosen)
        if internals.PROBLEMS:

            async def handler(ctx: RunContext[Any], stream: AsyncIterable[AgentStreamEvent]) -> None:
                await events(stream)

            return await agent.run(prompt, capabilities=capabilities, event_stream_handler=handler, **chosen)
        model = chosen["model"]
        if isinstance(model, IdentifyingModel):
            if not plain:  # its own capabilities may send a request to another model
                capabilities.append(ChosenModels(model))
            elif type(identity) is CallIdentity:  # given by the model: pydantic-ai's hooks cost more
                model.identity, capabilities = identity, []
        async with agent.iter(prompt, capabilities=capabilities, **chosen) as run:
            await internals.drive(run, events)
    assert run.result is not None  # pydantic-ai's: a run ended without End raises
    return run.result


@functools.cache
def _default_capabilities() -> frozenset[type]:
    """The capability classes pydantic-ai gives an agent that was given none."""
    agent = Agent(FunctionModel(lambda messages, info: ModelResponse(parts=[])))
    return frozenset(type(capability) for capability in agent.root_capability.capabilities)


def _plain(agent: AnyAgent) -> bool:
    """Whether ``agent`` has no capability beyond those every agent gets (``_default_capabilities``;
    a group of them is not one): none of its own may then send a model request to another model
    than the run's (``ModelFallback``, ``SelectModel``), whose answers its ``IdentifyingModel``
    would not identify (``ChosenModels`` has them read)."""
    return set(map(type, agent.root_capability.capabilities)) <= _default_capabilities()


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
