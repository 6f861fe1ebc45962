"""Demo agents that run offline with scripted ``FunctionModel``s (docs/writing-agents.md "Demo agents").

``RUNSGATE_AGENTS=runtime.demo:AGENTS``. Their tools are real functions, so setting
``RUNSGATE_MODEL`` swaps the scripted model for a real one.
"""

from pydantic_ai import Agent

from .refund import LEDGER, ORDERS, refund_agent
from .supervisor import support_supervisor
from .weather import CITY_QUESTION, City, forecast, weather_agent

AGENTS: dict[str, Agent[None, object]] = {
    "refund-agent": refund_agent,
    "weather-agent": weather_agent,
    "support-supervisor": support_supervisor,
}
"""Agent id -> demo agent."""

TOOL_RULES: list[dict[str, object]] = [
    {"tool": "issue_refund", "agentId": "refund-agent", "expiresAfter": 86400},
]
"""Per-tool rules of the demo agents, in ``RUNSGATE_TOOL_RULES``'s JSON shape
(docs/configuration.md "Tool rules"): a pending refund expires after 24 hours (declined)."""

__all__ = [
    "AGENTS",
    "CITY_QUESTION",
    "LEDGER",
    "ORDERS",
    "TOOL_RULES",
    "City",
    "forecast",
    "refund_agent",
    "support_supervisor",
    "weather_agent",
]
