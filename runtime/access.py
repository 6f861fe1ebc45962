"""Who may do what: principals, scopes, the run-visibility rule and per-tool approval rules.

Plain data, no HTTP or GraphQL: ``server/`` turns credentials into a ``Principal``;
``resolvers/`` apply the scopes and the visibility rule; a subscription can reuse
``can_see_run`` to decide whether an event of a run may reach a subscriber.

Scopes (SECURITY.md):
- ``runs:read``: list and read suspended runs and their audit trail;
- ``runs:decide``: approve, decline, resume and retry runs;
- ``runs:start``: start runs.

A principal may be limited to some ``resourceId``s: it then sees and decides only runs of
those resources, and every other run is reported exactly as a run that does not exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

READ = "runs:read"
DECIDE = "runs:decide"
START = "runs:start"
ALL_SCOPES = frozenset({READ, DECIDE, START})
"""Every scope runsgate itself checks (a per-tool rule may name more, e.g. ``refunds:approve``)."""


@dataclass(frozen=True, kw_only=True)
class Principal:
    """The caller of one request.

    Attributes:
        name: Recorded as ``decidedBy`` and in the audit log (API key name, or JWT ``sub``).
        scopes: Granted scopes.
        resources: The ``resourceId``s whose runs it may see and decide; ``None`` for every
            run (also runs without a ``resourceId``). An empty set sees no run.
    """

    name: str
    scopes: frozenset[str]
    resources: frozenset[str] | None = None

    def has_scope(self, scope: str) -> bool:
        """Whether ``scope`` was granted."""
        return scope in self.scopes

    def may_use_resource(self, resource_id: str | None) -> bool:
        """Whether runs of ``resource_id`` are within this principal's resources."""
        return self.resources is None or (resource_id is not None and resource_id in self.resources)


ANONYMOUS = Principal(name="anonymous", scopes=ALL_SCOPES, resources=None)
"""The principal of every request when authentication is off (loopback only)."""

UNAUTHENTICATED = Principal(name="unauthenticated", scopes=frozenset(), resources=frozenset())
"""A WebSocket before its ``connection_init`` was accepted: no scope, no run."""


def can_see_run(principal: Principal, resource_id: str | None) -> bool:
    """The visibility rule: may ``principal`` see (and so be told about) a run of ``resource_id``?

    True when it holds ``runs:read`` and the run's resource is one of its resources. Every
    read path applies this rule (lists and counts through the store query, single lookups,
    ``node``, ``_entities`` and events after loading); a run it hides is reported as missing.
    """
    return principal.has_scope(READ) and principal.may_use_resource(resource_id)


@dataclass(frozen=True, kw_only=True)
class ToolApprovalRule:
    """Approving ``tool`` needs ``scope`` too, optionally only when an argument is above a limit.

    Attributes:
        tool: The tool name (``toolName`` of the call).
        scope: The extra scope required, e.g. ``refunds:approve``.
        argument: Name of a top-level argument of the call; with ``above``, the rule applies
            only when that argument is a number greater than ``above``, or is not a number
            (an unexpected value never skips the rule).
        above: The limit for ``argument``.
    """

    tool: str
    scope: str
    argument: str | None = None
    above: float | None = None

    def applies(self, tool_name: str | None, args: Any) -> bool:
        """Whether approving a call of ``tool_name`` with ``args`` falls under this rule."""
        if tool_name != self.tool:
            return False
        if self.argument is None or self.above is None:
            return True
        value = args.get(self.argument) if isinstance(args, Mapping) else None
        if value is None:
            return False
        if isinstance(value, bool) or not isinstance(value, int | float):
            return True
        return value > self.above


def missing_approval_scope(
    principal: Principal, rules: Iterable[ToolApprovalRule], tool_name: str | None, args: Any
) -> str | None:
    """The first scope a matching rule requires that ``principal`` lacks, or ``None``."""
    for rule in rules:
        if rule.applies(tool_name, args) and not principal.has_scope(rule.scope):
            return rule.scope
    return None


__all__ = [
    "ALL_SCOPES",
    "ANONYMOUS",
    "DECIDE",
    "READ",
    "START",
    "UNAUTHENTICATED",
    "Principal",
    "ToolApprovalRule",
    "can_see_run",
    "missing_approval_scope",
]
