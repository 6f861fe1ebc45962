"""The chaos workload's agents (``RUNSGATE_AGENTS=chaos.agents:AGENTS``), scripted, offline.

- ``chaos-approve``: the prompt is ``"<calls> <delay>"``; in one model turn the model asks for
  ``<calls>`` parallel calls of ``act``, each needing approval; ``act`` sleeps ``delay`` seconds.
- ``chaos-ask``: one call of ``ask_twice``, a tool that calls ``suspend()`` twice (an integer,
  then ``"a"`` or ``"b"``) and acts after its last question.
- ``chaos-supervisor``: one call of ``delegate_act``, which hands ``"1 <delay>"`` to
  ``chaos-approve`` with ``runtime.delegate`` (the sub-run's approval is decided through the
  supervisor's run).

Every tool appends one JSON line per execution to the file named by ``CHAOS_LEDGER`` (written
with ``O_APPEND`` and fsync'ed, outside runsgate): ``{"runId", "toolCallId", "agent", "tool",
"pid", "at", "detail"}``. The checker counts these lines per ``(runId, toolCallId)``.

``CHAOS_BREAK_CLAIM=1`` (the checker's own test only) breaks the claim's compare-and-set in
this process: every ``claim`` first waits 0.2 s, then ignores whether another instance's claim
has expired, so two instances can continue one run at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests

from runtime import delegate, suspend
from runtime.demo._script import latest_prompt, latest_returns
from runtime.running.scope import current_scope
from storage.protocol import ClaimWrite, DecisionWrite

LEDGER_ENV = "CHAOS_LEDGER"
BREAK_CLAIM_ENV = "CHAOS_BREAK_CLAIM"
APPROVE, ASK, SUPERVISOR = "chaos-approve", "chaos-ask", "chaos-supervisor"


def record_effect(agent: str, tool: str, tool_call_id: str | None, detail: Any) -> None:
    """Append one fsync'ed JSON line for this execution of ``tool`` to the ledger."""
    line = {
        "runId": current_scope().run_id,
        "toolCallId": tool_call_id,
        "agent": agent,
        "tool": tool,
        "pid": os.getpid(),
        "at": time.time(),
        "detail": detail,
    }
    fd = os.open(os.environ[LEDGER_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line, sort_keys=True) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _parse(prompt: str) -> tuple[int, float]:
    calls, delay = [*prompt.split(), "1", "0"][:2]
    return int(calls), float(delay)


def _approve_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [r for r in latest_returns(messages) if r.tool_name == "act"]
    if returns:
        return ModelResponse(parts=[TextPart("; ".join(f"{r.outcome}: {r.content}" for r in returns))])
    calls, delay = _parse(latest_prompt(messages))
    return ModelResponse(parts=[ToolCallPart("act", {"label": f"#{i}", "delay": delay}) for i in range(1, calls + 1)])


approve_agent = Agent(
    FunctionModel(_approve_script, model_name="chaos-approve"),
    name=APPROVE,
    deps_type=type(None),
    description="Parallel approval calls whose effect goes to the chaos ledger.",
    output_type=[str, DeferredToolRequests],
)


@approve_agent.tool(requires_approval=True)
async def act(ctx: RunContext[None], label: str, delay: float = 0.0) -> str:
    """Sleep ``delay`` seconds, then record the effect. Needs approval."""
    if delay:
        await asyncio.sleep(delay)
    record_effect(APPROVE, "act", ctx.tool_call_id, label)
    return f"did {label}"


class Count(BaseModel):
    count: int


def _ask_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [r for r in latest_returns(messages) if r.tool_name == "ask_twice"]
    if returns:
        return ModelResponse(parts=[TextPart(f"{returns[0].outcome}: {returns[0].content}")])
    return ModelResponse(parts=[ToolCallPart("ask_twice", {})])


ask_agent = Agent(
    FunctionModel(_ask_script, model_name="chaos-ask"),
    name=ASK,
    deps_type=type(None),
    description="One tool asking two questions, then recording its effect.",
    output_type=[str, DeferredToolRequests],
)


@ask_agent.tool
def ask_twice(ctx: RunContext[None]) -> str:
    """Ask for a count, then for a letter; record the effect after the last question."""
    count = suspend(ctx, {"question": "How many?"}, resume_schema=Count)
    letter = suspend(ctx, {"question": "a or b?"}, resume_schema={"enum": ["a", "b"]})
    record_effect(ASK, "ask_twice", ctx.tool_call_id, [count.count, letter])
    return f"{count.count}{letter}"


def _supervisor_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [r for r in latest_returns(messages) if r.tool_name == "delegate_act"]
    if returns:
        return ModelResponse(parts=[TextPart(f"sub-agent: {returns[0].content}")])
    _, delay = _parse(latest_prompt(messages))
    return ModelResponse(parts=[ToolCallPart("delegate_act", {"delay": delay})])


supervisor_agent = Agent(
    FunctionModel(_supervisor_script, model_name="chaos-supervisor"),
    name=SUPERVISOR,
    deps_type=type(None),
    description="Delegates one approval call to chaos-approve.",
    output_type=[str, DeferredToolRequests],
)


@supervisor_agent.tool
async def delegate_act(ctx: RunContext[None], delay: float = 0.0) -> Any:
    """Hand one approval call to ``chaos-approve`` and return its output."""
    return await delegate(ctx, APPROVE, f"1 {delay}")


AGENTS = {APPROVE: approve_agent, ASK: ask_agent, SUPERVISOR: supervisor_agent}


def _break_claims() -> None:
    """Install the broken compare-and-set on both store classes, and make every claim go through it
    (no claim with a decision), ``CHAOS_BREAK_CLAIM=1`` only."""
    from storage.mongo import MongoSnapshotStore
    from storage.sqlite import SQLiteSnapshotStore

    for cls in (SQLiteSnapshotStore, MongoSnapshotStore):
        original = cls.claim

        async def broken(self: Any, write: ClaimWrite, _o: Any = original) -> Any:
            await asyncio.sleep(0.2)
            # "now" far ahead: every claim looks expired, and the version is not compared, so the
            # compare never refuses a holder
            return await _o(self, replace(write, now=write.now + timedelta(days=1), version=None))

        cls.claim = broken  # type: ignore[method-assign]

        decide = cls.record_decision

        async def unclaimed(self: Any, write: DecisionWrite, _d: Any = decide) -> Any:
            # a last decision claims its run in the same write, which leaves the broken claim no race
            # to lose: claim separately, through the broken compare-and-set, as without that write
            return await _d(self, replace(write, claim=None))

        cls.record_decision = unclaimed  # type: ignore[method-assign]


if os.environ.get(BREAK_CLAIM_ENV) == "1":
    _break_claims()
