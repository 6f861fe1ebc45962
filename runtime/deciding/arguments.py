"""Edited tool arguments: checked by the tool's own validator (docs/api.md "approveToolCall").

An approver may replace the arguments the model gave a call (``editedArgs``). They are checked
before anything is recorded, by the validator pydantic-ai itself runs on a call's arguments
before calling the tool: the ``SchemaValidator`` of the function tool's ``function_schema``
(``pydantic_ai.tools.Tool``), found among the agent's toolsets (``AbstractToolset.apply`` visits
every leaf toolset; function tools live in ``FunctionToolset.tools``), in pydantic's strict JSON
mode with the tool's field validators: no value becomes another (``true`` is no integer), so the
tool gets what a person approved. A tool's extra ``args_validator`` function needs the run's
context; pydantic-ai runs it when the call runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset
from pydantic_core import SchemaValidator

from ..errors import InvalidToolArgumentsError, ToolArgumentProblem
from ..registry import AnyAgent


def argument_validator(agent: AnyAgent, tool_name: str) -> SchemaValidator | None:
    """The validator pydantic-ai runs on the arguments of ``agent``'s function tool ``tool_name``;
    ``None`` when the agent has no function tool of that name (a tool of an MCP server, a
    renamed or prefixed tool, a sub-agent's tool shown on a supervisor's call)."""
    found: list[SchemaValidator] = []

    def visit(toolset: AbstractToolset[Any]) -> None:
        if not found and isinstance(toolset, FunctionToolset):
            tool = toolset.tools.get(tool_name)
            if tool is not None:
                found.append(tool.function_schema.validator)

    for toolset in agent.toolsets:
        toolset.apply(visit)
    return found[0] if found else None


def validate_edited_args(agent: AnyAgent, tool_name: str, edited: Any) -> dict[str, Any]:
    """Check ``edited`` (JSON) as arguments of ``agent``'s tool ``tool_name``, strictly (pydantic's
    strict JSON mode); the arguments as the validator returns them (what the tool is called with).

    Raises:
        InvalidToolArgumentsError: ``edited`` is not an object, fails the tool's validator (one
            problem per pydantic error, with its path), or the tool has no validator runsgate
            can reach (``argument_validator``), so edits of it cannot be checked.
    """
    if not isinstance(edited, Mapping):
        raise InvalidToolArgumentsError(tool_name, [ToolArgumentProblem(path=[], message="must be an object")])
    validator = argument_validator(agent, tool_name)
    if validator is None:
        message = "runsgate cannot reach this tool's argument validator; approve it without editedArgs"
        raise InvalidToolArgumentsError(tool_name, [ToolArgumentProblem(path=[], message=message)])
    try:
        validated: dict[str, Any] = validator.validate_json(json.dumps(dict(edited)), strict=True)
    except ValidationError as exc:
        problems = [ToolArgumentProblem(path=list(error["loc"]), message=error["msg"]) for error in exc.errors()]
        raise InvalidToolArgumentsError(tool_name, problems) from None
    return validated


__all__ = ["argument_validator", "validate_edited_args"]
