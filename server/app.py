"""The Starlette application: ``/graphql``, ``/inbox``, ``/healthz``, ``/readyz``, ``/metrics`` (docs/operations.md).

The lifespan owns the resources: it opens the store named by ``RUNSGATE_STORE`` (the memory
store, a SQLite file, or one ``AsyncMongoClient`` per process; it refuses a store holding a newer
``schemaVersion``), loads the agents,
builds the ``RunManager`` and starts the ``StalledRunSweeper`` (unless
``RUNSGATE_SWEEP_INTERVAL=0``) and, when ``RUNSGATE_WEBHOOKS`` names receivers, the
``WebhookDispatcher``; requests get them through ``app.state``.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import orjson
from pydantic import TypeAdapter, ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL

from resolvers import Context, build_schema
from runtime import (
    AgentRegistry,
    EventFeed,
    RunManager,
    RunUpdateFeed,
    StalledRunSweeper,
    ToolApprovalRule,
    WebhookDispatcher,
    default_tool_rules,
    load_registry,
    tool_rule_problems,
)
from storage import (
    MemorySnapshotStore,
    NewerSchemaError,
    SnapshotStore,
    SQLiteSnapshotStore,
    StoreUnavailableError,
    strict_json,
)
from storage.sqlite import DEFAULT_BUSY_TIMEOUT

from ._view import AuthenticatedView, principal_of
from .auth import Authenticator
from .config import ConfigError, Settings, describe_error, load_settings
from .frames import NoFraming
from .graphql_view import GRAPHIQL_ASSETS_DIR, GRAPHIQL_ASSETS_PATH, GraphQLView
from .hosts import LoopbackHostsOnly
from .inbox import INBOX_ASSETS_DIR, INBOX_ASSETS_PATH, inbox
from .limits import BodySizeLimit, graphql_extensions
from .logs import configure_logging
from .metrics import count_webhook_attempt, metrics
from .request_id import request_id_middleware
from .security_settings import ToolRuleConfig, security_problems
from .tracing import start_tracing

logger = logging.getLogger("runsgate")


def make_store(settings: Settings) -> SnapshotStore:
    """The store ``settings.store_url`` names: a SQLite file, MongoDB, or the in-memory store
    (lost on restart).

    A SQLite write waits for the database lock at most ``min(2 s, subscription_lookback / 2)``,
    so an event that waited is still within the subscription feed's lookback (``storage.sqlite``).
    """
    if settings.sqlite_path is not None:
        busy = min(DEFAULT_BUSY_TIMEOUT, settings.subscription_lookback / 2)
        return SQLiteSnapshotStore(settings.sqlite_path, busy_timeout=busy)
    if settings.mongodb_uri:
        from storage.mongo import MongoSnapshotStore  # PyMongo is imported only for a MongoDB store

        return MongoSnapshotStore(settings.mongodb_uri, server_selection_timeout=settings.mongodb_timeout)
    return MemorySnapshotStore()


def store_problem(settings: Settings) -> str | None:
    """Why the configured SQLite store cannot be used, in one line naming the file, or ``None``.

    Opens the file once before serving (creating it and its tables if missing), so that a path
    that cannot be opened or written, a file that is not a runsgate database, or one of a newer
    schema version stops ``runsgate serve`` with one line instead of a failed lifespan. Other
    stores are checked by the lifespan.
    """
    if settings.sqlite_path is None:
        return None

    async def check() -> None:
        store = make_store(settings)
        await store.open()
        await store.close()

    try:
        asyncio.run(check())
    except (StoreUnavailableError, NewerSchemaError) as exc:
        return f"runsgate cannot start: {exc}"
    return None


class GraphQLApp(AuthenticatedView, GraphQLView):
    """The ``/graphql`` view (``graphql_view.py``) with runsgate's per-request ``Context``, behind
    authentication (``server/_view.py``)."""

    def encode_json(self, data: object) -> str | bytes:
        """Response bodies and WebSocket messages through orjson rather than ``json.dumps``, for
        speed.

        Returned as text: Strawberry sends bytes over a WebSocket as a binary frame, and
        ``graphql-transport-ws`` clients (graphql-ws) only read text frames. What orjson refuses
        (an integer beyond 64 bits in a tool call's ``args``) goes through ``json``. Both write
        RFC 8259 JSON: a float that is not finite (only a document an older runsgate stored can
        hold one) is ``null`` (``storage.strict_json.dumps_shown``).
        """
        try:
            return orjson.dumps(data).decode()
        except TypeError:
            return strict_json.dumps_shown(data)

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
            max_prompt_bytes=settings.max_prompt_bytes,
            max_reason_bytes=settings.max_reason_bytes,
            max_bulk_decisions=settings.max_bulk_decisions,
            request=request,
            response=response,
            events=state.events,
            run_updates=state.run_updates,
            webhook_endpoints=state.webhook_endpoints,
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


def tool_rules(settings: Settings, agents: AgentRegistry) -> list[ToolApprovalRule]:
    """The per-tool rules in force: ``RUNSGATE_TOOL_RULES`` when set (even to ``[]``), else the
    agents' module's default rules (``TOOL_RULES`` beside the registry, e.g. the demo agents'),
    else none; checked against the registered agents' tools (``runtime.tool_rule_problems``).

    Raises:
        ConfigError: A rule is invalid or names a tool or argument the agents do not have; the
            message names ``RUNSGATE_TOOL_RULES`` (or the module whose ``TOOL_RULES`` it is).
    """
    configured: list[ToolRuleConfig] = settings.tool_rules
    source = "RUNSGATE_TOOL_RULES"
    if "tool_rules" not in settings.model_fields_set:
        try:
            defaults = default_tool_rules(settings.agents)
        except ValueError as exc:
            raise ConfigError(f"invalid configuration: RUNSGATE_AGENTS: {exc}") from None
        if defaults is not None:
            source = f"RUNSGATE_TOOL_RULES (unset: the default rules {settings.agents.partition(':')[0]}.TOOL_RULES)"
            try:
                configured = TypeAdapter(list[ToolRuleConfig]).validate_python(defaults)
            except ValidationError as exc:
                wrong = "; ".join(describe_error(e, f"rule {e['loc'][0] if e['loc'] else '?'}") for e in exc.errors())
                raise ConfigError(f"invalid configuration: {source}: {wrong}") from None
    rules = [ToolApprovalRule(**rule.model_dump()) for rule in configured]
    problems = tool_rule_problems(rules, agents)
    if problems:
        raise ConfigError(f"invalid configuration: {source}: " + "; ".join(problems))
    return rules


def check_webhook_agents(settings: Settings, agents: AgentRegistry) -> None:
    """Every ``agentIds`` of ``RUNSGATE_WEBHOOKS`` names a registered agent (a typo would leave a
    receiver without the events it was meant to get).

    Raises:
        ConfigError: A receiver names an agent that is not registered.
    """
    for number, hook in enumerate(settings.webhooks):
        unknown = sorted(set(hook.agentIds or ()) - set(agents.ids()))
        if unknown:
            raise ConfigError(
                f"invalid configuration: RUNSGATE_WEBHOOKS[{number}].agentIds: not registered agents: {unknown}"
            )


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
        rules = tool_rules(settings, agents)  # refused before the store is opened
        check_webhook_agents(settings, agents)
        store = make_store(settings)
        try:
            await store.open()
        except NewerSchemaError as exc:
            logger.critical("runsgate cannot start: %s", exc)
            raise
        if settings.seed_runs:
            await _seed_at_start(store, settings)
        app.state.settings = settings
        app.state.store = store
        app.state.webhook_endpoints = {w.to_endpoint().id: w.url for w in settings.webhooks}
        app.state.runs = RunManager(
            store,
            agents,
            instance_id=settings.instance_id,
            claim_ttl=settings.claim_ttl,
            model=settings.model,
            tool_rules=rules,
            bulk_concurrency=settings.bulk_concurrency,
            update_interval=settings.run_updates_interval,
        )
        app.state.events = EventFeed(
            store, poll_interval=settings.subscription_poll_interval, lookback=settings.subscription_lookback
        )
        app.state.run_updates = RunUpdateFeed(
            app.state.runs,
            app.state.events,
            poll_interval=settings.run_updates_poll_interval,
            max_buffer_bytes=settings.run_updates_max_buffer_bytes,
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
        sweeping = None
        if settings.sweep_interval > 0:
            sweeper = StalledRunSweeper(
                app.state.runs, interval=settings.sweep_interval, update_retention=settings.run_updates_retention
            )
            sweeping = asyncio.create_task(sweeper.run_forever(), name="runsgate-sweeper")
        dispatcher = dispatching = None
        if settings.webhooks:
            dispatcher = WebhookDispatcher(
                store,
                agent_ids=agents.ids(),
                endpoints=[webhook.to_endpoint() for webhook in settings.webhooks],
                instance_id=settings.instance_id,
                public_url=settings.inbox_base_url,
                poll_interval=settings.webhook_poll_interval,
                lookback=settings.subscription_lookback,
                retry=settings.retry_policy,
                connect_timeout=settings.webhook_connect_timeout,
                read_timeout=settings.webhook_read_timeout,
                on_attempt=count_webhook_attempt,
            )
            dispatching = asyncio.create_task(dispatcher.run_forever(), name="runsgate-webhooks")
            logger.info("webhooks: %d receiver(s)", len(settings.webhooks))
        try:
            yield
        finally:
            if sweeping is not None:
                sweeping.cancel()
                await asyncio.wait([sweeping])
            if dispatcher is not None and dispatching is not None:
                dispatching.cancel()
                await asyncio.wait([dispatching])
                await dispatcher.close()
            await app.state.runs.close()  # queued continuations: left to the sweepers
            await app.state.events.close()
            await store.close()
            tracing.shutdown()

    tracing = start_tracing(settings)  # nothing of OpenTelemetry is loaded unless configured
    graphql = GraphQLApp(
        build_schema(
            extensions=graphql_extensions(settings),
            max_batch=settings.max_batch,
            extra_extensions=tracing.extensions if tracing.enabled else (),
            compiled_execution=settings.compiled_execution,
        ),
        graphql_ide="graphiql" if settings.graphiql else None,
        subscription_protocols=[GRAPHQL_TRANSPORT_WS_PROTOCOL],
        max_subscriptions_per_connection=settings.max_ws_operations,
        # an unauthenticated socket is not kept long
        connection_init_wait_timeout=timedelta(seconds=settings.ws_connection_init_timeout),
    )
    graphql.authenticator = Authenticator.from_settings(settings)
    routes = [
        Route("/graphql", graphql, methods=["GET", "POST"]),
        WebSocketRoute("/graphql", graphql),
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/inbox", inbox),
        Mount(INBOX_ASSETS_PATH, StaticFiles(directory=INBOX_ASSETS_DIR)),
        *([Route("/metrics", metrics)] if settings.metrics else []),
        *([Mount(GRAPHIQL_ASSETS_PATH, StaticFiles(directory=GRAPHIQL_ASSETS_DIR))] if settings.graphiql else []),
    ]
    if settings.bench_endpoints:
        from .raw_page import raw_page

        routes.append(Route("/bench/raw-page", raw_page, methods=["POST"]))
    hosts = [] if settings.auth else [Middleware(LoopbackHostsOnly, extra_names=settings.allowed_hosts)]
    return Starlette(
        routes=routes,
        lifespan=lifespan,
        # the request id first, so that even a 413 carries one
        middleware=[
            request_id_middleware(),
            *hosts,  # with authentication off, only this machine's names (DNS rebinding)
            Middleware(NoFraming),  # no HTML page of runsgate may be framed
            Middleware(BodySizeLimit, max_bytes=settings.max_body_bytes),
        ],
    )


def worker_app() -> Starlette:
    """The app of one ``runsgate serve --workers N`` process (uvicorn's factory), from the environment
    ``server.cli`` prepared; its instance id is the command's, suffixed with this process's id.

    Raises:
        ConfigError: As ``create_app``.
    """
    settings = load_settings()
    configure_logging(settings.log_level, settings.log_format)  # a spawned process starts with none
    parent = os.environ.get("RUNSGATE_WORKER_OF", settings.instance_id)
    return create_app(settings.model_copy(update={"instance_id": f"{parent}-w{os.getpid()}"}))


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
