"""Authorization at the GraphQL edge: scopes per field, hidden runs, per-tool approval rules.

The principal comes from ``Context.principal`` (``server/`` authenticated it). The rules
(SECURITY.md, ``runtime.access``):

- a field needs its scope, else a GraphQL error ``FORBIDDEN`` (``AccessDenied``) and nothing runs;
- a run outside the principal's resources is reported exactly as a missing run: absent from
  lists and counts (restriction inside the store query), ``null`` from ``suspendedRun``,
  ``node`` and ``_entities``, no events, and ``RunNotFound`` from mutations;
- approving (or resuming) a tool call may need an extra scope (``ToolApprovalRule``).
"""

from __future__ import annotations

import dataclasses

from graphql import GraphQLError

from runtime import (
    ForbiddenError,
    RunNotFoundError,
    can_see_run,
    missing_approval_scope,
)
from storage import RunFilter, SnapshotDocument

from .context import Info


class AccessDenied(GraphQLError):
    """The principal lacks the scope a field needs: ``extensions.code`` ``FORBIDDEN``."""

    def __init__(self, scope: str) -> None:
        super().__init__(
            f"this operation needs the scope {scope!r}", extensions={"code": "FORBIDDEN", "requiredScope": scope}
        )


def require_scope(info: Info, scope: str) -> None:
    """Raises ``AccessDenied`` unless the request's principal holds ``scope``."""
    if not info.context.principal.has_scope(scope):
        raise AccessDenied(scope)


def restricted(info: Info, run_filter: RunFilter) -> RunFilter:
    """``run_filter`` limited to the principal's resources (inside the store query)."""
    resources = info.context.principal.resources
    return run_filter if resources is None else dataclasses.replace(run_filter, resource_ids=resources)


def visible(info: Info, doc: SnapshotDocument | None) -> SnapshotDocument | None:
    """``doc`` if the principal may see it (``runtime.can_see_run``), else ``None``."""
    if doc is None or not can_see_run(info.context.principal, doc["resourceId"]):
        return None
    return doc


async def check_decision(info: Info, agent_id: str, run_id: str, tool_call_id: str | None, *, approving: bool) -> None:
    """Checks made before a decision reaches the runtime; nothing is written by them.

    A hidden run raises ``RunNotFoundError`` exactly as a missing one. An approval (or a
    resume) of a call whose tool has a ``ToolApprovalRule`` the principal does not satisfy
    raises ``ForbiddenError``. A run that is gone is left to the runtime (it answers
    ``RunNotFound``, or replays the principal's own idempotent request). The checked facts
    (a run's resource, a call's tool name and arguments) never change once stored.

    Raises:
        RunNotFoundError: The run is outside the principal's resources.
        ForbiddenError: A per-tool rule needs a scope the principal lacks.
    """
    context = info.context
    principal = context.principal
    if principal.resources is None and not (approving and context.tool_rules):
        return
    doc = await context.store.get(agent_id, run_id)
    if doc is None:
        return
    if not principal.may_use_resource(doc["resourceId"]):
        raise RunNotFoundError(agent_id, run_id)
    if not approving or not context.tool_rules:
        return
    calls = [
        c
        for c in doc["toolCalls"]
        if (c["toolCallId"] == tool_call_id if tool_call_id is not None else not c["requiresApproval"])
    ]
    for call in calls:
        scope = missing_approval_scope(principal, context.tool_rules, call["toolName"], call["args"])
        if scope is not None:
            raise ForbiddenError(f"approving {call['toolName']!r} needs the scope {scope!r}", required_scope=scope)


def check_start(info: Info, resource_id: str | None) -> None:
    """A principal limited to some resources starts runs of those resources only.

    Raises:
        ForbiddenError: ``resource_id`` is missing or not one of the principal's resources.
    """
    principal = info.context.principal
    if not principal.may_use_resource(resource_id):
        if resource_id is None:
            raise ForbiddenError("this caller may start runs of its own resources only: give one as resourceId")
        raise ForbiddenError(f"resourceId {resource_id!r} is not one of the resources this caller may use")


__all__ = [
    "AccessDenied",
    "check_decision",
    "check_start",
    "require_scope",
    "restricted",
    "visible",
]
