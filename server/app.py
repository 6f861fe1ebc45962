"""The Starlette application: ``/graphql``, ``/healthz``, ``/readyz`` (DESIGN.md §6).

The lifespan owns the resources: it opens the store (one ``AsyncMongoClient`` per process, or
the memory store), loads the agents and builds the ``RunManager``; requests get them through
``app.state``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL

from resolvers import Context, build_schema
from runtime import RunManager, ToolApprovalRule, load_registry
from storage import MemorySnapshotStore, MongoSnapshotStore, SnapshotStore, StoreUnavailableError

from ._view import AuthenticatedView, principal_of
from .auth import Authenticator
from .config import ConfigError, Settings, load_settings
from .limits import BodySizeLimit, graphql_extensions
from .request_id import RequestId
from .security_settings import security_problems

logger = logging.getLogger("runsgate")


def make_store(settings: Settings) -> SnapshotStore:
    """MongoDB when ``MONGODB_URI`` is set, else the in-memory store (lost on restart, as in the seed)."""
    if settings.mongodb_uri:
        return MongoSnapshotStore(settings.mongodb_uri, server_selection_timeout=settings.mongodb_timeout)
    return MemorySnapshotStore()


class GraphQLApp(AuthenticatedView, GraphQL[Context, None]):
    """Strawberry's ASGI GraphQL app with runsgate's per-request ``Context``, behind authentication
    (``server/_view.py``)."""

    async def get_context(self, request: Request | WebSocket, response: Any = None) -> Context:
        state = request.app.state
        settings = state.settings
        return Context(
            store=state.store,
            runs=state.runs,
            agents=state.runs.agents,
            principal=principal_of(request),
            max_page_size=settings.max_page_size,
            max_resume_data_bytes=settings.max_resume_data_bytes,
            max_resume_data_depth=settings.max_resume_data_depth,
            tool_rules=tuple(ToolApprovalRule(**rule.model_dump()) for rule in settings.tool_rules),
            request=request,
            response=response,
        )


async def healthz(request: Request) -> JSONResponse:
    """Liveness: the process answers."""
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> JSONResponse:
    """Readiness: the store answers a ping (503 otherwise)."""
    try:
        await request.app.state.store.ping()
    except StoreUnavailableError as exc:
        return JSONResponse({"status": "unavailable", "store": str(exc)}, status_code=503)
    return JSONResponse({"status": "ready"})


def create_app(settings: Settings | None = None) -> Starlette:
    """Build the app. Settings come from the environment unless given.

    Raises:
        ConfigError: Invalid environment (when ``settings`` is not given), or security settings
            that do not fit ``settings.host`` (e.g. authentication off on a non-loopback host).
    """
    settings = settings or load_settings()
    problems = security_problems(settings, settings.host)
    if problems:
        raise ConfigError("invalid configuration: " + "; ".join(problems))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        agents = load_registry(settings.agents)
        store = make_store(settings)
        await store.open()
        app.state.settings = settings
        app.state.store = store
        app.state.runs = RunManager(
            store,
            agents,
            instance_id=settings.instance_id,
            claim_ttl=settings.claim_ttl,
            model=settings.model,
        )
        logger.info(
            "runsgate ready: store=%s agents=%s instance=%s",
            type(store).__name__,
            ",".join(agents.ids()),
            settings.instance_id,
        )
        if not settings.auth:
            logger.warning(
                "authentication is OFF: anyone who can reach %s may read and decide every run "
                "(allowed on loopback only; set RUNSGATE_API_KEYS or a JWT for anything else)",
                settings.host,
            )
        try:
            yield
        finally:
            await store.close()

    graphql = GraphQLApp(
        build_schema(extensions=graphql_extensions(settings), max_batch=settings.max_batch),
        graphql_ide="graphiql" if settings.graphiql else None,
        max_subscriptions_per_connection=settings.max_ws_operations,
        connection_init_wait_timeout=timedelta(seconds=10),  # an unauthenticated socket is not kept long
    )
    graphql.authenticator = Authenticator.from_settings(settings)
    return Starlette(
        routes=[
            Route("/graphql", graphql, methods=["GET", "POST"]),
            WebSocketRoute("/graphql", graphql),
            Route("/healthz", healthz),
            Route("/readyz", readyz),
        ],
        lifespan=lifespan,
        middleware=[Middleware(RequestId), Middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)],
    )
