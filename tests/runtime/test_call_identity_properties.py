"""Property: whatever ids a model reuses, each tool runs with its own call's arguments and answers (issue 24).

Hypothesis generates scripted models whose tool call ids collide (within a turn, across turns,
in a supervisor's delegated calls and their sub-runs), runs them through ``RunManager`` on a
store, decides every pending call (approve, approve with edited arguments, decline, resume),
closing and reopening the manager and the store between decisions, and checks:

- each tool body ran exactly as its own call was decided: an approved call once, with its own
  arguments (or its own edit), a declined call never, a call waiting for data once, with its own
  answer; a plain call once;
- the model read each call's own result;
- every stored call has an identity of its own, and the model's id kept.

500 examples on the memory store and on SQLite, 100 on MongoDB (FerretDB), derandomized.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests

from runtime import AgentRegistry, RunManager, delegate, suspend
from storage import MemorySnapshotStore, SnapshotStore, SQLiteSnapshotStore

from .._servers import mongo_store, with_database

IDS = st.sampled_from(["a", "b", "call_0"])
"""Model ids from a small pool, so they collide."""

KINDS = st.sampled_from(["plain", "act", "ask", "sub"])


@dataclass(frozen=True)
class Call:
    """One call a scripted model makes: ``tool(value)`` under the model's id ``model_id``."""

    tool: str
    value: int
    model_id: str


@dataclass(frozen=True)
class Script:
    turns: list[list[Call]]
    sub_id: str
    """The model id the sub-agent gives its one call (``act``), in every sub-run."""
    choices: list[int]
    """How each decision is made, in order: 0 approve, 1 approve edited, 2 decline (approvals)."""
    restarts: list[bool]


@st.composite
def scripts(draw: st.DrawFn) -> Script:
    values = iter(range(1, 1000))
    turns = [
        [Call(draw(KINDS), next(values), draw(IDS)) for _ in range(draw(st.integers(1, 3)))]
        for _ in range(draw(st.integers(1, 3)))
    ]
    return Script(
        turns=turns,
        sub_id=draw(IDS),
        choices=draw(st.lists(st.integers(0, 2), min_size=12, max_size=12)),
        restarts=draw(st.lists(st.booleans(), min_size=12, max_size=12)),
    )


