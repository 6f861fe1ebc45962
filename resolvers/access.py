"""Authorization at the GraphQL edge: the scope of each root field, and what a read may show.

Permission classes (``CanRead``, ``CanReadEvents``, ``CanDecide``, ``CanDecideEvents``, ``CanStart``,
``CanReadWebhooks``) declare each root field's scope (else ``FORBIDDEN``, the resolver never
runs); a run outside the principal's resources is reported exactly as a missing one
(``restricted``, ``visible``). Writes are checked by the runtime. The rules: SECURITY.md
"Authorization".
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator
from typing import Any, ClassVar, NoReturn

from graphql import GraphQLError
from strawberry.permission import BasePermission

from runtime import DECIDE, READ, START, WEBHOOKS_READ, can_see_run
from storage import RunFilter, SnapshotDocument

from .context import Info


class AccessDenied(GraphQLError):
    """The principal lacks the scope a field needs: ``extensions.code`` ``FORBIDDEN``.

    A client's mistake: not masked, logged at INFO (``resolvers.schema.should_mask_error``).
    """

    def __init__(self, scope: str) -> None:
        super().__init__(
            f"this operation needs the scope {scope!r}", extensions={"code": "FORBIDDEN", "requiredScope": scope}
        )


class _ScopePermission(BasePermission):
    """A root field allowed to principals holding ``scope`` (Strawberry's ``PermissionExtension``
    runs it before the resolver, on every execution path)."""

    scope: ClassVar[str]

    def has_permission(self, source: Any, info: Info, **kwargs: Any) -> bool:
        return info.context.principal.has_scope(self.scope)

    def on_unauthorized(self) -> None:
        """Raises ``AccessDenied`` (message and extensions as SECURITY.md documents them)."""
        raise AccessDenied(self.scope)


class CanRead(_ScopePermission):
    """``runs:read``: list and read suspended runs and their events."""

    scope = READ


class CanReadEvents(CanRead):
    """``runs:read`` on a subscription field: the refusal is the stream's one result.

    The subscriber receives a ``next`` message whose payload holds the ``FORBIDDEN`` error,
    then ``complete`` (``graphql-transport-ws``), as from any error a stream raises.
    """

    def on_unauthorized(self) -> Any:
        return _refused(AccessDenied(self.scope))


async def _refused(error: AccessDenied) -> AsyncGenerator[NoReturn, None]:
    raise error
    yield  # pragma: no cover - makes this an async generator


class CanDecide(_ScopePermission):
    """``runs:decide``: approve, decline, resume and retry runs."""

    scope = DECIDE


class CanDecideEvents(CanDecide):
    """``runs:decide`` on a subscription field: the refusal is the stream's one result (``CanReadEvents``)."""

    def on_unauthorized(self) -> Any:
        return _refused(AccessDenied(self.scope))


class CanStart(_ScopePermission):
    """``runs:start``: start runs."""

    scope = START


class CanReadWebhooks(_ScopePermission):
    """``webhooks:read``: list webhook deliveries (only those about runs of the principal's resources)."""

    scope = WEBHOOKS_READ


def restricted(info: Info, run_filter: RunFilter) -> RunFilter:
    """``run_filter`` limited to the principal's resources (inside the store query)."""
    resources = info.context.principal.resources
    return run_filter if resources is None else dataclasses.replace(run_filter, resource_ids=resources)


def visible(info: Info, doc: SnapshotDocument | None) -> SnapshotDocument | None:
    """``doc`` if the principal may see it (``runtime.can_see_run``), else ``None``."""
    if doc is None or not can_see_run(info.context.principal, doc["resourceId"]):
        return None
    return doc


__all__ = [
    "AccessDenied",
    "CanDecide",
    "CanRead",
    "CanReadEvents",
    "CanReadWebhooks",
    "CanStart",
    "restricted",
    "visible",
]
