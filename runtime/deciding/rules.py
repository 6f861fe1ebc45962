"""What the per-tool rules require of a decision, one function per rule (docs/architecture.md "Decision rules").

The rules (``ToolApprovalRule``, config ``RUNSGATE_TOOL_RULES``) that bind a call are those
covering the agent whose tool runs (``owner``): the sub-agent's for a supervisor's delegated call,
wherever it is decided. Each function takes those rules; a condition that cannot be evaluated
counts as met for a restricting effect (scope, approvals, deadline) and as unmet for a permissive
one (automatic approval, approval on expiry). ``runtime.deciding.gate`` applies them to every decision;
``tool_rule_problems`` checks them against the agents' tools at start.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from storage import ExpiryAction, ToolCallDocument

from .._json import rfc3339
from ..access import Principal, ToolApprovalRule
from ..registry import AgentRegistry, tool_schemas


def owner(agent_id: str, call: ToolCallDocument) -> str:
    """The agent whose tool ``call`` (of a run of ``agent_id``) runs: for a supervisor's delegated
    call, the sub-agent; else ``agent_id``."""
    delegated = call.get("delegatedTo")
    return delegated["agentId"] if delegated else agent_id


def owner_known(call: ToolCallDocument) -> bool:
    """Whether ``owner`` names ``call``'s owner from the call alone: all but a delegated call stored
    before schema version 3 (no ``delegatedTo``), whose owner is its sub-run's agent."""
    return not call.get("delegated") or "delegatedTo" in call


def covering(rules: Iterable[ToolApprovalRule], agent_id: str) -> tuple[ToolApprovalRule, ...]:
    """The rules that cover calls of ``agent_id``'s tools."""
    return tuple(rule for rule in rules if rule.covers_agent(agent_id))


def required_scopes(rules: Iterable[ToolApprovalRule], tool_name: str | None, args: Any) -> list[str]:
    """The scopes approving (or resuming) a call of ``tool_name`` with ``args`` needs, in rule order, once each."""
    return list(dict.fromkeys(r.scope for r in rules if r.scope is not None and r.applies(tool_name, args)))


def missing_approval_scope(
    principal: Principal, rules: Iterable[ToolApprovalRule], tool_name: str | None, args: Any
) -> str | None:
    """The first scope of ``required_scopes`` that ``principal`` lacks, or ``None``."""
    return next((s for s in required_scopes(rules, tool_name, args) if not principal.has_scope(s)), None)


def approvals_required(rules: Iterable[ToolApprovalRule], tool_name: str | None, args: Any) -> int:
    """Distinct principals needed to approve a call of ``tool_name`` with ``args`` (at least 1)."""
    return max((rule.approvals for rule in rules if rule.applies(tool_name, args)), default=1)


def restricted(rules: Sequence[ToolApprovalRule], tool_name: str | None, args: Any) -> bool:
    """Whether approving the call needs more than one decider without scopes: a scope, or several approvers.
    No automatic decision (a policy's, an expiry's) ever approves such a call."""
    return bool(required_scopes(rules, tool_name, args)) or approvals_required(rules, tool_name, args) > 1


def auto_approving_rule(rules: Sequence[ToolApprovalRule], tool_name: str | None, args: Any) -> ToolApprovalRule | None:
    """The rule that approves a call of ``tool_name`` with ``args`` automatically, or ``None`` (none
    approves it provably, or the call is ``restricted``)."""
    if restricted(rules, tool_name, args):
        return None
    return next((rule for rule in rules if rule.approves(tool_name, args)), None)


def edit_forbidden(rules: Iterable[ToolApprovalRule], tool_name: str | None, args: Any, edited: Any) -> bool:
    """Whether a rule with ``allow_edits=False`` applies to the model's ``args`` or to the ``edited`` ones."""
    return any(
        not rule.allow_edits and (rule.applies(tool_name, args) or rule.applies(tool_name, edited)) for rule in rules
    )


