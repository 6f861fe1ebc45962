"""The per-request GraphQL context (``Info[Context]``), built by ``server/`` for each request.

It lives here, not in ``server/``, so that arrows point one way (server -> resolvers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from strawberry.types import Info as _Info

from runtime import AgentRegistry, EventFeed, RunManager
from storage import SnapshotStore

from .loaders import Loaders


@dataclass(kw_only=True)
class Context:
    """What every resolver may use during one request.

    Attributes:
        store: The snapshot store (memory or MongoDB).
        runs: The run lifecycle (start, decide, continue).
        agents: The registered agents.
        principal: Who is calling (``decidedBy``); ``"anonymous"`` until authentication exists.
        max_page_size: Cap on ``first``/``last``/``perPage`` and the default page size.
        loaders: Fresh DataLoaders for this request.
        events: The process's event feed (subscriptions); ``None`` where none runs.
        request: The underlying Starlette request or WebSocket, when there is one.
    """

    store: SnapshotStore
    runs: RunManager
    agents: AgentRegistry
    principal: str | None = None
    max_page_size: int = 100
    loaders: Loaders = field(init=False)
    request: Any = None
    response: Any = None
    events: EventFeed | None = None

    def __post_init__(self) -> None:
        self.loaders = Loaders(self.store)


Info = _Info[Context, None]
