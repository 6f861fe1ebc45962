"""Approval policies: automatic approval and two-person approval (docs/configuration.md "Tool rules").

Both come from the per-tool rules (``runtime.access.ToolApprovalRule``, config
``RUNSGATE_TOOL_RULES``) and act when a run suspends (``apply_rules``), on every approval call
the model made:

- ``approvalsRequired``: the largest ``approvals`` of the rules that apply to the call (fail
  closed: a rule whose ``above`` cannot be evaluated applies), 1 without; stored on the call
  when above 1. Also on a supervisor's call that stands for a sub-agent's (``delegated``): the
  approvals are collected there, and the decision they make is forwarded to the sub-run.
- automatic approval: the first rule that ``approves`` the call (its argument provably at most
  ``atMost``, or ``autoApprove: "always"``) decides it at once, ``decidedBy``
  ``policy:<name>``, unless a restricting effect (a ``scope``, or ``approvals`` above 1) of any
  rule applies to the call: a person must then decide. Never on a ``delegated`` call: the
  sub-agent's own run applied the policy already, and shows the supervisor only what waits.

``tool_rule_problems`` checks the rules against the registered agents' tools at start.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from storage import DecisionDocument, ToolCallDocument

from .access import ToolApprovalRule
from .registry import AgentRegistry, tool_schemas

POLICY_PREFIX = "policy:"
"""``decidedBy`` of an automatic approval: ``policy:<rule name>``."""


def approvals_required(rules: Iterable[ToolApprovalRule], tool_name: str | None, args: Any) -> int:
    """Distinct principals needed to approve a call of ``tool_name`` with ``args`` (at least 1)."""
    return max((rule.approvals for rule in rules if rule.applies(tool_name, args)), default=1)


def auto_approving_rule(rules: Sequence[ToolApprovalRule], tool_name: str | None, args: Any) -> ToolApprovalRule | None:
    """The rule that approves a call of ``tool_name`` with ``args`` automatically, or ``None``
    (none approves it, or a restricting effect of some rule applies to it)."""
    restricted = any(rule.applies(tool_name, args) and (rule.scope is not None or rule.approvals > 1) for rule in rules)
    if restricted:
        return None
    return next((rule for rule in rules if rule.approves(tool_name, args)), None)


@dataclass(frozen=True)
class PolicyDecision:
    """A call ``apply_rules`` decided: its position in the calls and the rule that approved it."""

    index: int
    rule: ToolApprovalRule

    @property
    def decided_by(self) -> str:
        """``policy:<rule name>``."""
        return f"{POLICY_PREFIX}{self.rule.name}"


def apply_rules(
    calls: list[ToolCallDocument], rules: Sequence[ToolApprovalRule], now: datetime
) -> list[PolicyDecision]:
    """Apply the policies to the pending calls of a run that is suspending (module docstring).

    Sets ``approvalsRequired`` (when above 1) and, for the calls a rule approves, an ``approved``
    decision made at ``now`` by ``policy:<name>``, in place. Returns the decisions made, in
    call order (the caller records one ``decision`` event each, with the snapshot).
    """
    made: list[PolicyDecision] = []
    if not rules:
        return made
    for index, call in enumerate(calls):
        if not call["requiresApproval"] or call["decision"] is not None:
            continue
        required = approvals_required(rules, call["toolName"], call["args"])
        if required > 1:
            call["approvalsRequired"] = required
            continue
        if call.get("delegated"):
            continue
        rule = auto_approving_rule(rules, call["toolName"], call["args"])
        if rule is None:
            continue
        decision: DecisionDocument = {
            "kind": "approved",
            "decidedAt": now,
            "decidedBy": f"{POLICY_PREFIX}{rule.name}",
            "reason": None,
            "resumeData": None,
            "idempotencyKey": None,
        }
        call["decision"] = decision
        made.append(PolicyDecision(index, rule))
    return made


def tool_rule_problems(rules: Sequence[ToolApprovalRule], agents: AgentRegistry) -> list[str]:
    """What is wrong with ``rules`` for the registered ``agents`` (empty: nothing), one sentence
    each: a tool no agent has (or not the rule's ``agentId``'s, when it names one), or an
    ``argument`` that is not a property of the tool's parameters (nor a number there, for a
    rule with ``above`` or ``atMost``). An agent whose tools cannot be listed before it runs
    (``tool_schemas``) may have any tool: a rule naming a tool only such an agent could have is
    accepted unchecked."""
    schemas = tool_schemas(agents)
    problems: list[str] = []
    for number, rule in enumerate(rules, start=1):
        label = f"rule {number} ({rule.name or rule.tool!r})"
        agent_id = rule.agent_id
        if agent_id is not None and agent_id not in schemas:
            problems.append(f"{label} names agent {agent_id!r}, which is not registered")
            continue
        scope = {agent_id: schemas[agent_id]} if agent_id is not None else schemas
        if any(tools is None for tools in scope.values()):
            continue
        declared = [tools[rule.tool] for tools in scope.values() if tools is not None and rule.tool in tools]
        if not declared:
            where = f"agent {agent_id!r}" if agent_id is not None else "any registered agent"
            known = sorted({name for tools in scope.values() if tools is not None for name in tools})
            problems.append(f"{label} names tool {rule.tool!r}, which is not a tool of {where} (tools: {known})")
            continue
        if rule.argument is None:
            continue
        properties = [_properties(schema) for schema in declared]
        if not any(rule.argument in props for props in properties):
            names = sorted({name for props in properties for name in props})
            problems.append(
                f"{label} names argument {rule.argument!r}, which is not a parameter of tool {rule.tool!r} "
                f"(parameters: {names})"
            )
            continue
        if (rule.above is not None or rule.at_most is not None) and not any(
            _may_be_number(props.get(rule.argument)) for props in properties
        ):
            problems.append(
                f"{label} compares argument {rule.argument!r} of tool {rule.tool!r} with a number, "
                "but that parameter is never a number"
            )
    return problems


def _properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    properties = schema.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _may_be_number(schema: Any) -> bool:
    """Whether a parameter with this JSON Schema may be a number (no ``type``: it may)."""
    if not isinstance(schema, Mapping):
        return True
    if "anyOf" in schema or "oneOf" in schema:
        return any(_may_be_number(s) for s in [*schema.get("anyOf", ()), *schema.get("oneOf", ())])
    declared = schema.get("type")
    if declared is None:
        return True
    kinds = declared if isinstance(declared, list) else [declared]
    return "number" in kinds or "integer" in kinds


__all__ = [
    "POLICY_PREFIX",
    "PolicyDecision",
    "apply_rules",
    "approvals_required",
    "auto_approving_rule",
    "tool_rule_problems",
    "tool_schemas",
]