class World:
    """The agents of one script, and what their tools did."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.ran: list[tuple[str, int, Any]] = []
        self.registry = AgentRegistry({"main": self._main(), "sub-agent": self._sub()})

    def _main(self) -> Agent[None, Any]:
        turns = self.script.turns

        async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            turn = sum(isinstance(m, ModelResponse) for m in messages)
            if turn < len(turns):
                return ModelResponse(
                    parts=[ToolCallPart(c.tool, {"value": c.value}, tool_call_id=c.model_id) for c in turns[turn]]
                )
            return ModelResponse(parts=[TextPart(_results(messages))])

        agent: Agent[None, Any] = Agent(FunctionModel(respond), name="main", output_type=[str, DeferredToolRequests])
        self._tools(agent)

        @agent.tool
        async def sub(ctx: RunContext[None], value: int) -> Any:
            return await delegate(ctx, "sub-agent", str(value))

        return agent

    def _sub(self) -> Agent[None, Any]:
        sub_id = self.script.sub_id

        async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            if not any(isinstance(m, ModelResponse) for m in messages):
                prompt = next(
                    p.content
                    for m in messages
                    if isinstance(m, ModelRequest)
                    for p in m.parts
                    if p.part_kind == "user-prompt"
                )
                return ModelResponse(parts=[ToolCallPart("act", {"value": int(str(prompt))}, tool_call_id=sub_id)])
            return ModelResponse(parts=[TextPart(_results(messages))])

        agent: Agent[None, Any] = Agent(
            FunctionModel(respond), name="sub-agent", output_type=[str, DeferredToolRequests]
        )
        self._tools(agent)
        return agent

    def _tools(self, agent: Agent[None, Any]) -> None:
        @agent.tool_plain
        async def plain(value: int) -> str:
            self.ran.append(("plain", value, None))
            return f"plain {value}"

        @agent.tool_plain(requires_approval=True)
        async def act(value: int) -> str:
            self.ran.append(("act", value, None))
            return f"act {value}"

        @agent.tool
        async def ask(ctx: RunContext[None], value: int) -> str:
            answer = suspend(ctx, {"value": value})
            self.ran.append(("ask", value, answer))
            return f"ask {value}={answer}"


def _results(messages: list[ModelMessage]) -> str:
    returns = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]
    return " | ".join(str(p.content) for p in returns)


Opener = Callable[[], Awaitable[SnapshotStore]]


async def _play(script: Script, open_store: Opener) -> None:
    world = World(script)
    store = await open_store()
    manager = RunManager(store, world.registry, instance_id="property")
    expected: list[tuple[str, int, Any]] = []
    outcome = await manager.start_run("main", "go")
    steps = 0
    while outcome.status == "suspended":
        assert outcome.run is not None
        run = outcome.run
        calls = [c for c in run["toolCalls"] if c["decision"] is None]
        assert len({c["toolCallId"] for c in run["toolCalls"]}) == len(run["toolCalls"])
        call = calls[0]
        assert call.get("modelToolCallId"), call
        value = int((call["args"] or call["suspendPayload"])["value"])
        choice = script.choices[steps % len(script.choices)]
        if script.restarts[steps % len(script.restarts)]:
            await store.close()
            store = await open_store()
            manager = RunManager(store, world.registry, instance_id="property")
        steps += 1
        if not call["requiresApproval"]:
            expected.append(("ask", value, f"answer {value}"))
            outcome = await manager.resume("main", run["_id"], call["toolCallId"], f"answer {value}")
        elif choice == 2:
            outcome = await manager.decline("main", run["_id"], call["toolCallId"], reason="no")
        elif choice == 1:
            expected.append(("act", value + 500, None))
            outcome = await manager.approve("main", run["_id"], call["toolCallId"], edited_args={"value": value + 500})
        else:
            expected.append(("act", value, None))
            outcome = await manager.approve("main", run["_id"], call["toolCallId"])
    assert outcome.status == "completed", outcome
    plain = [("plain", c.value, None) for turn in script.turns for c in turn if c.tool == "plain"]
    assert sorted(world.ran, key=repr) == sorted(plain + expected, key=repr), (world.ran, plain + expected)
    for tool, value, answer in plain + expected:
        said = f"{tool} {value}" + (f"={answer}" if tool == "ask" else "")
        assert said in str(outcome.output), (said, outcome.output)
    await store.close()


SETTINGS = {"memory": 500, "sqlite": 500, "mongo": 100}


@pytest.mark.parametrize("kind", ["memory", "sqlite", pytest.param("mongo", marks=pytest.mark.mongo)])
def test_each_tool_runs_with_its_own_calls_arguments_and_answers(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    loop = asyncio.new_event_loop()
    mongodb = request.getfixturevalue("mongodb_server") if kind == "mongo" else None
    memory = MemorySnapshotStore()

    @settings(
        max_examples=SETTINGS[kind],
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(script=scripts())
    def example(script: Script) -> None:
        name = uuid.uuid4().hex[:12]

        async def open_store() -> SnapshotStore:
            store: SnapshotStore
            if kind == "memory":
                store = memory  # a restart keeps the memory store: a new manager on it
            elif kind == "sqlite":
                store = SQLiteSnapshotStore(tmp_path / f"{name}.db")
            else:
                assert mongodb is not None
                store = mongo_store(with_database(mongodb, f"rg_{name}"))
            await store.open()
            return store

        loop.run_until_complete(_play(script, open_store))

    try:
        example()
    finally:
        loop.close()
