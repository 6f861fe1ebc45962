"""The ``"runsgate"`` section of pydantic-ai deferred-tool metadata.

Two directions share one key:

- tool -> runtime: ``CallDeferred(metadata={"runsgate": {...}})`` carries ``suspendPayload`` and
  ``resumeSchema`` (``suspend()``), or ``delegated`` plus the sub-run's call to display
  (``delegate()``). It reaches the runtime as ``DeferredToolRequests.metadata[tool_call_id]``.
- runtime -> tool: ``DeferredToolResults.metadata[tool_call_id] = {"runsgate": {...}}`` carries
  the recorded ``decision`` (and ``reason``, ``resumeData``, ``decidedBy``); the re-called tool
  reads it as ``RunContext.tool_call_metadata``.
"""

from __future__ import annotations

from typing import Any, cast

KEY = "runsgate"


def section(metadata: Any) -> dict[str, Any] | None:
    """``metadata["runsgate"]`` when ``metadata`` is a dict holding a dict there, else ``None``."""
    if isinstance(metadata, dict):
        inner = cast(dict[str, Any], metadata).get(KEY)
        if isinstance(inner, dict):
            return cast(dict[str, Any], inner)
    return None


def wrap(values: dict[str, Any]) -> dict[str, Any]:
    """``{"runsgate": values}``."""
    return {KEY: values}
