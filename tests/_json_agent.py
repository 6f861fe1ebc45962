"""``json-echo``: a test agent that hands JSON from its prompt to the places runsgate stores JSON.

The prompt is JSON text: ``{"hold": X}`` makes the model call ``hold(value=X)``, a tool that needs
approval (``X`` is listed as the call's ``args.value``); ``{"ask": {"payload": Y, "schema": Z}}``
makes it call ``ask``, which ``suspend()``-s with ``Y`` as ``suspendPayload`` and ``Z`` as
``resumeSchema`` and returns the resume data; ``{"big": N}`` calls ``ask`` with a payload of ``N``
characters (a snapshot a store may refuse as too large), and ``{"big_later": N}`` calls ``ask_twice``,
whose second question (asked after the first is answered) has such a payload. The keys may be
given: the run then waits for both calls. Once every call returned, the run completes with the
output ``{"held": X, "answered": D}`` (only the keys of the calls made), so resume data and
approved arguments come back unchanged in the outcome and in the ``completed`` event.

``RUNSGATE_AGENTS=tests._json_agent:AGENTS`` (with the demo agents).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests

from runtime.demo import AGENTS as DEMO_AGENTS
from runtime.demo._script import latest_prompt, latest_returns
from runtime.running.suspension import suspend

JSON_ECHO = "json-echo"
_KEYS = {"hold": "held", "ask": "answered", "ask_twice": "answered"}


def _script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [ret for ret in latest_returns(messages) if ret.tool_name in _KEYS]
    if returns:
        output = {_KEYS[ret.tool_name]: ret.content for ret in returns}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"response": output})])
    case = json.loads(latest_prompt(messages))
    parts = []
    if "hold" in case:
        parts.append(ToolCallPart("hold", {"value": case["hold"]}))
    if "ask" in case:
        parts.append(ToolCallPart("ask", {"payload": case["ask"].get("payload"), "schema": case["ask"].get("schema")}))
    if "big" in case:
        parts.append(ToolCallPart("ask", {"payload": "x" * case["big"]}))
    if "big_later" in case:
        parts.append(ToolCallPart("ask_twice", {"size": case["big_later"]}))
    return ModelResponse(parts=parts)


json_echo = Agent(
    FunctionModel(_script, model_name="runsgate-test-json-echo"),
    name=JSON_ECHO,
    deps_type=type(None),
    output_type=[dict[str, Any], DeferredToolRequests],
)


@json_echo.tool_plain(requires_approval=True)
def hold(value: Any) -> Any:
    """Return ``value`` once approved."""
    return value


@json_echo.tool
def ask(ctx: RunContext[None], payload: Any = None, schema: dict[str, Any] | None = None) -> Any:
    """Suspend with ``payload`` until resumed with data matching ``schema``; return the data."""
    return suspend(ctx, payload, resume_schema=schema)


@json_echo.tool
def ask_twice(ctx: RunContext[None], size: int) -> Any:
    """Ask a small question, then one whose payload has ``size`` characters; return both answers."""
    first = suspend(ctx, "first question")
    return [first, suspend(ctx, "x" * size)]


AGENTS: dict[str, Agent[None, Any]] = {**DEMO_AGENTS, JSON_ECHO: json_echo}
"""The demo agents and ``json-echo``, for ``RUNSGATE_AGENTS``."""
