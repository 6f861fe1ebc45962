"""Security settings (SECURITY.md): authentication, authorization rules and request limits.

A mixin of ``server.settings.Settings`` (same ``RUNSGATE_`` prefix, same ``.env``);
docs/configuration.md lists every variable. ``check_security`` holds the rules that involve
several settings and is called before the server starts.
"""

from __future__ import annotations

import ipaddress
import json
from difflib import get_close_matches
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode

from runtime import ALL_SCOPES

from ..http.hosts import allowed_name
from .bounds import CENTURY

OWN_PREFIXES = tuple(sorted({scope.partition(":")[0] + ":" for scope in ALL_SCOPES}))
"""The namespaces of runsgate's own scopes (``runs:``, ``webhooks:``): a scope there is one of them."""


def unknown_own_scope(scope: str) -> str | None:
    """Why ``scope`` is refused, or ``None``: in the namespace of runsgate's own scopes
    (``OWN_PREFIXES``) but not one of them (``runs:decid``), said with the nearest one ("did you
    mean"). A scope outside them (``refunds:approve``) is a custom one, which tool rules name."""
    if scope in ALL_SCOPES or not scope.startswith(OWN_PREFIXES):
        return None
    own = sorted(ALL_SCOPES)
    near = get_close_matches(scope, own, n=1)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return f"{scope!r} is not a scope of runsgate ({', '.join(own)}){hint}"


def _own_scope(scope: str) -> str:
    if (refused := unknown_own_scope(scope)) is not None:
        raise ValueError(refused)
    return scope


Scope = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$"), AfterValidator(_own_scope)]
"""A scope: one of runsgate's own (``ALL_SCOPES``), or a custom one outside their namespaces."""


class ApiKeyConfig(BaseModel):
    """One API key of ``RUNSGATE_API_KEYS``; the key itself is never stored, only its hash."""

    name: Annotated[str, Field(min_length=1, max_length=200)]
    """Who holds it; recorded as ``decidedBy`` and in the audit log."""
    hash: Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]
    """``sha256:`` + the hex SHA-256 of the key (``runsgate new-key`` prints it)."""
    scopes: list[Scope]
    """``runs:read``, ``runs:decide``, ``runs:start`` and any scope a tool rule names."""
    resources: list[Annotated[str, Field(min_length=1)]] | Literal["*"]
    """The ``resourceId``s whose runs the key may see and decide, or ``"*"`` for every run."""
    email: Annotated[str, Field(pattern=r"^[^@\s<>\"]+@[^@\s<>\"]+$", max_length=320)] | None = None
    """Where its holder gets the emails of the rules naming ``key:<name>`` (issue 45)."""


PrincipalIdentity = Annotated[str, Field(pattern=r"^(key|jwt):\S.*$", max_length=500)]
"""A principal as deciders are recorded: ``key:<name>`` or ``jwt:<sub>`` (``jwt:<iss>|<sub>``)."""


class RecipientsConfig(BaseModel):
    """A rule's ``recipients`` (docs/configuration.md "Reminders, escalation and email")."""

    model_config = ConfigDict(extra="forbid", strict=True)
    waiting: list[PrincipalIdentity] = Field(default_factory=list)
    reminded: list[PrincipalIdentity] = Field(default_factory=list)
    escalated: list[PrincipalIdentity] = Field(default_factory=list)


