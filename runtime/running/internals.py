"""Every private name of pydantic-ai that runsgate uses, in this one module.

A continuation drives its run's nodes as pydantic-ai's own ``AbstractAgent.run`` does with an
``event_stream_handler``: each node through ``AgentRun._run_node_with_hooks`` (the capabilities'
``wrap_node_run``, ``before_node_run``, which may replace the node, ``after_node_run``), a node
running tool calls streamed inside them and then advanced (``AgentRun._advance_graph``), any other
node run by ``AgentRun._stream_and_advance`` (as ``AgentRun.next``); ``current_run_context`` is the
run context pydantic-ai sets while it calls a model (``_run_context``, as its model wrappers read).
``PROBLEMS``, checked once at import (one WARNING when not empty), lists the names the installed
pydantic-ai lacks or changed; ``runtime.running.execution`` then uses an ``event_stream_handler``.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any

from pydantic_ai import Agent, RunContext, _run_context
from pydantic_ai.messages import AgentStreamEvent
from pydantic_ai.run import AgentRun

logger = logging.getLogger(__name__)

EventReader = Callable[[AsyncIterable[AgentStreamEvent]], Awaitable[None]]
"""Reads the events of a node that runs tools (``UpdatePublisher.read``)."""

_EXPECTED = {
    "_run_node_with_hooks": ("self", "node", "step_fn"),
    "_advance_graph": ("self", "node"),
    "_stream_and_advance": ("self", "node"),
}
"""``AgentRun``'s private coroutine functions ``drive`` calls, with their parameters' names."""


def missing() -> list[str]:
    """The private names ``drive`` needs that the installed pydantic-ai lacks, or has with other
    parameters or not as coroutine functions (empty when all are there as expected)."""
    problems: list[str] = []
    for name, parameters in _EXPECTED.items():
        function = getattr(AgentRun, name, None)
        if not inspect.iscoroutinefunction(function) or tuple(inspect.signature(function).parameters) != parameters:
            problems.append(f"pydantic_ai.run.AgentRun.{name}")
    if not callable(getattr(_run_context, "get_current_run_context", None)):
        problems.append("pydantic_ai._run_context.get_current_run_context")
    return problems


current_run_context: Callable[[], RunContext[Any] | None] = getattr(
    _run_context, "get_current_run_context", lambda: None
)
"""The context of the agent run calling a model now, as pydantic-ai hands ``request_stream``
(``None`` outside one): pydantic-ai's own function."""


PROBLEMS = missing()
"""``missing()`` at import: ``drive`` is used only when it is empty."""
if PROBLEMS:
    logger.warning(
        "pydantic-ai lacks or changed %s: continuations stream their runs through event_stream_handler",
        ", ".join(PROBLEMS),
    )


async def drive(run: AgentRun[Any, Any], read: EventReader) -> None:
    """Run ``run`` (``Agent.iter``'s) to its end, each node inside the capabilities' node hooks;
    a node running tool calls, as ``before_node_run`` left it (whatever it was before), is
    streamed into ``read`` (which reads every event) before it advances, any other as
    ``AgentRun.next`` runs it.

    Raises:
        Exception: Whatever the model, a tool, a capability or pydantic-ai raised.
    """

    async def streamed(node: Any) -> Any:
        if not (Agent.is_call_tools_node(node) and node.model_response.tool_calls):
            return await run._stream_and_advance(node)
        async with node.stream(run.ctx) as stream:
            await read(stream)
            async for _ in stream:  # what ``read`` left, so the node ends through its wrappers
                pass
        return await run._advance_graph(node)

    node = run.next_node
    while not Agent.is_end_node(node) and run.result is None:
        node = await run._run_node_with_hooks(node, streamed)
