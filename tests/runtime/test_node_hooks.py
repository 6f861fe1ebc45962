"""A continuation keeps pydantic-ai's node lifecycle: an agent's own capability sees each node
before it runs (``before_node_run``, which may replace it) and wraps its whole run
(``wrap_node_run``), so an approved tool runs exactly once, inside the wrapper, while its events
still reach ``runUpdates``. Without pydantic-ai's private names (``runtime.running.internals``)
a continuation runs through ``event_stream_handler``, with the same updates.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models import ModelRequestParameters, StreamedResponse
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.run import AgentRun
from pydantic_ai.settings import ModelSettings
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
CONTEXTUAL = "contextual-agent"
SWAPPED = "swapped-agent"
LOG: list[str] = []
CONTEXTS: list[tuple[RunContext[Any] | None, list[str]]] = []
"""Each streamed request's run context, and the tools whose returns its messages end with then."""


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


class _ContextualModel(FunctionModel):
    """Records the run context pydantic-ai hands each streamed request (a model may read it)."""

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        CONTEXTS.append(
            (run_context, [r.tool_name for r in latest_returns(run_context.messages if run_context else [])])
        )
        async with super().request_stream(messages, model_settings, model_request_parameters, run_context) as s:
            yield s


_scripted = scripted_model(_script, model_name="contextual")
contextual_agent: Agent[None, Any] = Agent(
    _ContextualModel(_scripted.function, stream_function=_scripted.stream_function, model_name="contextual"),
    name=CONTEXTUAL,
    output_type=[str, DeferredToolRequests],
)
contextual_agent.tool_plain(requires_approval=True)(pay_out)


async def _twice(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Asks for ``pay_out`` under the model's id ``call_0`` twice, then thanks."""
    if sum(1 for r in latest_returns(messages) if r.tool_name == "pay_out") and len(messages) > 4:
        return ModelResponse(parts=[TextPart("Paid out twice, thank you.")])
    return ModelResponse(parts=[ToolCallPart("pay_out", {"amount": len(messages)}, tool_call_id="call_0")])


async def _twice_streamed(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    """``_twice``'s answer, streamed."""
    for part in (await _twice(messages, info)).parts:
        if isinstance(part, TextPart):
            yield part.content
        elif isinstance(part, ToolCallPart):
            yield {0: DeltaToolCall(part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id)}


class _Swap(AbstractCapability[Any]):
    """Sends every model request to another model than the run's (as ``ModelFallback`` may)."""

    async def before_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        other = FunctionModel(_twice, stream_function=_twice_streamed, model_name="other")
        return dataclasses.replace(request_context, model=other)


swapped_agent: Agent[None, Any] = Agent(
    FunctionModel(_twice, model_name="own"),
    name=SWAPPED,
    output_type=[str, DeferredToolRequests],
    capabilities=[_Swap()],
)
swapped_agent.tool_plain(requires_approval=True)(pay_out)


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    LOG.clear()
    CONTEXTS.clear()
    yield
    LOG.clear()
    CONTEXTS.clear()


@pytest.fixture
def registry() -> AgentRegistry:
    """The demo and test agents, and this module's own agents."""
    own = {GUARDED: guarded_agent, CONTEXTUAL: contextual_agent, SWAPPED: swapped_agent}
    return AgentRegistry({**DEMO_AGENTS, **agents.TEST_AGENTS, **own})


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


async def test_a_continuations_model_is_given_the_run_context(instance: Instance) -> None:
    # given an agent whose model reads the run context pydantic-ai hands a streamed request
    # when its call is approved
    outcome, updates = await _approved(instance, CONTEXTUAL, "pay me")

    # then the continuation's one request had the run's context, holding the history it continues
    assert outcome.status == "completed"
    assert update_kinds(updates) == ["resumed", "tool_call_started", "tool_call_ended", "text", "completed"]
    assert len(CONTEXTS) == 1
    ((context, returns),) = CONTEXTS
    assert isinstance(context, RunContext)
    assert returns == ["pay_out"]


async def test_a_call_a_model_the_run_did_not_choose_makes_in_a_continuation_gets_an_identity(
    instance: Instance,
) -> None:
    # given an agent whose own capability sends every request to another model than the run's
    # when its first call is approved and the other model asks again under the same id
    outcome, _ = await _approved(instance, SWAPPED, "pay me")

    # then the new call waits under an identity of runsgate's, the model's id kept beside it
    assert outcome.status == "suspended", outcome
    assert outcome.run is not None
    [call] = outcome.run["toolCalls"]
    assert call["toolCallId"].startswith("c_")
    assert call["modelToolCallId"] == "call_0"


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


async def test_an_answer_of_a_model_a_capability_chose_reaches_subscribers(instance: Instance) -> None:
    # given a run whose agent's capability sends every request to another model, waiting on its
    # second call after its first was approved
    first, _ = await _approved(instance, SWAPPED, "pay me")
    assert first.run is not None
    run_id, (call,) = first.run_id, first.run["toolCalls"]

    # when the second is approved
    outcome = await instance.runs.approve(SWAPPED, run_id, call["toolCallId"], principal="alice")

    # then the other model's answer is published as the run's text, as the run's own model's is
    assert outcome.status == "completed", outcome
    async with asyncio.timeout(WAIT):
        updates = [update async for update in instance.subscribe(SWAPPED, run_id)]
    assert update_kinds(updates) == ["resumed", "tool_call_started", "tool_call_ended", "text", "completed"], [
        (u.kind, u.text) for u in updates
    ]
