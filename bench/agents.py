"""Agents of the benchmarks (``RUNSGATE_AGENTS=bench.agents:AGENTS``): the demo ``refund-agent``
with a scripted model that takes ``BENCH_MODEL_LATENCY`` seconds (default 0) to answer each
request, as a hosted model's round trip does; ``refund-agent-streamed``, the same script streamed
with ``BENCH_TIME_TO_FIRST_TOKEN`` (0.2) seconds to its first token and ``BENCH_TIME_PER_TOKEN``
(0.02) per token after it (``bench.run_updates``). Their tools are the demo's own."""

from __future__ import annotations

import asyncio
import os

from pydantic_ai import Agent, Tool
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests

from runtime.demo import refund
from runtime.demo._script import scripted_model

LATENCY = float(os.environ.get("BENCH_MODEL_LATENCY", "0"))
"""Seconds each model request waits before the demo's scripted answer."""
TIME_TO_FIRST_TOKEN = float(os.environ.get("BENCH_TIME_TO_FIRST_TOKEN", "0.2"))
TIME_PER_TOKEN = float(os.environ.get("BENCH_TIME_PER_TOKEN", "0.02"))


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
    ),
    "refund-agent-streamed": Agent(
        scripted_model(
            refund._refund_script,
            model_name="bench-refund-streamed",
            time_to_first_token=TIME_TO_FIRST_TOKEN,
            time_per_token=TIME_PER_TOKEN,
        ),
        name="refund-agent-streamed",
        deps_type=type(None),
        output_type=[str, DeferredToolRequests],
        tools=[Tool(refund.lookup_order), Tool(refund.issue_refund, requires_approval=True)],
    ),
}
"""Agent id -> agent."""