class ToolRuleConfig(BaseModel):
    """One rule of ``RUNSGATE_TOOL_RULES`` (docs/configuration.md "Tool rules"): approving
    ``tool`` needs ``scope`` too; a call of it waits at most ``expiresAfter`` seconds; it is
    approved automatically, needs several approvers, or may not be edited."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", strict=True)
    """An unknown key (a misspelt ``aprovals``) is refused, never ignored: it could drop an effect;
    a value of another JSON type (``"yes"`` for ``true``, ``"2"`` for ``2``) is refused, never coerced."""

    tool: Annotated[str, Field(min_length=1)]
    scope: Scope | None = None
    argument: str | None = None
    """A top-level argument of the call; with ``above``, the rule applies when it is greater."""
    above: Annotated[float, Field(allow_inf_nan=False)] | None = None
    # deadlines (issue 18 part 2)
    agent_id: Annotated[str, Field(min_length=1)] | None = Field(default=None, alias="agentId")
    """The rule covers runs of this agent only (absent: every agent)."""
    expires_after: Annotated[float, Field(gt=0, le=CENTURY, allow_inf_nan=False)] | None = Field(
        default=None, alias="expiresAfter"
    )
    """Seconds a call may wait for its approval; then the sweeper applies ``onExpiry``."""
    on_expiry: Literal["decline", "approve"] = Field(default="decline", alias="onExpiry")
    """``decline`` (the default) or ``approve`` (only where the rule says so), after ``expiresAfter``."""

    @model_validator(mode="after")
    def _expiry_needs_deadline(self) -> ToolRuleConfig:
        if "on_expiry" in self.model_fields_set and self.expires_after is None:
            raise ValueError(f"rule for tool {self.tool!r}: onExpiry needs expiresAfter (seconds, > 0)")
        return self

    # policy (issue 18 parts 3 and 4): automatic approval, two-person approval
    name: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$")] | None = None
    """The rule's name; an automatic approval is recorded as ``decidedBy`` ``policy:<name>``."""
    at_most: Annotated[float, Field(allow_inf_nan=False)] | None = Field(default=None, alias="atMost")
    """With ``argument`` and ``autoApprove: true``: approve automatically when it is at most this."""
    auto_approve: bool | Literal["always"] = Field(default=False, alias="autoApprove")
    """``true``: approve automatically when ``argument`` is provably at most ``atMost``;
    ``"always"``: every call of ``tool``."""
    approvals: Annotated[int, Field(ge=1, le=100)] = 1
    """Distinct principals needed to approve a matching call (fail closed, as ``scope``)."""
    # edit-then-approve (issue 18 part 1)
    allow_edits: bool = Field(default=True, alias="allowEdits")
    """``false``: approving a call of ``tool`` with ``editedArgs`` is forbidden (when the rule applies)."""
    # the reviewers' queue (issue 45)
    separation_of_duties: bool = Field(default=False, alias="separationOfDuties")
    """``true``: the principal who started the run may not approve or edit a call the rule applies to."""
    require_review_claim: bool = Field(default=False, alias="requireReviewClaim")
    """``true``: a person decides a call the rule applies to only while holding its review claim."""

    # reminders and escalation (issue 45 part 3)
    remind_after: Annotated[float, Field(gt=0, le=CENTURY, allow_inf_nan=False)] | None = Field(
        default=None, alias="remindAfter"
    )
    """Seconds a call may wait before its question's reminder (``call.reminded``)."""
    escalate_after: Annotated[float, Field(gt=0, le=CENTURY, allow_inf_nan=False)] | None = Field(
        default=None, alias="escalateAfter"
    )
    """Seconds a call may wait before its question is escalated (``call.escalated``)."""
    recipients: RecipientsConfig | None = None
    """Principals told by email: ``{waiting?, reminded?, escalated?}``, lists of identities."""

    @model_validator(mode="after")
    def _policy(self) -> ToolRuleConfig:
        if self.auto_approve is not False and self.name is None:
            raise ValueError(f"the autoApprove rule for {self.tool!r} needs a name (recorded as 'policy:<name>')")
        if self.auto_approve is True and (self.argument is None or self.at_most is None):
            raise ValueError(
                f"the autoApprove rule {self.name!r} needs a condition (argument and atMost), or "
                '"autoApprove": "always" to approve every call of the tool'
            )
        if self.auto_approve == "always" and self.at_most is not None:
            raise ValueError(f'the rule {self.name!r} has "autoApprove": "always" and an atMost; give one')
        if self.at_most is not None and self.auto_approve is False:
            raise ValueError(f"the rule for {self.tool!r} has atMost without autoApprove (atMost limits it)")
        if self.auto_approve is not False and self.approvals > 1:
            raise ValueError(f"the rule {self.name!r} both approves automatically and needs {self.approvals} approvals")
        return self

    @model_validator(mode="after")
    def _has_an_effect(self) -> ToolRuleConfig:
        # Checked after the other validators, whose messages are more precise. Keys that only
        # name or condition a rule; any other key given is an effect (scope,
        # expiresAfter, and the effects other rule features add).
        conditions = {"tool", "name", "agent_id", "argument", "above", "at_most", "on_expiry"}
        if not self.model_fields_set - conditions:
            raise ValueError(
                f"rule for tool {self.tool!r} has no effect: give it a scope, expiresAfter, autoApprove, "
                "approvals, allowEdits, remindAfter, escalateAfter, recipients, separationOfDuties "
                "or requireReviewClaim"
            )
        return self