@dataclass(frozen=True, kw_only=True)
class Requirements:
    """What the rules ask of a decision on one call (``requirements``), read once for the gate's checks.

    Attributes:
        scopes: ``required_scopes``: the scopes approving or resuming the call needs.
        approvals: ``approvals_required``: the distinct principals needed to approve it.
        separation_of_duties: ``separation_of_duties``: its run's starter may not approve it.
        review_claim: ``review_claim_required``: a person decides it only while holding its review claim.
    """

    scopes: list[str]
    approvals: int
    separation_of_duties: bool
    review_claim: bool


def requirements(rules: Sequence[ToolApprovalRule], tool_name: str | None, args: Any) -> Requirements:
    """What ``rules`` (a sequence: read four times) ask of a decision on a call of ``tool_name``
    with ``args``, the four rules of ``Requirements`` in one call."""
    return Requirements(
        scopes=required_scopes(rules, tool_name, args),
        approvals=approvals_required(rules, tool_name, args),
        separation_of_duties=separation_of_duties(rules, tool_name, args),
        review_claim=review_claim_required(rules, tool_name, args),
    )


def separation_of_duties(rules: Iterable[ToolApprovalRule], tool_name: str | None, args: Any) -> bool:
    """Whether a rule with ``separation_of_duties`` applies to a call of ``tool_name`` with ``args``:
    its run's starter may not approve or edit it."""
    return any(rule.separation_of_duties and rule.applies(tool_name, args) for rule in rules)


def review_claim_required(rules: Iterable[ToolApprovalRule], tool_name: str | None, args: Any) -> bool:
    """Whether a rule with ``require_review_claim`` applies: a person decides the call only while
    holding its review claim."""
    return any(rule.require_review_claim and rule.applies(tool_name, args) for rule in rules)


@dataclass(frozen=True)
class Deadline:
    """The deadline a call gets when its run suspends (``deadline_for``)."""

    after: timedelta
    on_expiry: ExpiryAction


def deadline_for(rules: Sequence[ToolApprovalRule], tool_name: str | None, args: Any) -> Deadline | None:
    """The deadline of an approval call of ``tool_name`` with ``args``.

    Of the rules that apply and set ``expires_after``, the shortest wins. Its ``on_expiry``
    ``approve`` stands only when its condition provably holds and the call is not ``restricted``
    (an expiry never grants more than the rules grant one person); else the call is declined on
    expiry.
    """
    chosen: ToolApprovalRule | None = None
    for rule in rules:
        if rule.expires_after is None or not rule.applies(tool_name, args):
            continue
        if chosen is None or chosen.expires_after is None or rule.expires_after < chosen.expires_after:
            chosen = rule
    if chosen is None or chosen.expires_after is None:
        return None
    approve = (
        chosen.on_expiry == "approve"
        and chosen.provably_applies(tool_name, args)
        and not restricted(rules, tool_name, args)
    )
    return Deadline(after=timedelta(seconds=chosen.expires_after), on_expiry="approve" if approve else "decline")


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
            owners = sorted(a for a, tools in schemas.items() if tools is not None and rule.tool in tools)
            hint = (
                f"; it is a tool of {', '.join(map(repr, owners))}, whose rules apply to its calls wherever they "
                "are decided (also through a supervisor): name that agent"
                if agent_id is not None and owners
                else ""
            )
            problems.append(f"{label} names tool {rule.tool!r}, which is not a tool of {where} (tools: {known}){hint}")
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


def expiry_reason(call: ToolCallDocument, *, restricted: bool) -> str:
    """What the model reads for ``call`` declined on expiry (``restricted``: its rules kept an
    ``approve`` fallback from approving it)."""
    why = (
        " Its rules need a person with a scope or several approvers, which an expiry cannot stand in for."
        if restricted
        else ""
    )
    return (
        f"The approval request for this call expired at {rfc3339(call['expiresAt'])} without a decision, "
        f"so the tool was not run.{why}"
    )


__all__ = [
    "Deadline",
    "Requirements",
    "approvals_required",
    "auto_approving_rule",
    "covering",
    "deadline_for",
    "edit_forbidden",
    "expiry_reason",
    "missing_approval_scope",
    "owner",
    "required_scopes",
    "requirements",
    "restricted",
    "review_claim_required",
    "separation_of_duties",
    "tool_rule_problems",
]
