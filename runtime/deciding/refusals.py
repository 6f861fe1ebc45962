"""Who decides (``Decider``) and why a decider may not (``refusal``, ``repeated_approval``):
the scopes the rules require, separation of duties and an approval given already, one rule in
one place for the gate's checks, the reviewers' queue and the recipients of a question's email
(``DecisionGate.allowed``, ``DecisionGate.refusal_of``); the runs that may
hold a refused question (``refusal_candidates``, the queue's flat total); and the review claim
held on a question."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from storage import ReviewCandidates, ReviewClaimDocument, SnapshotDocument, ToolCallDocument

from ..access import Principal, ToolApprovalRule
from ..errors import DuplicateApproverError, ForbiddenError, RunsgateError
from ..reviewing.errors import SeparationOfDutiesError
from . import rules as R

DeciderKind = Literal["person", "policy", "expiry", "supervisor"]


@dataclass(frozen=True, kw_only=True)
class Decider:
    """Who makes a decision.

    Attributes:
        name: Recorded as ``decidedBy`` and as the events' ``by`` (``None``: anonymous).
        principal: An API caller, held to its resources and to the per-tool scopes; ``None`` for
            runsgate's own deciders and for trusted in-process callers (tests, the seed).
        kind: ``person`` (an API caller or in-process code), ``policy``, ``expiry``, or
            ``supervisor`` (a supervisor's recorded decision forwarded to its sub-run).
        scopes: ``supervisor`` only: the scopes the supervisor's decision was checked to hold.
        approvers: ``supervisor`` only: who approved the supervisor's call.
    """

    name: str | None
    principal: Principal | None = None
    kind: DeciderKind = "person"
    scopes: frozenset[str] = frozenset()
    approvers: tuple[str | None, ...] = ()

    def holds(self, scope: str) -> bool:
        """Whether this decider may make a decision that needs ``scope``."""
        if self.kind == "supervisor":
            return scope in self.scopes
        if self.kind == "person":
            return self.principal is None or self.principal.has_scope(scope)
        return False  # a policy or an expiry holds no scope


def refusal(
    doc: SnapshotDocument, call: ToolCallDocument, required: R.Requirements, decider: Decider, kind: str
) -> RunsgateError | None:
    """Why ``decider`` may not make a decision of ``kind`` on ``call`` of ``doc``, given what the
    rules of its owner require of it with the arguments decided on (``R.requirements``), or
    ``None``: a scope the rules require of an approval or a resume (``ForbiddenError``), or, for an
    approval, separation of duties (the run's starter, or anyone when the starter is unknown;
    trusted in-process callers and forwarded decisions, checked on the supervisor's call,
    excepted). ``runs:decide`` and the resources come first (``access.check_decider``)."""
    tool = call["toolName"]
    scopes = required.scopes if kind != "declined" else []
    missing = next((scope for scope in scopes if not decider.holds(scope)), None)
    if missing is not None:
        return ForbiddenError(f"approving {tool!r} needs the scope {missing!r}", required_scope=missing)
    person = decider.kind == "person" and decider.principal is not None
    if kind == "approved" and person and _starter_barred(doc, required.separation_of_duties, decider.name):
        return SeparationOfDutiesError(doc["_id"], call["toolCallId"], doc.get("startedBy"), "startedBy" in doc)
    return None


def _starter_barred(doc: SnapshotDocument, separation_of_duties: bool, name: str | None) -> bool:
    """Separation of duties' rule: under it, ``name`` may not approve a call of ``doc`` when it
    started the run, nor may anyone when the run records no starter."""
    return separation_of_duties and ("startedBy" not in doc or doc.get("startedBy") == name)


def _approvers(call: ToolCallDocument) -> set[str | None]:
    """Who gave one of the approvals ``call`` needs (each may not approve it again)."""
    return {approval["decidedBy"] for approval in call.get("approvals") or []}


def refusal_candidates(rules: Sequence[ToolApprovalRule], principal: Principal) -> ReviewCandidates:
    """A superset of the runs within ``principal``'s resources holding a pending question that
    ``refusal`` or ``repeated_approval`` refuses it under ``rules``: the runs where it gave an
    approval (``repeated_approval``, whatever the rules now say); with a rule of separation of
    duties, the runs it started and those that record no starter; the runs with a pending call of
    a tool whose rule names a scope it lacks. A new refusal needs its part here: the queue's total
    subtracts only the refused questions of these runs (``ReviewQueue.count``). ``runs:decide``
    needs none: the queue refuses a principal without it outright."""
    return ReviewCandidates(
        approver=principal.identity,
        starter=principal.identity if any(rule.separation_of_duties for rule in rules) else None,
        unknown_starter=any(rule.separation_of_duties for rule in rules),
        tool_names=frozenset(
            rule.tool for rule in rules if rule.scope is not None and not principal.has_scope(rule.scope)
        ),
    )


def repeated_approval(doc: SnapshotDocument, call: ToolCallDocument, name: str | None) -> RunsgateError | None:
    """``DuplicateApproverError`` when ``name`` already gave one of the approvals ``call`` of
    ``doc`` needs (it may not approve it again, so neither claim nor list it), else ``None``."""
    if name in _approvers(call):
        return DuplicateApproverError(doc["_id"], call["toolCallId"], name, call.get("approvalsRequired", 1))
    return None


def active_review_claim(call: ToolCallDocument, now: datetime) -> ReviewClaimDocument | None:
    """The review claim held on ``call``'s question at ``now`` (UTC), or ``None`` (none, or lapsed)."""
    claim = call.get("reviewClaim")
    return claim if claim is not None and claim["until"] > now else None


__all__ = [
    "Decider",
    "DeciderKind",
    "active_review_claim",
    "refusal",
    "refusal_candidates",
    "repeated_approval",
]
