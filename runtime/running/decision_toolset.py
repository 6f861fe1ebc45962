"""What a re-run tool sees of the decisions made on its call (docs/writing-agents.md).

pydantic-ai re-runs a deferred tool call only through ``ToolApproved``, which sets
``RunContext.tool_call_approved``. runsgate re-runs calls that were resumed as well as calls
that were approved, so it installs ``DecisionToolset`` around every agent's tools, for each run
that re-runs such a call (``RunCapability``, when ``needs_decision_context``): for a call
re-run by runsgate it replaces the context's ``tool_call_approved`` with whether the call was
really approved, and gives the call a fresh copy of its ``tool_call_metadata["runsgate"]`` in
which ``suspend()`` counts its ``suspend()`` points (``asked``), so each point gets its own
answer, in order.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.tools import DeferredToolResults
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from . import metadata as _metadata
from .identity import CallIdentity


@dataclass
class DecisionToolset(WrapperToolset[Any]):
    """Wraps a run's toolset: each re-run call sees the truth about its decisions."""

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        return await self.wrapped.call_tool(name, tool_args, decided_context(ctx), tool)


def decided_context(ctx: RunContext[Any]) -> RunContext[Any]:
    """``ctx`` as the tool must see it: for a call runsgate re-runs (its metadata carries
    ``answers``), ``tool_call_approved`` is whether the call was approved, and the metadata is a
    fresh copy with ``asked = 0``; any other context is returned unchanged."""
    ours = _metadata.section(ctx.tool_call_metadata)
    if ours is None or "answers" not in ours:
        return ctx
    metadata = {**ctx.tool_call_metadata, _metadata.KEY: {**ours, "answers": list(ours["answers"]), "asked": 0}}
    return dataclasses.replace(ctx, tool_call_approved=bool(ours.get("approved")), tool_call_metadata=metadata)


@dataclass
class RunCapability(CallIdentity):
    """``CallIdentity``'s call identities and ``DecisionToolset`` around the run's toolset, in one
    capability: pydantic-ai dispatches each hook, and wraps each node's event stream, once per
    capability. A run that needs no wrapper (``needs_decision_context``) carries ``CallIdentity``."""

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        return DecisionToolset(toolset)


def needs_decision_context(results: DeferredToolResults | None) -> bool:
    """Whether a run continued with ``results`` needs ``DecisionToolset``: some call it re-runs
    has answers to replay, or must not see itself approved (a resumed or delegated call).

    A call only approved, with no answers, sees through pydantic-ai alone what the wrapper would
    show it: ``tool_call_approved`` true (``ToolApproved``) and a ``suspend()`` that asks its
    first question (without ``asked`` in its metadata, ``suspend()`` replays nothing). A run
    without ``results`` re-runs no call. Leaving the wrapper out of such runs spares a layer
    around every tool call.
    """
    if results is None:
        return False
    for metadata in results.metadata.values():
        ours = _metadata.section(metadata)
        if ours is not None and "answers" in ours and (ours["answers"] or not ours.get("approved")):
            return True
    return False


__all__ = ["DecisionToolset", "RunCapability", "decided_context", "needs_decision_context"]
