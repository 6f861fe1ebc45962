"""Scripted agents for the two-instance tests (no network).

``gate-agent``: the prompt is ``"<token> <calls> <delay>"``. In one model turn the model asks
for ``<calls>`` calls of ``act`` (labels ``<token>#1`` ...), each needing approval. ``act``
sleeps ``delay`` seconds, then appends one line ``label<TAB>toolCallId<TAB>pid`` to the file
named by ``RUNSGATE_TEST_SIDE_EFFECTS``: a side effect every server process shares, so a test
can count how often the tool really ran.

``fragile-agent``: the prompt is ``"<token>"``; the model asks for one approved ``act``
(no delay), and after it ran answers ``done: <result>`` — unless the file named by
``RUNSGATE_TEST_MODEL_DOWN`` exists, in which case the model raises ``RuntimeError("model
provider is down")``, like a provider outage after the tool ran.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests

from runtime.demo._script import latest_prompt, latest_returns

SIDE_EFFECTS_ENV = "RUNSGATE_TEST_SIDE_EFFECTS"
MODEL_DOWN_ENV = "RUNSGATE_TEST_MODEL_DOWN"


def parse_prompt(prompt: str) -> tuple[str, int, float]:
    token, calls, delay = [*prompt.split(), "1", "0"][:3]
    return token, int(calls), float(delay)


def _gate_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [r for r in latest_returns(messages) if r.tool_name == "act"]
    if returns:
        return ModelResponse(parts=[TextPart("; ".join(f"{r.outcome}: {r.content}" for r in returns))])
    token, calls, delay = parse_prompt(latest_prompt(messages))
    return ModelResponse(
        parts=[ToolCallPart("act", {"label": f"{token}#{i}", "delay": delay}) for i in range(1, calls + 1)]
    )


gate_agent = Agent(
    FunctionModel(_gate_script, model_name="runsgate-test-gate"),
    name="gate-agent",
    deps_type=type(None),
    description="Asks to act; every act waits for approval and leaves a line in a shared file.",
    output_type=[str, DeferredToolRequests],
)


@gate_agent.tool(requires_approval=True)
async def act(ctx: RunContext[None], label: str, delay: float = 0.0) -> str:
    """Do something with a visible side effect. Needs a person's approval."""
    if delay:
        await asyncio.sleep(delay)
    _record(label, ctx.tool_call_id)
    return f"did {label}"


def side_effect_lines(path: Path, token: str) -> list[list[str]]:
    """The lines ``act`` wrote to ``path`` (``label, toolCallId, pid``) for runs started with ``token``."""
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [row for row in rows if row[0].split("#")[0] == token]


def _record(label: str, tool_call_id: str | None) -> None:
    """Append one line to the shared side-effect file (one small O_APPEND write)."""
    with open(os.environ[SIDE_EFFECTS_ENV], "a", encoding="utf-8") as effects:
        effects.write(f"{label}\t{tool_call_id}\t{os.getpid()}\n")


def _fragile_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [r for r in latest_returns(messages) if r.tool_name == "act"]
    if returns:
        flag = os.environ.get(MODEL_DOWN_ENV)
        if flag and os.path.exists(flag):
            raise RuntimeError("model provider is down")
        return ModelResponse(parts=[TextPart(f"done: {returns[0].content}")])
    token = latest_prompt(messages).split()[0]
    return ModelResponse(parts=[ToolCallPart("act", {"label": f"{token}#1", "delay": 0.0})])


fragile_agent = Agent(
    FunctionModel(_fragile_script, model_name="runsgate-test-fragile"),
    name="fragile-agent",
    deps_type=type(None),
    description="Asks to act once; its model fails after the tool ran while a flag file exists.",
    output_type=[str, DeferredToolRequests],
)
fragile_agent.tool(requires_approval=True)(act)

AGENTS = {"gate-agent": gate_agent, "fragile-agent": fragile_agent}