class SecuritySettings(BaseSettings):
    """Authentication, authorization and limits (docs/configuration.md, SECURITY.md)."""

    auth: bool = True
    """Require a bearer token on ``/graphql``. May be off only on a loopback host."""
    allowed_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """With ``auth`` off, host names answered besides ``localhost``, ``127.0.0.1`` and ``[::1]``
    (``server.http.hosts``): comma-separated, or a JSON list."""
    api_keys: list[ApiKeyConfig] = Field(default_factory=list)
    """JSON list of ``{name, hash, scopes, resources}``."""
    jwt_secret: SecretStr | None = None
    """Shared secret of HS256 JWTs: at least 32 bytes (48 for HS384, 64 for HS512), checked at start."""
    jwt_jwks_url: str | None = None
    """URL of a JWKS document whose keys sign the JWTs (RS256/ES256)."""
    jwt_algorithms: list[str] | None = None
    """Accepted JWT algorithms; default ``["HS256"]`` with a secret, ``["RS256", "ES256"]`` with a JWKS."""
    jwt_audience: str | None = None
    """Required ``aud`` of JWTs, when set."""
    jwt_issuer: str | None = None
    """Required ``iss`` of JWTs, when set."""
    jwt_resources_claim: str = "resources"
    """Claim listing the ``resourceId``s of a JWT's subject (a list, or ``"*"``); absent: none."""
    tool_rules: list[ToolRuleConfig] = Field(default_factory=list)
    """JSON list of ``{tool, scope?, argument?, above?, agentId?, expiresAfter?, onExpiry?, name?, atMost?,
    autoApprove?, approvals?, allowEdits?, separationOfDuties?, requireReviewClaim?}``
    (``ToolRuleConfig``); unset: the default rules of the agents' module
    (``TOOL_RULES`` beside the registry), if it has any."""
    introspection: bool = True
    """Answer introspection queries (GraphiQL needs them)."""
    max_query_depth: Annotated[int, Field(ge=1, le=100)] = 10
    """Deepest selection nesting of an operation (introspection fields not counted)."""
    max_query_tokens: Annotated[int, Field(ge=10, le=1_000_000)] = 2000
    """Most tokens in a GraphQL document."""
    max_aliases: Annotated[int, Field(ge=0, le=10_000)] = 20
    """Most aliases in a GraphQL document."""
    max_batch: Annotated[int, Field(ge=0, le=100)] = 0
    """Operations in one batched (JSON array) request; 0: batching off."""
    max_body_bytes: Annotated[int, Field(ge=1024, le=1 << 30)] = 1 << 20
    """Largest request body in bytes; above it the answer is 413 before anything is parsed. Also
    the largest WebSocket message under ``runsgate serve`` (uvicorn's ``ws_max_size``)."""
    max_resume_data_bytes: Annotated[int, Field(ge=2, le=1 << 30)] = 64 * 1024
    """Largest ``resumeData`` as compact JSON, in bytes."""
    max_resume_data_depth: Annotated[int, Field(ge=1, le=200)] = 32
    """Deepest nesting of arrays and objects in ``resumeData``."""
    max_prompt_bytes: Annotated[int, Field(ge=1, le=1 << 30)] = 32 * 1024
    """Longest ``startRun`` ``prompt``, in UTF-8 bytes."""
    max_reason_bytes: Annotated[int, Field(ge=1, le=1 << 30)] = 4 * 1024
    """Longest ``declineToolCall`` ``reason``, in UTF-8 bytes."""
    max_ws_operations: Annotated[int, Field(ge=1, le=10_000)] = 20
    """Operations (subscriptions, queries, mutations) in flight at once on one WebSocket."""
    max_query_cost: Annotated[int, Field(ge=1, le=1_000_000_000)] = 10_000
    """The most a document may cost before it runs (``resolvers.documents.cost``, docs/api.md "Query
    cost"); above it the document is refused with ``QUERY_TOO_COSTLY``."""
    max_response_bytes: Annotated[int, Field(ge=64 * 1024, le=1 << 30)] = 4 * 1024 * 1024
    """The most bytes one answer may take (an HTTP response, a batch's answers together, a
    WebSocket message); one that would pass it is not sent: ``RESPONSE_TOO_LARGE`` instead."""

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _host_names(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip()
            value = json.loads(text) if text.startswith("[") else [n for n in text.split(",") if n.strip()]
        if isinstance(value, list):
            return [allowed_name(name) if isinstance(name, str) else name for name in value]
        return value

    @field_validator("jwt_jwks_url")
    @classmethod
    def _jwks_scheme(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("https://", "http://")):
            raise ValueError("must be an http(s):// URL")
        return value or None


HMAC_MIN_SECRET_BYTES = {"HS256": 32, "HS384": 48, "HS512": 64}
"""Shortest HMAC secret, in bytes, per JWT algorithm (RFC 7518 section 3.2; PyJWT enforces the same)."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine: ``localhost``, 127.0.0.0/8 or ::1."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def security_problems(settings: SecuritySettings, host: str) -> list[str]:
    """What is wrong with the security settings for a server listening on ``host`` (empty: fine).

    Each problem names the variable(s) to change.
    """
    problems = []
    if not settings.auth:
        if not is_loopback(host):
            problems.append(
                f"RUNSGATE_AUTH is off but the server would listen on {host!r}, which is not a loopback "
                "address; authentication may be off only on 127.0.0.1, ::1 or localhost. Configure "
                "RUNSGATE_API_KEYS or a JWT (RUNSGATE_JWT_SECRET / RUNSGATE_JWT_JWKS_URL) instead"
            )
        return problems
    if settings.jwt_secret is not None and settings.jwt_jwks_url is not None:
        problems.append("set RUNSGATE_JWT_SECRET or RUNSGATE_JWT_JWKS_URL, not both")
    if settings.jwt_secret is not None:
        algorithms = settings.jwt_algorithms or ["HS256"]
        needed = max(HMAC_MIN_SECRET_BYTES.get(a.upper(), HMAC_MIN_SECRET_BYTES["HS256"]) for a in algorithms)
        size = len(settings.jwt_secret.get_secret_value().encode("utf-8"))
        if size < needed:
            problems.append(
                f"RUNSGATE_JWT_SECRET is {size} bytes; it must be at least {needed} bytes of random "
                "data for the configured HMAC algorithms (RFC 7518 section 3.2: a key at least as long as the "
                "hash), e.g. `python3 -c 'import secrets; print(secrets.token_urlsafe(48))'`"
            )
    if not settings.api_keys and settings.jwt_secret is None and settings.jwt_jwks_url is None:
        problems.append(
            "RUNSGATE_AUTH is on but no credential is configured: set RUNSGATE_API_KEYS (see `runsgate "
            "new-key`), RUNSGATE_JWT_SECRET or RUNSGATE_JWT_JWKS_URL; or, for local development on a "
            "loopback host only, RUNSGATE_AUTH=off"
        )
    names = [key.name for key in settings.api_keys]
    if len(set(names)) != len(names):
        problems.append("RUNSGATE_API_KEYS: every key needs its own name")
    hashes = [key.hash for key in settings.api_keys]
    if len(set(hashes)) != len(hashes):
        problems.append("RUNSGATE_API_KEYS: the same key hash appears twice")
    return problems


__all__ = [
    "HMAC_MIN_SECRET_BYTES",
    "ApiKeyConfig",
    "SecuritySettings",
    "ToolRuleConfig",
    "is_loopback",
    "security_problems",
]
