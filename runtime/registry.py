"""The agent registry: agent id -> pydantic-ai agent (docs/writing-agents.md "Registering agents")."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from pydantic_ai.agent import AbstractAgent
from pydantic_ai.toolsets import AbstractToolset, CombinedToolset, FunctionToolset

from .errors import AgentNotFoundError

AnyAgent = AbstractAgent[Any, Any]
"""Any pydantic-ai agent (``Agent`` or a wrapper), whatever its deps and output types."""


class AgentRegistry(Mapping[str, AnyAgent]):
    """Immutable mapping of agent id to agent.

    Args:
        agents: Agent id -> agent. Copied; later changes to it are not seen.

    Raises:
        ValueError: An id is not a non-empty string, or a value is not a pydantic-ai agent.
    """

    def __init__(self, agents: Mapping[str, AnyAgent]) -> None:
        for agent_id, agent in agents.items():
            if not isinstance(agent_id, str) or not agent_id:
                raise ValueError(f"agent ids must be non-empty strings, got {agent_id!r}")
            if not isinstance(agent, AbstractAgent):
                raise ValueError(f"agent {agent_id!r} is not a pydantic-ai Agent: {agent!r}")
        self._agents: Mapping[str, AnyAgent] = MappingProxyType(dict(agents))
        self._tool_schemas: dict[str, dict[str, dict[str, Any]] | None] | None = None

    @classmethod
    def from_agents(cls, agents: Iterable[AnyAgent]) -> AgentRegistry:
        """A registry of ``agents`` keyed by their ``name``.

        Raises:
            ValueError: An agent has no name, is not an agent, or two agents share a name.
        """
        by_id: dict[str, AnyAgent] = {}
        for agent in agents:
            if not isinstance(agent, AbstractAgent):
                raise ValueError(f"not a pydantic-ai Agent: {agent!r}")
            if not agent.name:
                raise ValueError(f"agent {agent!r} has no name; give it name=... (its id)")
            if agent.name in by_id:
                raise ValueError(f"two agents are named {agent.name!r}; agent ids must be unique")
            by_id[agent.name] = agent
        return cls(by_id)

    def __getitem__(self, agent_id: str) -> AnyAgent:
        return self._agents[agent_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._agents)

    def __len__(self) -> int:
        return len(self._agents)

    def get_agent(self, agent_id: str) -> AnyAgent:
        """The agent registered as ``agent_id``.

        Raises:
            AgentNotFoundError: No such agent.
        """
        try:
            return self._agents[agent_id]
        except KeyError:
            raise AgentNotFoundError(agent_id, self.ids()) from None

    def tool_schemas(self) -> Mapping[str, Mapping[str, dict[str, Any]] | None]:
        """Agent id -> tool name -> the tool's parameters JSON Schema (pydantic-ai's
        ``parameters_json_schema``), ``None`` for an agent whose tools are known only while it
        runs (``tool_schemas``); computed on the first call, then kept (the
        registry is immutable). Do not change the returned schemas."""
        if self._tool_schemas is None:
            self._tool_schemas = tool_schemas(self)
        return self._tool_schemas

    def ids(self) -> list[str]:
        """Registered agent ids, sorted."""
        return sorted(self._agents)

    def name(self, agent_id: str) -> str | None:
        """The agent's ``name``, if it has one.

        Raises:
            AgentNotFoundError: No such agent.
        """
        return self.get_agent(agent_id).name

    def description(self, agent_id: str) -> str | None:
        """The agent's ``description``, if it has one.

        Raises:
            AgentNotFoundError: No such agent.
        """
        description = getattr(self.get_agent(agent_id), "description", None)
        return description if isinstance(description, str) else None


def load_registry(import_path: str) -> AgentRegistry:
    """Load the agents named by ``package.module:attribute`` (config ``RUNSGATE_AGENTS``).

    The attribute (dots allowed: ``module:obj.attr``) is a mapping of agent id -> agent, or
    an iterable of agents whose ``name`` is their id.

    Raises:
        ValueError: The path is malformed, the module does not exist or its import raises (e.g.
            pydantic-ai's ``ImportError`` naming the package to install for a model's provider),
            the attribute is missing or of the wrong shape, it holds no agent, an agent has no name,
            or ids repeat; the message names ``import_path`` and is one line.
    """
    module_name, sep, attribute = import_path.partition(":")
    if not sep or not module_name or not attribute or ":" in attribute:
        raise ValueError(f"agent registry path {import_path!r} must look like 'package.module:attribute'")
    try:
        target: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise ValueError(f"agent registry path {import_path!r}: cannot import {module_name!r}: {exc}") from exc
        raise _import_failed(import_path, module_name, exc) from exc
    except Exception as exc:  # the module's own code failed (an agent of a provider not installed, ...)
        raise _import_failed(import_path, module_name, exc) from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ValueError(
                f"agent registry path {import_path!r}: {module_name!r} has no attribute {attribute!r}"
            ) from None
    try:
        if isinstance(target, Mapping):
            registry = AgentRegistry(target)
        elif isinstance(target, AbstractAgent | str | bytes) or not isinstance(target, Iterable):
            kind = type(target).__name__
            raise ValueError(f"{attribute!r} is a {kind}, not a mapping of id -> Agent or an iterable of Agents")
        else:
            registry = AgentRegistry.from_agents(target)
    except ValueError as exc:
        raise ValueError(f"agent registry path {import_path!r}: {exc}") from exc
    if not registry:
        raise ValueError(f"agent registry path {import_path!r}: names no agents")
    return registry


def default_tool_rules(import_path: str) -> list[Any] | None:
    """The default per-tool rules of the agents named by ``import_path`` (config
    ``RUNSGATE_AGENTS``): the ``TOOL_RULES`` attribute of the registry's module (a list of rules
    as in ``RUNSGATE_TOOL_RULES``, e.g. ``runtime.demo.TOOL_RULES``), or ``None`` when it has
    none. Used only while ``RUNSGATE_TOOL_RULES`` is unset.

    Raises:
        ValueError: ``TOOL_RULES`` is not a list (the registry itself loads: ``load_registry``).
    """
    module_name = import_path.partition(":")[0]
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # load_registry reports it
        raise ValueError(f"agent registry path {import_path!r}: cannot import {module_name!r}: {exc}") from exc
    rules = getattr(module, "TOOL_RULES", None)
    if rules is not None and not isinstance(rules, list):
        raise ValueError(f"{module_name}.TOOL_RULES must be a list of tool rules, not {type(rules).__name__}")
    return rules


def _import_failed(import_path: str, module_name: str, exc: Exception) -> ValueError:
    reason = " ".join(f"{type(exc).__name__}: {exc}".split())
    return ValueError(f"agent registry path {import_path!r}: importing {module_name!r} failed: {reason}")


def tool_schemas(agents: AgentRegistry) -> dict[str, dict[str, dict[str, Any]] | None]:
    """Agent id -> tool name -> the tool's parameters JSON Schema, for the tools an agent
    declares in function toolsets (``@agent.tool``, ``FunctionToolset``, also inside a
    ``CombinedToolset``); ``None`` for an agent with any other toolset (an MCP server, a
    dynamic or renaming toolset), whose tools are known only while it runs."""
    found: dict[str, dict[str, dict[str, Any]] | None] = {}
    for agent_id in agents.ids():
        toolsets = getattr(agents[agent_id], "toolsets", None)
        tools: dict[str, dict[str, Any]] | None = {}
        pending: list[AbstractToolset[Any]] = list(toolsets) if toolsets is not None else []
        if toolsets is None:
            tools = None
        while pending and tools is not None:
            toolset = pending.pop()
            if isinstance(toolset, FunctionToolset):
                for name, tool in toolset.tools.items():
                    tools[name] = tool.tool_def.parameters_json_schema
            elif isinstance(toolset, CombinedToolset):
                pending.extend(toolset.toolsets)
            else:
                tools = None
        found[agent_id] = tools
    return found


__all__ = ["AgentRegistry", "AnyAgent", "default_tool_rules", "load_registry", "tool_schemas"]
