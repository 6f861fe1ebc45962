"""Fixtures of the HTTP tests: the app over each store, and an httpx client speaking to it.

Every test talks to ``create_app(settings)`` through ``httpx.ASGITransport`` with the app's
lifespan entered, once with the memory store, once with a fresh SQLite file and once with
MongoDB (FerretDB, or ``MONGODB_URI``) on a fresh database. Authentication is on: the client sends the API key of
``tests._auth.ADMIN`` (every scope, every run).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any

import httpx
import pytest
from pydantic_ai import models
from starlette.applications import Starlette

from runtime.demo import LEDGER
from server.app import create_app
from server.settings import ApiKeyConfig, Settings, ToolRuleConfig

from .._auth import ADMIN, TestKey
from .._graphql import GraphQLClient
from ..runtime import agents

models.ALLOW_MODEL_REQUESTS = False  # the demo agents' scripted FunctionModels only


@pytest.fixture(autouse=True)
def _empty_ledger() -> Iterator[None]:
    """``runtime.demo.LEDGER`` is process-wide: every test starts with no refund issued."""
    LEDGER.clear()
    yield
    LEDGER.clear()


@pytest.fixture
def clean_test_agents() -> Iterator[None]:
    """The runtime tests' agents (``tests.runtime.agents``) keep process-wide records: a test
    serving them starts and ends with them reset."""
    agents.reset()
    yield
    agents.reset()


@pytest.fixture(params=["memory", "sqlite", pytest.param("mongo", marks=pytest.mark.mongo)])
def settings(request: pytest.FixtureRequest) -> Settings:
    """The app's settings: the memory store, then a fresh SQLite file, then MongoDB on a fresh database."""
    uri = request.getfixturevalue("mongodb_uri") if request.param == "mongo" else None
    store = f"sqlite:///{request.getfixturevalue('sqlite_path')}" if request.param == "sqlite" else None
    return Settings(
        store=store,
        mongodb_uri=uri,
        agents="runtime.demo:AGENTS",
        max_page_size=100,
        graphiql=True,
        api_keys=[ApiKeyConfig.model_validate(ADMIN.entry())],
    )


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[Starlette]:
    """``create_app(settings)`` with its lifespan running; a MongoDB database is dropped afterwards."""
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        try:
            yield application
        finally:
            if settings.mongodb_uri:
                await application.state.store.drop_all()


@pytest.fixture
async def http(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client talking to the app in-process, authenticated as ``ADMIN``."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost", headers=ADMIN.headers
    ) as client:
        yield client


@pytest.fixture
def gql(http: httpx.AsyncClient) -> GraphQLClient:
    """POSTs GraphQL documents to ``/graphql``."""
    return GraphQLClient(http)


Serve = Callable[..., Awaitable["Served"]]
"""``await serve(agents=..., tool_rules=[...], keys=[...], sweep_interval=...)``: see ``serve``."""


class Served:
    """An app with its lifespan running, and a GraphQL client per API key."""

    def __init__(self, app: Starlette, opened: list[httpx.AsyncClient]) -> None:
        self.app = app
        self._opened = opened

    def client(self, key: TestKey = ADMIN) -> GraphQLClient:
        """A client of the app authenticated with ``key`` (closed with the app)."""
        http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url="http://test", headers=key.headers
        )
        self._opened.append(http)
        return GraphQLClient(http)


class Apps:
    """Apps over one kind of store (``memory``, ``sqlite``, ``mongo``), closed together."""

    def __init__(self, request: pytest.FixtureRequest, kind: str) -> None:
        self._request = request
        self._kind = kind
        self._started: list[tuple[Starlette, Any]] = []
        self._clients: list[httpx.AsyncClient] = []

    async def start(
        self, *, keys: Sequence[TestKey] = (), tool_rules: Sequence[dict[str, Any]] | None = None, **fields: Any
    ) -> Served:
        """``create_app`` with its lifespan running: over a fresh SQLite file or MongoDB database
        unless ``fields`` name a store; ``keys`` are the API keys it knows (``ADMIN`` always),
        ``tool_rules`` the rules as ``RUNSGATE_TOOL_RULES`` lists them; any other keyword is a
        ``Settings`` field."""
        if tool_rules is not None:
            fields["tool_rules"] = [ToolRuleConfig.model_validate(rule) for rule in tool_rules]
        if "store" not in fields and "mongodb_uri" not in fields:
            if self._kind == "sqlite":
                fields["store"] = f"sqlite:///{self._request.getfixturevalue('sqlite_path')}"
            elif self._kind == "mongo":
                fields["mongodb_uri"] = self._request.getfixturevalue("mongodb_uri")
        settings = Settings(
            max_page_size=100,
            api_keys=[ApiKeyConfig.model_validate(key.entry()) for key in (ADMIN, *keys)],
            **{"agents": "runtime.demo:AGENTS", "sweep_interval": 0, **fields},
        )
        application = create_app(settings)
        lifespan = application.router.lifespan_context(application)
        await lifespan.__aenter__()
        self._started.append((application, lifespan))
        return Served(application, self._clients)

    async def close(self) -> None:
        for http in reversed(self._clients):
            await http.aclose()
        for application, lifespan in reversed(self._started):
            try:
                if self._kind == "mongo":
                    await application.state.store.drop_all()
            finally:
                await lifespan.__aexit__(None, None, None)


@pytest.fixture(params=["memory", "sqlite", pytest.param("mongo", marks=pytest.mark.mongo)])
async def serve(request: pytest.FixtureRequest) -> AsyncIterator[Serve]:
    """``serve(**settings)`` (``Apps.start``): an app over the memory store, then a fresh SQLite
    file, then MongoDB on a fresh database, its lifespan running until the test ends."""
    apps = Apps(request, request.param)
    try:
        yield apps.start
    finally:
        await apps.close()
