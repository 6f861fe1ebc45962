"""A fault that escapes execution on the standard path (not a resolver's: graphql-core's
``execute`` itself, or an extension hook, raising) is answered as an unexpected error.

Strawberry's ``Schema.execute`` turns such an exception into ``GraphQLError(str(exc))`` after its
extensions' hooks have been left, so ``ErrorMasking`` never sees it, and the error has no path,
which ``resolvers.schema.should_mask_error`` keeps for the client: the exception's own words reach
the client and no traceback is logged. Found while giving prepared mutations their answer to a
late fault (``resolvers.fastpath.prepared.fault_result``, which masks).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import httpx
import pytest
import strawberry.schema.schema
from starlette.applications import Starlette

from server.app import create_app
from server.settings import DEMO_AGENTS, Settings
from storage import StoreUnavailableError


@pytest.fixture
async def app() -> AsyncIterator[Starlette]:
    application = create_app(Settings(agents=DEMO_AGENTS, mongodb_uri=None, auth=False, compiled_execution=False))
    async with application.router.lifespan_context(application):
        yield application


async def test_a_fault_escaping_execution_is_masked_and_logged(
    app: Starlette, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("internal detail: /srv/secret")

    monkeypatch.setattr(strawberry.schema.schema, "execute", broken)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as client:
        with caplog.at_level(logging.INFO):
            response = await client.post("/graphql", json={"query": "{ agents { id } }"})

    assert "secret" not in response.text
    assert response.json()["errors"][0]["message"] == "Unexpected error."
    assert [r for r in caplog.records if r.exc_info and "secret" in str(r.exc_info[1])]


async def test_a_store_outage_escaping_execution_is_answered_as_one(
    app: Starlette, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> object:
        raise StoreUnavailableError("mongodb://operator:secret@db.internal")

    monkeypatch.setattr(strawberry.schema.schema, "execute", broken)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as client:
        response = await client.post("/graphql", json={"query": "{ agents { id } }"})

    assert "secret" not in response.text
    assert response.json()["errors"][0]["extensions"]["code"] == "STORE_UNAVAILABLE"


async def test_a_client_mistake_outside_execution_is_still_shown(app: Starlette) -> None:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as client:
        response = await client.post("/graphql", json={"query": "{ agents { nope } }"})

    assert "nope" in response.json()["errors"][0]["message"]
