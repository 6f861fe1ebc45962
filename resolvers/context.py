"""The per-request GraphQL context (``Info[Context]``), built by ``server/`` for each request.

It lives here, not in ``server/``, so that arrows point one way (server -> resolvers).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from typing import Any, Final

from strawberry.types import Info as _Info

from runtime import ANONYMOUS, AgentRegistry, EventFeed, Principal, RunManager, RunUpdateFeed
from storage import SnapshotStore

from .argument_errors import QueryArgumentError
from .loaders import Loaders


class _OperationLoaders:
    """The DataLoaders of one operation on a context that outlives it (a WebSocket's)."""

    __slots__ = ("context", "loaders")

    def __init__(self, context: Context) -> None:
        self.context = context
        self.loaders: Loaders | None = None


_OPERATION: ContextVar[_OperationLoaders | None] = ContextVar("runsgate_operation_loaders", default=None)
"""The running operation's loaders; set in the operation's task, so its resolvers (tasks it
spawns) share them, and concurrent operations of one connection never do."""


def begin_operation(context: Context) -> None:
    """Start an operation on ``context`` in the current task: its DataLoaders (``Context.loaders``)
    are fresh, made when first used. The WebSocket handler calls it for each operation, since a
    socket's ``Context`` lives as long as the connection and a cache must not outlive the
    operation that filled it."""
    _OPERATION.set(_OperationLoaders(context))


def fresh_loaders() -> None:
    """Forget the current operation's DataLoaders (a subscription, before each event it yields),
    so that every event is resolved from the store as it is now."""
    current = _OPERATION.get()
    if current is not None:
        current.loaders = None


@dataclass(frozen=True, kw_only=True)
class RequestLimits:
    """The caps a request is held to (``RUNSGATE_`` settings of the same names).

    Attributes:
        max_page_size: Cap on ``first``/``last``/``perPage`` and the default page size.
        max_resume_data_bytes: Cap on ``resumeData`` serialized as JSON (UTF-8 bytes).
        max_resume_data_depth: Cap on the nesting depth of ``resumeData`` (arrays and objects).
        max_prompt_bytes: Cap on a ``startRun`` ``prompt`` (UTF-8 bytes).
        max_reason_bytes: Cap on a ``declineToolCall`` ``reason`` (UTF-8 bytes).
        max_bulk_decisions: Most items of one ``decideToolCalls``.
        max_query_cost: The most a document may cost (``resolvers.documents.cost``, docs/api.md "Query cost").
    """

    max_page_size: int = 100
    max_resume_data_bytes: int = 64 * 1024
    max_resume_data_depth: int = 32
    max_prompt_bytes: int = 32 * 1024
    max_reason_bytes: int = 4 * 1024
    max_bulk_decisions: int = 100
    max_query_cost: int = 10_000

    def page_size(self, first: int | None) -> int:
        """A forward-only page's size: ``first``, else ``max_page_size``.

        Raises:
            QueryArgumentError: ``first`` outside ``0..max_page_size`` (``BAD_USER_INPUT``).
        """
        size = self.max_page_size if first is None else first
        if not 0 <= size <= self.max_page_size:
            raise QueryArgumentError(f"`first` must be between 0 and {self.max_page_size}", argument="first")
        return size

    @classmethod
    def of(cls, settings: Any) -> RequestLimits:
        """The limits read from ``settings``: any object with an attribute of each field's name."""
        return cls(**{name.name: getattr(settings, name.name) for name in fields(cls)})


DEFAULT_LIMITS: Final = RequestLimits()
"""The limits of a ``Context`` made without any (tests, a schema executed outside the server)."""


@dataclass(kw_only=True)
class Context:
    """What every resolver may use during one request.

    Attributes:
        store: The snapshot store (memory or MongoDB).
        runs: The run lifecycle (start, decide, continue).
        agents: The registered agents.
        principal: Who is calling: its scopes allow root fields (``resolvers.access``), its
            resources limit what it reads here and what ``runs`` lets it decide (the runtime
            receives it and records its name as ``decidedBy``). ``ANONYMOUS`` (every scope,
            every run) when authentication is off.
        limits: The request limits (``RequestLimits``), the server's settings of those names.
        loaders: Fresh DataLoaders for this operation, restricted to the principal's
            resources (per HTTP request, per WebSocket operation: ``begin_operation``).
        events: The process's event feed (subscriptions); ``None`` where none runs.
        run_updates: The process's run update feed (``runUpdates``); ``None`` where none runs.
        request: The underlying Starlette request or WebSocket, when there is one.
        connection_params: The WebSocket ``connection_init`` payload (Strawberry sets it).
        webhook_endpoints: The configured webhook receivers, endpoint id -> URL
            (``webhookDeliveries`` shows them without their query strings).
    """

    store: SnapshotStore
    runs: RunManager
    agents: AgentRegistry
    principal: Principal = ANONYMOUS
    limits: RequestLimits = DEFAULT_LIMITS
    request: Any = None
    response: Any = None
    events: EventFeed | None = None
    run_updates: RunUpdateFeed | None = None
    connection_params: Any = None
    webhook_endpoints: dict[str, str] = field(default_factory=dict)
    _loaders: Loaders | None = field(default=None, init=False, repr=False)

    @property
    def loaders(self) -> Loaders:
        """This operation's DataLoaders, made when first used (a page of runs uses none)."""
        current = _OPERATION.get()
        if current is not None and current.context is self:
            if current.loaders is None:
                current.loaders = Loaders(self.store, resource_ids=self.principal.resources)
            return current.loaders
        if self._loaders is None:
            self._loaders = Loaders(self.store, resource_ids=self.principal.resources)
        return self._loaders

    def release(self) -> None:
        """Drop this request's DataLoaders and all they cached, once its answer is built.

        graphql-core's executor refers to itself through ``async_helpers`` (bound methods), so
        it, its ``context_value`` and everything the context refers to stay alive until the
        cyclic garbage collector runs; without this, a request's documents would stay with them.
        """
        self._loaders = None

    def authenticated(self, principal: Principal) -> None:
        """Switch to ``principal`` (a WebSocket whose ``connection_init`` was accepted)."""
        self.principal = principal
        self._loaders = None


Info = _Info[Context, None]

__all__ = ["Context", "Info", "begin_operation", "fresh_loaders"]
