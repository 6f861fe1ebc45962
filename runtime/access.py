"""Who may do what: principals, scopes, the run-visibility rule and per-tool approval rules.

Plain data, no HTTP or GraphQL: ``server/`` turns credentials into a ``Principal``, ``resolvers/``
apply the visibility rule to what they read, and the runtime checks the resource rule on every
write (``check_start``; ``check_resource``, first of a decision's checks in ``runtime.deciding.gate``).
Scopes and identities (``key:<name>``, ``jwt:<sub>``, ``policy:<rule>``...): SECURITY.md "Authorization".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from storage import ExpiryAction, SnapshotDocument

from .errors import ForbiddenError, RunNotFoundError

CredentialKind = Literal["key", "jwt"]
"""The kind of credential a principal authenticated with: an API key or a JWT."""

READ = "runs:read"
DECIDE = "runs:decide"
START = "runs:start"
WEBHOOKS_READ = "webhooks:read"
ALL_SCOPES = frozenset({READ, DECIDE, START, WEBHOOKS_READ})
"""Every scope runsgate itself checks (a per-tool rule may name more, e.g. ``refunds:approve``)."""


@dataclass(frozen=True, kw_only=True)
class Principal:
    """The caller of one request.

    Attributes:
        name: The API key's name or the JWT's ``sub``; for a principal made in code
            (``credential`` ``None``), already its identity.
        scopes: Granted scopes.
        resources: The ``resourceId``s whose runs it may see and decide; ``None`` for every
            run (also runs without a ``resourceId``). An empty set sees no run.
        credential: The kind of credential it came from; ``None`` for ``ANONYMOUS`` and
            principals made in code.
        issuer: The JWT's ``iss`` when an issuer is configured (part of the identity).
        expires_at: When the credential expires (a JWT's ``exp``, UTC); ``None``: never. A
            WebSocket authenticated with it is closed (4403) at that instant.
    """

    name: str
    scopes: frozenset[str]
    resources: frozenset[str] | None = None
    credential: CredentialKind | None = None
    issuer: str | None = None
    expires_at: datetime | None = None
    identity: str = field(init=False)
    """Who this is, in the one format of every decider (module docstring): ``key:<name>``,
    ``jwt:<sub>``, ``jwt:<iss>|<sub>``, or ``name`` itself for a principal made in code."""

    def __post_init__(self) -> None:
        identity = self.name
        if self.credential == "key":
            identity = f"key:{self.name}"
        elif self.credential == "jwt" and self.issuer is None:
            identity = f"jwt:{self.name}"
        elif self.credential == "jwt" and self.issuer is not None:
            identity = "jwt:" + self.issuer.replace("%", "%25").replace("|", "%7C") + "|" + self.name
        object.__setattr__(self, "identity", identity)

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
class Recipients:
    """Who a rule tells about a waiting question (issue 45): principal identities (``key:<name>``,
    ``jwt:<sub>``) for when it starts to wait, its reminder and its escalation."""

    waiting: tuple[str, ...] = ()
    reminded: tuple[str, ...] = ()
    escalated: tuple[str, ...] = ()

    @classmethod
    def of(cls, value: Mapping[str, Any]) -> Recipients:
        """From ``{waiting?, reminded?, escalated?}``, each a list of identities."""
        return cls(**{name: tuple(value.get(name) or ()) for name in ("waiting", "reminded", "escalated")})


@dataclass(frozen=True, kw_only=True)
class ToolApprovalRule:
    """One per-tool rule (config ``RUNSGATE_TOOL_RULES``, docs/configuration.md "Tool rules").

    Approving ``tool`` needs ``scope`` too, optionally only when an argument is above a limit;
    a deadline with a fallback; the call may be approved automatically, need several
    approvers, or be approved only with the model's arguments.

    Attributes:
        tool: The tool name (``toolName`` of the call).
        scope: The extra scope approving (or resuming) a call needs, e.g. ``refunds:approve``;
            ``None``: none.
        argument: Name of a top-level argument of the call; with ``above``, the rule is
            skipped only when that argument is a number (not a boolean) at most ``above``. A
            rule that cannot be evaluated applies: the arguments are not an object, or the
            argument is missing, null, or not a number (an unexpected value never skips it).
        above: The limit for ``argument``.
        agent_id: The rule covers calls of this agent's runs only; ``None``: every agent.
        expires_after: Seconds a call the rule covers may wait for its approval; after it the
            sweeper records ``on_expiry`` (``None``: no deadline).
        on_expiry: ``decline`` (default), or ``approve``: approved only when the rule's
            condition provably holds (``argument`` a number above ``above``, or no condition);
            a call whose condition cannot be evaluated is declined on expiry (fail closed).
        name: The rule's name: an automatic approval is recorded as ``decidedBy``
            ``policy:<name>``.
        at_most: With ``argument``: ``auto_approve`` applies only when the argument is a
            number (not a boolean) at most ``at_most``; any other value never auto-approves.
        auto_approve: ``True``: approve a matching call automatically when ``argument`` is at
            most ``at_most``; ``"always"``: approve every call of ``tool`` automatically.
        approvals: Distinct principals needed to approve a matching call (two-person
            approval); restricting, so it applies when ``above`` cannot be evaluated.
        allow_edits: ``False``: approving a call of ``tool`` with edited arguments is forbidden
            when the rule applies to the model's arguments or to the edited ones.
        remind_after: Seconds after a call starts to wait when its question's reminder is sent
            (``call.reminded``), unless decided by then; ``None``: none.
        escalate_after: Seconds after which it is escalated (``call.escalated``); ``None``: never.
        recipients: Who is told by email (``Recipients``); ``None``: nobody.
        separation_of_duties: ``True``: the principal who started the run may not approve (nor
            edit) a call the rule applies to; nor may any approver of a run whose starter is
            unknown (stored before schema version 5). Declining stays open to everyone.
        require_review_claim: ``True``: a person decides a call the rule applies to only while
            holding its review claim (``claimReview``).
    """

    tool: str
    scope: str | None = None
    argument: str | None = None
    above: float | None = None
    # deadlines (issue 18 part 2)
    agent_id: str | None = None
    expires_after: float | None = None
    on_expiry: ExpiryAction = "decline"
    # policy (issue 18 parts 3 and 4): automatic approval, two-person approval
    name: str | None = None
    at_most: float | None = None
    auto_approve: bool | Literal["always"] = False
    approvals: int = 1
    # edit-then-approve (issue 18 part 1)
    allow_edits: bool = True
    # the reviewers' queue (issue 45)
    separation_of_duties: bool = False
    require_review_claim: bool = False
    # reminders and escalation (issue 45 part 3)
    remind_after: float | None = None
    escalate_after: float | None = None
    recipients: Recipients | Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.recipients, Mapping):  # as the settings give it (``ToolRuleConfig``)
            object.__setattr__(self, "recipients", Recipients.of(self.recipients))

    def applies(self, tool_name: str | None, args: Any) -> bool:
        """Whether approving a call of ``tool_name`` with ``args`` falls under this rule's
        restricting effects (``scope``, ``approvals``): fail closed, see ``argument``."""
        if tool_name != self.tool:
            return False
        if self.argument is None or self.above is None:
            return True
        value = args.get(self.argument) if isinstance(args, Mapping) else None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return True  # missing, null, not a number, or args not an object: fail closed
        return not value <= self.above  # NaN is not at most the limit

    def provably_applies(self, tool_name: str | None, args: Any) -> bool:
        """Whether the rule's condition is known to hold for ``args`` (permissive effects)."""
        if tool_name != self.tool:
            return False
        if self.argument is None or self.above is None:
            return True
        value = args.get(self.argument) if isinstance(args, Mapping) else None
        return not isinstance(value, bool) and isinstance(value, int | float) and value > self.above

    def covers_agent(self, agent_id: str) -> bool:
        """Whether the rule applies to runs of ``agent_id``."""
        return self.agent_id is None or self.agent_id == agent_id

    def approves(self, tool_name: str | None, args: Any) -> bool:
        """Whether this rule approves a call of ``tool_name`` with ``args`` automatically: only
        when it provably holds (``argument`` a number, not a boolean, at most ``at_most``; NaN,
        a missing or non-number argument never approve)."""
        if tool_name != self.tool or self.auto_approve is False:
            return False
        if self.auto_approve == "always":
            return True
        if self.argument is None or self.at_most is None:
            return False
        value = args.get(self.argument) if isinstance(args, Mapping) else None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return value <= self.at_most


def check_start(principal: Principal, resource_id: str | None) -> None:
    """A principal limited to some resources starts runs of those resources only.

    Raises:
        ForbiddenError: ``resource_id`` is missing or not one of the principal's resources.
    """
    if principal.may_use_resource(resource_id):
        return
    if resource_id is None:
        raise ForbiddenError("this caller may start runs of its own resources only: give one as resourceId")
    raise ForbiddenError(f"resourceId {resource_id!r} is not one of the resources this caller may use")


def check_resource(doc: SnapshotDocument, principal: Principal | None) -> None:
    """Raises ``RunNotFoundError`` when the run ``doc`` is outside ``principal``'s resources
    (``None``: unrestricted): a decision's first check, before anything about the run is shown."""
    if principal is not None and not principal.may_use_resource(doc["resourceId"]):
        raise RunNotFoundError(doc["agentId"], doc["_id"])


def check_decider(doc: SnapshotDocument, principal: Principal | None) -> None:
    """A decision's first check by ``principal`` (``None``: runsgate's own deciders), on every
    path (the API, a link, a queue's listing): ``check_resource``, then ``runs:decide``.

    Raises:
        RunNotFoundError: The run is outside its resources (nothing about it is shown).
        ForbiddenError: It lacks ``runs:decide`` (``required_scope``): a link decides with its
            recipient's grants, which need not hold it.
    """
    check_resource(doc, principal)
    if principal is not None and not principal.has_scope(DECIDE):
        raise ForbiddenError(f"deciding needs the scope {DECIDE!r}", required_scope=DECIDE)


__all__ = [
    "ALL_SCOPES",
    "ANONYMOUS",
    "DECIDE",
    "READ",
    "START",
    "UNAUTHENTICATED",
    "CredentialKind",
    "Principal",
    "Recipients",
    "ToolApprovalRule",
    "can_see_run",
    "check_decider",
    "check_resource",
    "check_start",
]
