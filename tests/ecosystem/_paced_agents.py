"""The demo agents with ``refund-agent``'s scripted model paced like a remote one, so that a browser
sees its answer stream (``RUNSGATE_AGENTS=tests.ecosystem._paced_agents:AGENTS``): ``TIME_TO_FIRST_TOKEN``
seconds to its first delta, ``TIME_PER_TOKEN`` seconds per word after it. Tools and rules are the demo's."""

from __future__ import annotations

from pydantic_ai import Agent, Tool
from pydantic_ai.tools import DeferredToolRequests

from runtime.demo import AGENTS as DEMO_AGENTS
from runtime.demo import TOOL_RULES, refund
from runtime.demo._script import scripted_model

TIME_TO_FIRST_TOKEN = 0.5
TIME_PER_TOKEN = 0.25

AGENTS: dict[str, Agent[None, object]] = {
    **DEMO_AGENTS,
    "refund-agent": Agent(
        scripted_model(
            refund._refund_script,
            model_name="paced-refund",
            time_to_first_token=TIME_TO_FIRST_TOKEN,
            time_per_token=TIME_PER_TOKEN,
        ),
        name="refund-agent",
        deps_type=type(None),
        output_type=[str, DeferredToolRequests],
        tools=[Tool(refund.lookup_order), Tool(refund.issue_refund, requires_approval=True)],
    ),
}
"""Agent id -> agent: the demo's, with a paced ``refund-agent``."""

__all__ = ["AGENTS", "TOOL_RULES"]
