"""Fixtures of the HTTP tests: the app over each store, and an httpx client speaking to it.

Every test talks to ``create_app(settings)`` through ``httpx.ASGITransport`` with the app's
lifespan entered, once with the memory store, once with a fresh SQLite file and once with
MongoDB (FerretDB, or ``MONGODB_URI``) on a fresh database. Authentication is on: the client sends the API key of
``tests._auth.ADMIN`` (every scope, every run).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from pydantic_ai import models
from starlette.applications import Starlette

from runtime.demo import LEDGER
from server.app import create_app
from server.config import Settings
from server.security_settings import ApiKeyConfig

from .._auth import ADMIN
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
