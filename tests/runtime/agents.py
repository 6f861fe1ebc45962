"""Small scripted agents for runtime tests (the demo agents cover Mastra's examples).

Each script reacts to the conversation (the latest tool results / prompt), never to call counts.
``SWITCHES`` lets a test break the model or a tool, or slow the model down.
"""

from __future__ import annotations

import asyncio
import base64
import os
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import CallDeferred
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.tools import DeferredToolRequests

from runtime import delegate, suspend
from runtime.demo._script import latest_prompt, latest_returns

SWITCHES: dict[str, Any] = {}
"""``model_down``, ``tool_broken``: raise; ``delay``: seconds the slow agent's model waits."""

SHIPPED: list[str] = []
"""Side effects of ``flaky-agent``'s ``ship`` tool."""


def reset() -> None:
    SWITCHES.clear()
    SWITCHES.update(model_down=False, tool_broken=False, delay=0.0, dispatcher_down=False)
    SHIPPED.clear()


reset()


# -- flaky-agent: plain output type (no DeferredToolRequests), an approval, a model that can fail ------
def _flaky_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    shipped = [r for r in latest_returns(messages) if r.tool_name == "ship"]
    if shipped:
        if SWITCHES["model_down"]:
            raise RuntimeError("model is down")
        return ModelResponse(parts=[TextPart(f"done: {shipped[0].content}")])
    return ModelResponse(parts=[ToolCallPart("ship", {"item": "book"})])


flaky_agent = Agent(FunctionModel(_flaky_script), name="flaky-agent", deps_type=type(None))


@flaky_agent.tool_plain(requires_approval=True)
def ship(item: str) -> str:
    if SWITCHES["tool_broken"]:
        raise ValueError("warehouse unreachable")
    SHIPPED.append(item)
    return f"shipped {item}"


# -- survey-agent: three calls waiting for data in one turn -------------------------------------
COLOR_SCHEMA: dict[str, Any] = {"type": "string", "enum": ["red", "blue"]}


def _survey_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = latest_returns(messages)
    if returns:
        return ModelResponse(parts=[TextPart("; ".join(f"{r.tool_name}={r.content}" for r in returns))])
    return ModelResponse(
        parts=[
            ToolCallPart("ask_color", {}),
            ToolCallPart("ask_size", {}),
            ToolCallPart("fetch_report", {"report": "q3"}),
        ]
    )


survey_agent = Agent(
    FunctionModel(_survey_script),
    name="survey-agent",
    deps_type=type(None),
    output_type=[str, DeferredToolRequests],
)


@survey_agent.tool
def ask_color(ctx: RunContext[None]) -> str:
    color: str = suspend(ctx, {"question": "Which color?"}, resume_schema=COLOR_SCHEMA)
    return color


@survey_agent.tool
def ask_size(ctx: RunContext[None]) -> Any:
    return suspend(ctx, {"question": "Which size?"})


@survey_agent.tool
def fetch_report(ctx: RunContext[None], report: str) -> Any:
    """A plain ``CallDeferred``: its metadata is listed as the suspend payload."""
    if ctx.tool_call_approved:
        return ctx.tool_call_metadata["runsgate"]["resumeData"]
    raise CallDeferred(metadata={"report": report, "queue": "reports"})


# -- slow-agent: a model that takes time -----------------------------------------------------------
async def _slow_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    deployed = [r for r in latest_returns(messages) if r.tool_name == "deploy"]
    if not deployed and "deploy" in latest_prompt(messages):
        return ModelResponse(parts=[ToolCallPart("deploy", {"env": "prod"})])
    await asyncio.sleep(SWITCHES["delay"])
    return ModelResponse(parts=[TextPart(f"slow answer to {latest_prompt(messages)!r}")])


slow_agent = Agent(FunctionModel(_slow_script), name="slow-agent", deps_type=type(None))


@slow_agent.tool_plain(requires_approval=True)
def deploy(env: str) -> str:
    return f"deployed to {env}"


# -- dispatcher: a supervisor for any sub-agent; prompt "<agent id>: <request>" ------------------------
def _dispatcher_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    relayed = [r for r in latest_returns(messages) if r.tool_name == "ask"]
    if relayed:
        if SWITCHES["dispatcher_down"]:
            raise RuntimeError("dispatcher model is down")
        return ModelResponse(parts=[TextPart(f"relayed: {relayed[0].content}")])
    agent_id, _, request = latest_prompt(messages).partition(": ")
    return ModelResponse(parts=[ToolCallPart("ask", {"agent_id": agent_id, "request": request})])


dispatcher = Agent(
    FunctionModel(_dispatcher_script),
    name="dispatcher",
    deps_type=type(None),
    output_type=[str, DeferredToolRequests],
)


@dispatcher.tool
async def ask(ctx: RunContext[None], agent_id: str, request: str) -> Any:
    return await delegate(ctx, agent_id, request)


# -- bulky-agent: a 20 MB tool result before the approval (histories over MongoDB's 16 MB) ---------
REPORT_BYTES = 20 * 1024 * 1024
"""Length of ``download_report``'s text: random base64, so it stays over 8 MB compressed (GridFS)."""


def _bulky_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = {r.tool_name: r for r in latest_returns(messages)}
    if "publish" in returns:
        return ModelResponse(parts=[TextPart(f"published: {returns['publish'].content}")])
    if "download_report" in returns:
        report = str(returns["download_report"].content)
        return ModelResponse(parts=[ToolCallPart("publish", {"chars": len(report), "tail": report[-8:]})])
    return ModelResponse(parts=[ToolCallPart("download_report", {})])


bulky_agent = Agent(FunctionModel(_bulky_script), name="bulky-agent", deps_type=type(None))


@bulky_agent.tool_plain
def download_report() -> str:
    return base64.b64encode(os.urandom(REPORT_BYTES * 3 // 4)).decode("ascii")


@bulky_agent.tool_plain(requires_approval=True)
def publish(chars: int, tail: str) -> str:
    return f"{chars} chars ending {tail}"


TEST_AGENTS: dict[str, Agent[None, Any]] = {
    "bulky-agent": bulky_agent,
    "flaky-agent": flaky_agent,
    "survey-agent": survey_agent,
    "slow-agent": slow_agent,
    "dispatcher": dispatcher,
}

# -- registry-loading fixtures (attributes named by import paths in test_agent_registry) ------------
LISTED = [Agent(TestModel(), name="alpha"), Agent(TestModel(), name="beta", description="Second.")]
UNNAMED = [Agent(TestModel(), name="gamma"), Agent(TestModel())]
DUPLICATES = [Agent(TestModel(), name="delta"), Agent(TestModel(), name="delta")]
NOT_AGENTS = {"x": "not an agent"}
NOT_A_COLLECTION = 42
