"""Small scripted agents for runtime tests (the demo agents cover Mastra's examples).

Each script reacts to the conversation (the latest tool results / prompt), never to call counts.
``SWITCHES`` lets a test break the model or a tool, or slow the model down.
"""

from __future__ import annotations

import asyncio
import base64
import os
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred
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

PAID: list[int] = []
"""Side effects of ``payment-agent``'s ``pay`` tool (amounts paid)."""

RELEASED: list[str] = []
"""Side effects of ``release-agent``'s ``release`` tool (release notes)."""

EFFECTS: list[str] = []
"""``toolCallId`` of each side effect of ``mixed-agent``'s tools, in order."""

GATED: list[int] = []
"""Side effects of ``gated-agent``'s ``gated`` tool (the values it ran with)."""


def reset() -> None:
    SWITCHES.clear()
    SWITCHES.update(model_down=False, tool_broken=False, delay=0.0, dispatcher_down=False)
    SHIPPED.clear()
    PAID.clear()
    RELEASED.clear()
    EFFECTS.clear()
    GATED.clear()


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
    """A plain ``CallDeferred``: its metadata is listed as the suspend payload; re-run after a
    resume, it reads the resume data from ``tool_call_metadata`` (a resume is not an approval)."""
    answer = (ctx.tool_call_metadata or {}).get("runsgate") or {}
    if "resumeData" in answer:
        return answer["resumeData"]
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


# -- trip-agent: one tool call asking two questions in a row --------------------------------------
class CityQ(BaseModel):
    city: str


UNITS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"units": {"enum": ["C", "F"]}},
    "required": ["units"],
}


def _tool_result_script(tool: str, request: dict[str, Any]) -> Any:
    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = [r for r in latest_returns(messages) if r.tool_name == tool]
        if done:
            return ModelResponse(parts=[TextPart(f"{tool}: {done[0].content}")])
        return ModelResponse(parts=[ToolCallPart(tool, request)])

    return script


trip_agent = Agent(
    FunctionModel(_tool_result_script("plan_trip", {})),
    name="trip-agent",
    deps_type=type(None),
    output_type=[str, DeferredToolRequests],
)


@trip_agent.tool
def plan_trip(ctx: RunContext[None]) -> dict[str, Any]:
    city = suspend(ctx, {"question": "Which city?"}, resume_schema=CityQ)
    units = suspend(ctx, {"question": "C or F?"}, resume_schema=UNITS_SCHEMA)
    return {"city": city.city, "units": units}


# -- guess-agent: re-asks until the answer is even (at most five questions) --------------------------
guess_agent = Agent(
    FunctionModel(_tool_result_script("guess_even", {})),
    name="guess-agent",
    deps_type=type(None),
    output_type=[str, DeferredToolRequests],
)


@guess_agent.tool
def guess_even(ctx: RunContext[None]) -> int:
    for attempt in range(5):
        number: int = suspend(
            ctx, {"question": "An even number?", "attempt": attempt}, resume_schema={"type": "integer"}
        )
        if number % 2 == 0:
            return number
    raise ValueError("no even number in five answers")


# -- payment-agent: asks for an amount, then needs an approval (with metadata) ------------------------
payment_agent = Agent(
    FunctionModel(_tool_result_script("pay", {"payee": "ACME"})),
    name="payment-agent",
    deps_type=type(None),
    output_type=[str, DeferredToolRequests],
)


@payment_agent.tool
def pay(ctx: RunContext[None], payee: str) -> str:
    amount = suspend(ctx, {"question": f"How much to pay {payee}?"}, resume_schema={"type": "integer"})
    if not ctx.tool_call_approved:
        raise ApprovalRequired(metadata={"payee": payee, "amount": amount, "risk": "high"})
    PAID.append(amount)
    return f"paid {amount} to {payee}"


# -- release-agent: needs an approval first, then asks for release notes ------------------------------
release_agent = Agent(
    FunctionModel(_tool_result_script("release", {"version": "1.2"})),
    name="release-agent",
    deps_type=type(None),
    output_type=[str, DeferredToolRequests],
)


@release_agent.tool(requires_approval=True)
def release(ctx: RunContext[None], version: str) -> str:
    notes = suspend(ctx, {"question": f"Release notes for {version}?"}, resume_schema={"type": "string"})
    RELEASED.append(f"{version}{' (approved)' if ctx.tool_call_approved else ''}: {notes}")
    return f"released {version}"


# -- mixed-agent: two calls in one turn mixing questions and approvals (the state machine's agent) ----
def _mixed_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = latest_returns(messages)
    if returns:
        if SWITCHES["model_down"]:
            raise RuntimeError("model is down")
        return ModelResponse(parts=[TextPart("; ".join(f"{r.tool_name}: {r.content}" for r in returns))])
    return ModelResponse(parts=[ToolCallPart("transfer", {"to": "ACME"}), ToolCallPart("publish_post", {"post": "p1"})])


mixed_agent = Agent(
    FunctionModel(_mixed_script),
    name="mixed-agent",
    deps_type=type(None),
    output_type=[str, DeferredToolRequests],
)


@mixed_agent.tool
def transfer(ctx: RunContext[None], to: str) -> str:
    """Two questions, then an approval, then the side effect."""
    amount = suspend(ctx, {"question": "amount?"}, resume_schema={"type": "integer"})
    note = suspend(ctx, {"question": "note?"}, resume_schema={"type": "string"})
    if not ctx.tool_call_approved:
        raise ApprovalRequired(metadata={"to": to, "amount": amount})
    EFFECTS.append(str(ctx.tool_call_id))
    return f"sent {amount} to {to} ({note})"


@mixed_agent.tool(requires_approval=True)
def publish_post(ctx: RunContext[None], post: str) -> str:
    """An approval, then a question, then the side effect."""
    title = suspend(ctx, {"question": "title?"}, resume_schema={"type": "string"})
    EFFECTS.append(str(ctx.tool_call_id))
    return f"published {post} as {title}"


# -- gated-agent: an approval each turn; a declined call is asked for again, once ------------------------
def _gated_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [r for r in latest_returns(messages) if r.tool_name == "gated"]
    if not returns:
        return ModelResponse(parts=[ToolCallPart("gated", {"value": 1})])
    if "declined" in str(returns[0].content) and not any(
        isinstance(p, ToolCallPart) and p.args_as_dict() == {"value": 2}
        for m in messages
        if isinstance(m, ModelResponse)
        for p in m.parts
    ):
        return ModelResponse(parts=[ToolCallPart("gated", {"value": 2})])
    return ModelResponse(parts=[TextPart(f"gated: {returns[0].content}")])


gated_agent = Agent(
    FunctionModel(_gated_script),
    name="gated-agent",
    deps_type=type(None),
    output_type=[str, DeferredToolRequests],
)


@gated_agent.tool_plain(requires_approval=True)
def gated(value: int) -> str:
    """Needs an approval each time the model calls it."""
    GATED.append(value)
    return f"ran with {value}"


TEST_AGENTS: dict[str, Agent[None, Any]] = {
    "gated-agent": gated_agent,
    "mixed-agent": mixed_agent,
    "trip-agent": trip_agent,
    "guess-agent": guess_agent,
    "payment-agent": payment_agent,
    "release-agent": release_agent,
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

from runtime.demo import AGENTS as _DEMO_AGENTS  # noqa: E402

WITH_DEMO_AGENTS: dict[str, Any] = {**_DEMO_AGENTS, **TEST_AGENTS}
"""The demo agents and the test agents together (edit-then-approve and bulk tests over HTTP)."""
