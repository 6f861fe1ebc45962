"""Agents whose scripted models reuse tool call ids, as local and smaller models do (issue 24).

- ``dup-turn``: one turn, a plain call ``note`` and an approval call ``act`` both with the id ``dup``;
- ``restart-ids``: ids restart each turn: ``act`` with the id ``call_0`` in turn 1, again in turn 2;
- ``twins``: one turn, two approvals of ``act`` both with the id ``dup``;
- ``twin-questions``: one turn, two calls of ``ask`` (each ``suspend()``-s for data) both with the id ``q``.

``streamed(agent_id)`` builds the same agent with a model that streams its answers (issue 29's run
updates). ``RAN`` records each tool body's run as ``(tool, arguments)``. The final answer lists every tool
result the model read, in order (``tool:result``), so a test sees what the model was told.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests

from runtime import suspend
from runtime.demo._script import Script, scripted_model

RAN: list[tuple[str, dict[str, Any]]] = []
"""Every tool body run: ``(tool name, its arguments)``, in order."""

SEEN_IDS: list[list[str]] = []
"""The tool call ids of each model request, as the model was sent them (what a provider sees)."""


def reset() -> None:
    """Forget every run and request (tests start from nothing)."""
    RAN.clear()
    SEEN_IDS.clear()


def _turns(messages: list[ModelMessage]) -> int:
    return sum(1 for message in messages if isinstance(message, ModelResponse))


def _read(messages: list[ModelMessage]) -> str:
    """Every tool result in ``messages``, in order, as ``tool:result``."""
    results = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    results.append(f"{part.tool_name}:{part.content}")
                elif isinstance(part, RetryPromptPart):
                    results.append(f"{part.tool_name}:retry")
    return " | ".join(results)


def _record_ids(messages: list[ModelMessage]) -> None:
    ids = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolCallPart | ToolReturnPart | RetryPromptPart) and part.tool_call_id:
                ids.append(part.tool_call_id)
    SEEN_IDS.append(ids)


def _respond(turns: list[list[ToolCallPart]]) -> Script:
    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        _record_ids(messages)
        turn = _turns(messages)
        if turn < len(turns):
            return ModelResponse(
                parts=[ToolCallPart(p.tool_name, p.args, tool_call_id=p.tool_call_id) for p in turns[turn]]
            )
        return ModelResponse(parts=[TextPart(_read(messages))])

    return respond


def _agent(name: str, turns: list[list[ToolCallPart]], *, stream: bool = False) -> Agent[None, Any]:
    model = scripted_model(_respond(turns), model_name=name) if stream else FunctionModel(_respond(turns))
    agent: Agent[None, Any] = Agent(model, name=name, output_type=[str, DeferredToolRequests])

    @agent.tool_plain
    async def note(text: str) -> str:
        RAN.append(("note", {"text": text}))
        return f"noted {text}"

    @agent.tool_plain(requires_approval=True)
    async def act(value: int) -> str:
        RAN.append(("act", {"value": value}))
        return f"acted {value}"

    @agent.tool
    async def ask(ctx: RunContext[None], topic: str) -> str:
        answer = suspend(ctx, {"question": f"about {topic}?"}, resume_schema={"type": "string"})
        RAN.append(("ask", {"topic": topic, "answer": answer}))
        return f"{topic}={answer}"

    return agent


DUP_TURN = "dup-turn"
RESTART_IDS = "restart-ids"
TWINS = "twins"
TWIN_QUESTIONS = "twin-questions"

TURNS: dict[str, list[list[ToolCallPart]]] = {
    DUP_TURN: [
        [
            ToolCallPart("note", {"text": "plain"}, tool_call_id="dup"),
            ToolCallPart("act", {"value": 7}, tool_call_id="dup"),
        ]
    ],
    RESTART_IDS: [
        [ToolCallPart("act", {"value": 1}, tool_call_id="call_0")],
        [ToolCallPart("act", {"value": 2}, tool_call_id="call_0")],
    ],
    TWINS: [
        [
            ToolCallPart("act", {"value": 1}, tool_call_id="dup"),
            ToolCallPart("act", {"value": 2}, tool_call_id="dup"),
        ]
    ],
    TWIN_QUESTIONS: [
        [
            ToolCallPart("ask", {"topic": "a"}, tool_call_id="q"),
            ToolCallPart("ask", {"topic": "b"}, tool_call_id="q"),
        ]
    ],
}
"""Each agent's model turns: the tool calls it makes, with the ids it gives them."""

AGENTS = {agent_id: _agent(agent_id, turns) for agent_id, turns in TURNS.items()}
"""The agents, by id (``RUNSGATE_AGENTS=tests._collisions:AGENTS``)."""


def streamed(agent_id: str, name: str | None = None) -> Agent[None, Any]:
    """The agent ``agent_id`` (named ``name``, default the same) with a model that streams its
    answers: text and tool-call deltas, the calls still carrying the reused ids."""
    return _agent(name or agent_id, TURNS[agent_id], stream=True)
