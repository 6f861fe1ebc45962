"""Agents of the benchmarks (``RUNSGATE_AGENTS=bench.agents:AGENTS``): the demo ``refund-agent``
with a scripted model that takes ``BENCH_MODEL_LATENCY`` seconds (default 0) to answer each
request, as a hosted model's round trip does. Its tools are the demo's own."""

from __future__ import annotations

import asyncio
import os

from pydantic_ai import Agent, Tool
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests

from runtime.demo import refund

LATENCY = float(os.environ.get("BENCH_MODEL_LATENCY", "0"))
"""Seconds each model request waits before the demo's scripted answer."""


async def _slow_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    await asyncio.sleep(LATENCY)
    return await refund._refund_script(messages, info)


AGENTS: dict[str, Agent[None, object]] = {
    "refund-agent": Agent(
        FunctionModel(_slow_script, model_name="bench-refund"),
        name="refund-agent",
        deps_type=type(None),
        output_type=[str, DeferredToolRequests],
        tools=[Tool(refund.lookup_order), Tool(refund.issue_refund, requires_approval=True)],
    )
}
"""Agent id -> agent."""
