"""The Starlette application: ``/graphql``, ``/inbox``, ``/healthz``, ``/readyz``, ``/metrics``
(docs/operations.md), composed over the process's ``Services`` (``server.services``), which its
lifespan starts and stops; requests reach them through ``app.state``.
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.types.unset import UnsetType

from resolvers import Context, RequestLimits, build_schema
from resolvers.metrics import set_operation_names
from runtime import UNAUTHENTICATED
from storage import SnapshotStore, StoreUnavailableError

from .auth import Authenticator
from .http.frames import NoFraming
from .http.hosts import LoopbackHostsOnly
from .http.http_errors import routing_refusal
from .http.limits import BodySizeLimit, graphql_extensions
from .http.request_id import request_id_middleware
from .inbox import INBOX_ASSETS_DIR, INBOX_ASSETS_PATH, inbox
from .links import Links, link_signer
from .observability.logs import configure_logging
from .observability.metrics import metrics, process_metrics
from .observability.tracing import start_tracing
from .services import Services
from .settings import ConfigError, Settings, load_settings, security_problems
from .view.authenticated import PRINCIPAL_KEY, AuthenticatedView
from .view.conformance import GRAPHQL_METHODS
from .view.graphiql import GRAPHIQL_ASSETS_DIR, GRAPHIQL_ASSETS_PATH
from .view.graphql_view import GraphQLView
from .view.ws_handler import PrincipalStreams, WsHandler
from .view.ws_handler import missing as ws_hooks_missing

logger = logging.getLogger("runsgate")


class GraphQLApp(AuthenticatedView, GraphQLView):
    """The ``/graphql`` view (``graphql_view.py``) with runsgate's per-request ``Context``, behind
    authentication (``server/view/authenticated.py``), and its WebSocket handler (``server/view/ws_handler.py``)."""

    graphql_transport_ws_handler_class = WsHandler

    streams: PrincipalStreams | None = None
    """The WebSockets and operations of each principal (``server.view.ws_handler``), set by
    ``create_app``; None: not bounded per principal."""

    async def on_ws_connect(self, context: Context) -> UnsetType | dict[str, object] | None:
        """Authenticate the socket (``server.view.authenticated``), then admit it for its principal.

        Raises:
            TooManyWebSocketsError: The principal has ``RUNSGATE_MAX_WS_CONNECTIONS_PER_PRINCIPAL``
                sockets already (``WsHandler`` closes it with 1013).
        """
        answer = await super().on_ws_connect(context)
        if self.streams is not None:
            self.streams.admit(context)
        return answer

    async def get_context(self, request: Request | WebSocket, response: Any = None) -> Context:
        state = request.app.state
        context = Context(
            store=state.store,
            runs=state.runs,
            agents=state.agents,
            principal=request.scope.get(PRINCIPAL_KEY, UNAUTHENTICATED),
            limits=state.limits,
            request=request,
            response=response,
            events=state.events,
            run_updates=state.run_updates,
            webhook_endpoints=state.webhook_endpoints,
        )
        if isinstance(request, Request):  # released once its answer is built (PreparedView.run)
            request.state.graphql_contexts = [*getattr(request.state, "graphql_contexts", ()), context]
        return context


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


def settle_memory() -> None:
    """Collect the garbage of the start, then move every object still alive (modules, the
    schema, the agents: what lives as long as the process) to the garbage collector's permanent
    generation (``gc.freeze``), so that a full collection, which a burst of large answers sets
    off, walks only what requests made (why: docs/architecture.md "Requests and answers"). Every
    process of ``runsgate serve`` calls it once started: the only one, or each of ``--workers``."""
    gc.collect()
    gc.freeze()


def _link_routes(settings: Settings) -> list[Route]:
    """``GET /links/{token}`` and ``POST /links`` when ``RUNSGATE_LINK_SECRET`` is set (server/links.py)."""
    signer = link_signer(settings)
    if signer is None:
        return []
    links = Links(settings, signer)
    return [Route("/links/{token}", links.show, methods=["GET"]), Route("/links", links.decide, methods=["POST"])]


def create_app(
    settings: Settings | None = None, *, store: SnapshotStore | None = None, settle: bool = False
) -> Starlette:
    """Build the app: its routes and middleware over ``Services``. Settings come from the
    environment unless given; ``store`` replaces the store they name (the app opens and closes it);
    ``settle``: ``settle_memory`` once its lifespan started (a ``--workers`` process; one
    process of ``runsgate serve`` settles once uvicorn started it, ``server.cli.serve.Server``).

    Raises:
        ConfigError: Invalid environment (when ``settings`` is not given), or security settings
            that do not fit ``settings.host`` (e.g. authentication off on a non-loopback host).
    """
    settings = settings or load_settings()
    problems = security_problems(settings, settings.host)
    if problems:
        raise ConfigError("invalid configuration: " + "; ".join(problems))

    tracing = start_tracing(settings)  # nothing of OpenTelemetry is loaded unless configured
    set_operation_names(settings.metrics_operation_names)
    gone = ws_hooks_missing()
    if gone:
        logger.warning(
            "strawberry-graphql lacks or changed %s: a WebSocket operation whose document cannot run is "
            "answered as Strawberry does (a syntax error or an unknown operation name closes the socket with "
            "4400) instead of with an error message",
            ", ".join(gone),
        )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            async with Services(settings, store=store) as services:
                services.expose(app.state)
                if settle:
                    settle_memory()
                async with process_metrics(app.state):
                    yield
        finally:
            tracing.shutdown()

    schema = build_schema(
        extensions=graphql_extensions(settings),
        max_batch=settings.max_batch,
        extra_extensions=tracing.extensions if tracing.enabled else (),
        compiled_execution=settings.compiled_execution,
    )
    graphql = GraphQLApp(
        schema,
        graphql_ide="graphiql" if settings.graphiql else None,
        subscription_protocols=[GRAPHQL_TRANSPORT_WS_PROTOCOL],
        max_subscriptions_per_connection=settings.max_ws_operations,
        # an unauthenticated socket is not kept long
        connection_init_wait_timeout=timedelta(seconds=settings.ws_connection_init_timeout),
    )
    graphql.authenticator = Authenticator.from_settings(settings)
    graphql.max_response_bytes = settings.max_response_bytes
    graphql.streams = PrincipalStreams(
        max_sockets=settings.max_ws_connections_per_principal, max_operations=settings.max_ws_operations_per_principal
    )
    if settings.compiled_execution:  # else the fast path is never imported
        from .view.prepared_http import PreparedRequests

        graphql.prepared = PreparedRequests.of(schema)
    graphql_route = Route("/graphql", graphql, methods=GRAPHQL_METHODS)
    # without the HEAD Starlette adds to a route of GET: the view does not serve it, so HEAD gets
    # the 405 of any other method, whose Allow lists these
    graphql_route.methods = set(GRAPHQL_METHODS)
    routes = [
        graphql_route,
        WebSocketRoute("/graphql", graphql),
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/inbox", inbox),
        *_link_routes(settings),
        Mount(INBOX_ASSETS_PATH, StaticFiles(directory=INBOX_ASSETS_DIR)),
        *([Route("/metrics", metrics)] if settings.metrics else []),
        *([Mount(GRAPHIQL_ASSETS_PATH, StaticFiles(directory=GRAPHIQL_ASSETS_DIR))] if settings.graphiql else []),
    ]
    hosts = [] if settings.auth else [Middleware(LoopbackHostsOnly, extra_names=settings.allowed_hosts)]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: routing_refusal},  # JSON errors, as every refusal
        # the request id first, so that even a 413 carries one
        middleware=[
            *tracing.middleware,  # outermost: a request's span covers all it goes through
            request_id_middleware(),
            *hosts,  # with authentication off, only this machine's names (DNS rebinding)
            Middleware(NoFraming),  # no HTML page of runsgate may be framed
            Middleware(BodySizeLimit, max_bytes=settings.max_body_bytes),
        ],
    )
    app.state.principal_streams = graphql.streams  # /metrics counts its sockets and operations
    app.state.tracing = tracing
    app.state.limits = RequestLimits.of(settings)  # every request's Context holds them
    return app


def worker_settings() -> Settings:
    """The settings of one ``runsgate serve --workers N`` process, from the environment
    ``server.cli.serve`` prepared (logging configured): its instance id is the command's,
    suffixed with this process's id.

    Raises:
        ConfigError: Invalid environment.
    """
    settings = load_settings()
    configure_logging(settings.log_level, settings.log_format)  # a spawned process starts with none
    parent = os.environ.get("RUNSGATE_WORKER_OF", settings.instance_id)
    return settings.model_copy(update={"instance_id": f"{parent}-w{os.getpid()}"})


def worker_app() -> Starlette:
    """The app of one ``runsgate serve --workers N`` process (uvicorn's factory).

    Raises:
        ConfigError: As ``create_app``.
    """
    return create_app(worker_settings(), settle=True)
