"""The Starlette application: ``/graphql``, ``/healthz``, ``/readyz`` (DESIGN.md §6).

The lifespan owns the resources: it opens the store (one ``AsyncMongoClient`` per process, or
the memory store), loads the agents and builds the ``RunManager``; requests get them through
``app.state``.
"""

from __future__ import annotations

import gc
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL

from resolvers import Context, schema
from runtime import RunManager, load_registry
from storage import MemorySnapshotStore, MongoSnapshotStore, SnapshotStore, StoreUnavailableError

from .config import Settings, load_settings

logger = logging.getLogger("runsgate")


def make_store(settings: Settings) -> SnapshotStore:
    """MongoDB when ``MONGODB_URI`` is set, else the in-memory store (lost on restart, as in the seed)."""
    if settings.mongodb_uri:
        return MongoSnapshotStore(settings.mongodb_uri, server_selection_timeout=settings.mongodb_timeout)
    return MemorySnapshotStore()


class GraphQLApp(GraphQL[Context, None]):
    """Strawberry's ASGI GraphQL app with runsgate's per-request ``Context``; responses encoded by orjson."""

    def encode_json(self, data: object) -> str | bytes:
        """Response bodies through orjson, several times faster than ``json.dumps`` (bench/RESULTS.md).

        What orjson refuses (an integer beyond 64 bits in a tool call's ``args``) goes through
        ``json.dumps`` as before.
        """
        try:
            return orjson.dumps(data)
        except TypeError:
            return json.dumps(data)

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
        ConfigError: Invalid environment (when ``settings`` is not given).
    """
    settings = settings or load_settings()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        agents = load_registry(settings.agents)
        store = make_store(settings)
        await store.open()
        if settings.seed_runs:
            await _seed_at_start(store, settings)
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
        try:
            yield
        finally:
            await store.close()

    graphql = GraphQLApp(schema, graphql_ide="graphiql" if settings.graphiql else None)
    routes = [
        Route("/graphql", graphql, methods=["GET", "POST"]),
        WebSocketRoute("/graphql", graphql),
        Route("/healthz", healthz),
        Route("/readyz", readyz),
    ]
    if settings.bench_endpoints:
        from .raw_page import raw_page

        routes.append(Route("/bench/raw-page", raw_page, methods=["POST"]))
    return Starlette(routes=routes, lifespan=lifespan)


async def _seed_at_start(store: SnapshotStore, settings: Settings) -> None:
    """``RUNSGATE_SEED_RUNS``: fill the memory store with generated runs before serving (benchmarks)."""
    from .seed import SeedPlan, seed_store

    plan = SeedPlan(runs=settings.seed_runs, agents=settings.seed_agents, threads=settings.seed_threads)
    logger.info("seeding %d suspended runs into the memory store", plan.runs)
    await seed_store(store, plan)
    # The generated runs live as long as the process: move them to the permanent generation, so
    # the cyclic collector never walks a million documents again (pauses of seconds otherwise).
    gc.collect()
    gc.freeze()
