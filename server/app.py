"""The Starlette application: ``/graphql``, ``/healthz``, ``/readyz``, ``/metrics`` (DESIGN.md §6).

The lifespan owns the resources: it opens the store (one ``AsyncMongoClient`` per process, or
the memory store; it refuses a store holding a newer ``schemaVersion``), loads the agents,
builds the ``RunManager`` and starts the ``StalledRunSweeper`` (unless
``RUNSGATE_SWEEP_INTERVAL=0``); requests get them through ``app.state``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL

from resolvers import Context, schema
from resolvers.schema import build_schema
from runtime import EventFeed, RunManager, StalledRunSweeper, load_registry
from storage import MemorySnapshotStore, MongoSnapshotStore, NewerSchemaError, SnapshotStore, StoreUnavailableError

from .config import Settings, load_settings
from .graphql_view import GRAPHIQL_ASSETS_DIR, GRAPHIQL_ASSETS_PATH, GraphQLView
from .metrics import metrics
from .request_id import request_id_middleware
from .tracing import start_tracing

logger = logging.getLogger("runsgate")


def make_store(settings: Settings) -> SnapshotStore:
    """MongoDB when ``MONGODB_URI`` is set, else the in-memory store (lost on restart, as in the seed)."""
    if settings.mongodb_uri:
        return MongoSnapshotStore(settings.mongodb_uri, server_selection_timeout=settings.mongodb_timeout)
    return MemorySnapshotStore()


class GraphQLApp(GraphQLView):
    """The ``/graphql`` view (``graphql_view.py``) with runsgate's per-request ``Context``."""

    async def get_context(self, request: Request | WebSocket, response: Any = None) -> Context:
        state = request.app.state
        return Context(
            store=state.store,
            runs=state.runs,
            agents=state.runs.agents,
            principal="anonymous",  # until authentication exists (issue 3: decidedBy)
            max_page_size=state.settings.max_page_size,
            request=request,
            response=response,
            events=state.events,
        )


async def healthz(request: Request) -> JSONResponse:
    """Liveness: the process answers."""
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> JSONResponse:
    """Readiness: the store answers a ping (503 otherwise; 200 again once it is back)."""
    try:
        await request.app.state.store.ping()
    except StoreUnavailableError as exc:
        return JSONResponse({"status": "unavailable", "store": str(exc)}, status_code=503)
    return JSONResponse({"status": "ready"})


def create_app(settings: Settings | None = None) -> Starlette:
    """Build the app. Settings come from the environment unless given.

    Raises:
        ConfigError: Invalid environment (when ``settings`` is not given).
    """
    settings = settings or load_settings()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        agents = load_registry(settings.agents)
        store = make_store(settings)
        try:
            await store.open()
        except NewerSchemaError as exc:
            logger.critical("runsgate cannot start: %s", exc)
            raise
        app.state.settings = settings
        app.state.store = store
        app.state.runs = RunManager(
            store,
            agents,
            instance_id=settings.instance_id,
            claim_ttl=settings.claim_ttl,
            model=settings.model,
        )
        app.state.events = EventFeed(
            store, poll_interval=settings.subscription_poll_interval, lookback=settings.subscription_lookback
        )
        logger.info(
            "runsgate ready: store=%s agents=%s instance=%s",
            type(store).__name__,
            ",".join(agents.ids()),
            settings.instance_id,
        )
        sweeping = None
        if settings.sweep_interval > 0:
            sweeper = StalledRunSweeper(app.state.runs, interval=settings.sweep_interval)
            sweeping = asyncio.create_task(sweeper.run_forever(), name="runsgate-sweeper")
        try:
            yield
        finally:
            if sweeping is not None:
                sweeping.cancel()
                await asyncio.wait([sweeping])
            await app.state.events.close()
            await store.close()
            tracing.shutdown()

    tracing = start_tracing(settings)  # nothing of OpenTelemetry is loaded unless configured
    graphql_schema = build_schema(tracing.extensions) if tracing.enabled else schema
    graphql = GraphQLApp(
        graphql_schema,
        graphql_ide="graphiql" if settings.graphiql else None,
        subscription_protocols=[GRAPHQL_TRANSPORT_WS_PROTOCOL],
        connection_init_wait_timeout=timedelta(seconds=settings.ws_connection_init_timeout),
    )
    return Starlette(
        routes=[
            Route("/graphql", graphql, methods=["GET", "POST"]),
            WebSocketRoute("/graphql", graphql),
            Route("/healthz", healthz),
            Route("/readyz", readyz),
            *([Route("/metrics", metrics)] if settings.metrics else []),
            *([Mount(GRAPHIQL_ASSETS_PATH, StaticFiles(directory=GRAPHIQL_ASSETS_DIR))] if settings.graphiql else []),
        ],
        middleware=[request_id_middleware()],
        lifespan=lifespan,
    )
