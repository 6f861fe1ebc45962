"""``support-supervisor``: delegates refunds to ``refund-agent`` (docs/writing-agents.md "Supervisors").

Its tool ``ask_refund_agent`` calls ``delegate()``: the refund agent's approval shows up on
the supervisor's own run (tool ``issue_refund`` with its args), while the refund agent's inner
run is listed only under ``refund-agent``. Approving the supervisor's call completes both.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.tools import DeferredToolRequests

from ..running.delegation import delegate
from ._script import latest_prompt, latest_returns, scripted_model

REFUND_AGENT_ID = "refund-agent"


async def _supervisor_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    for ret in latest_returns(messages):
        if ret.tool_name == "ask_refund_agent":
            return ModelResponse(parts=[TextPart(f"The refund team says: {ret.content}")])
    prompt = latest_prompt(messages)
    if "refund" in prompt.lower() or "order" in prompt.lower():
        return ModelResponse(parts=[ToolCallPart("ask_refund_agent", {"request": prompt})])
    return ModelResponse(parts=[TextPart("I handle refunds. Which order would you like refunded?")])


support_supervisor = Agent(
    scripted_model(_supervisor_script, model_name="runsgate-demo-supervisor"),
    name="support-supervisor",
    deps_type=type(None),
    description="Customer support supervisor; hands refund requests to refund-agent.",
    instructions=("You are a support supervisor. Pass refund requests to ask_refund_agent and relay its answer."),
    output_type=[str, DeferredToolRequests],
)


@support_supervisor.tool
async def ask_refund_agent(ctx: RunContext[None], request: str) -> Any:
    """Hand a refund request to the refund agent and return its answer."""
    return await delegate(ctx, REFUND_AGENT_ID, request)
