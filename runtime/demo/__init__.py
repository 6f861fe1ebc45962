"""Demo agents that run offline with scripted ``FunctionModel``s (docs/writing-agents.md "Demo agents").

``RUNSGATE_AGENTS=runtime.demo:AGENTS``. Their tools are real functions, so setting
``RUNSGATE_MODEL`` swaps the scripted model for a real one. ``TOOL_RULES`` are their default
per-tool rules (``runtime.registry.default_tool_rules``).
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
    {"name": "small-refunds", "tool": "issue_refund", "argument": "amount", "atMost": 20, "autoApprove": True},
    {"name": "large-refunds", "tool": "issue_refund", "argument": "amount", "above": 500, "approvals": 2},
    {"tool": "issue_refund", "agentId": "refund-agent", "expiresAfter": 86400},
]
"""The demo agents' default per-tool rules, in force while ``RUNSGATE_TOOL_RULES`` is unset (a
value of it, even ``[]``, replaces them; docs/writing-agents.md "Demo agents"): refunds up to $20
are approved automatically, refunds over $500 need two approvers, and a pending refund expires
after 24 hours (declined)."""

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
