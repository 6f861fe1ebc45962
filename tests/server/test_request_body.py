"""A request body is decoded once, and every parameter's type is checked before use.

GraphQL over HTTP, "Request Parameters": ``query`` and ``operationName`` are strings,
``variables`` and ``extensions`` objects; each may be null or absent. A request or batch item
breaking this gets a 400 naming the field (``server.view.conformance.request_problem``), through
HTTP, with and without compiled execution.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from server.app import GraphQLApp, create_app
from server.settings import DEMO_AGENTS, Settings

from .._graphql import refusal_message

QUERY = "{ agents { id } }"


@pytest.fixture(params=[True, False], ids=["compiled", "standard"])
async def client(request: pytest.FixtureRequest) -> AsyncIterator[httpx.AsyncClient]:
    app: Starlette = create_app(
        Settings(agents=DEMO_AGENTS, mongodb_uri=None, auth=False, max_batch=3, compiled_execution=request.param)
    )
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as http,
    ):
        yield http


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"query": 5}, "The GraphQL operation's `query` must be a string or null, if provided."),
        (
            {"query": QUERY, "operationName": ["x"]},
            "The GraphQL operation's `operationName` must be a string or null, if provided.",
        ),
        (
            {"query": QUERY, "variables": [1]},
            "The GraphQL operation's `variables` must be an object or null, if provided.",
        ),
        (
            {"query": QUERY, "extensions": "x"},
            "The GraphQL operation's `extensions` must be an object or null, if provided.",
        ),
        (
            [{"query": QUERY}, {"query": ["x"]}],
            "Batch item 1: The GraphQL operation's `query` must be a string or null, if provided.",
        ),
        (
            [{"query": QUERY, "operationName": 5}],
            "Batch item 0: The GraphQL operation's `operationName` must be a string or null, if provided.",
        ),
        (
            [{"query": QUERY, "variables": []}],
            "Batch item 0: The GraphQL operation's `variables` must be an object or null, if provided.",
        ),
        (
            [{"query": QUERY}, {"query": QUERY, "extensions": 3}],
            "Batch item 1: The GraphQL operation's `extensions` must be an object or null, if provided.",
        ),
        ([{"query": QUERY}, 5], "The request body must be a JSON object, or a list of them for a batch."),
    ],
)
async def test_a_parameter_of_the_wrong_type_is_a_400_naming_it(
    client: httpx.AsyncClient, body: Any, message: str
) -> None:
    # the well-formed request first, so that the compiled app has it prepared
    assert (await client.post("/graphql", json={"query": QUERY})).status_code == 200
    answer = await client.post("/graphql", json=body)
    assert refusal_message(answer) == message


async def test_well_formed_requests_and_batches_are_answered(client: httpx.AsyncClient) -> None:
    single = await client.post("/graphql", json={"query": QUERY, "operationName": None, "variables": None})
    batch = await client.post("/graphql", json=[{"query": QUERY}, {"query": QUERY, "variables": {}, "extensions": {}}])
    assert single.status_code == batch.status_code == 200
    assert [item["data"] for item in batch.json()] == [single.json()["data"]] * 2


@pytest.mark.parametrize(
    "body",
    [
        {"query": QUERY},  # prepared after the first request (compiled app)
        {"query": QUERY, "operationName": "Missing"},  # never prepared: Strawberry's parsing
        [{"query": QUERY}, {"query": QUERY}],
        {"query": QUERY, "variables": [1]},
    ],
    ids=["prepared", "unprepared", "batch", "malformed"],
)
async def test_a_body_is_decoded_once(client: httpx.AsyncClient, body: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[object] = []
    decode_json = GraphQLApp.decode_json

    def counting(self: GraphQLApp, data: str | bytes) -> object:
        decoded.append(data)
        return decode_json(self, data)

    monkeypatch.setattr(GraphQLApp, "decode_json", counting)
    for _ in range(3):
        decoded.clear()
        await client.post("/graphql", content=json.dumps(body), headers={"content-type": "application/json"})
        assert len(decoded) == 1, decoded


async def test_a_body_that_is_not_json_is_decoded_once(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[object] = []
    decode_json = GraphQLApp.decode_json

    def counting(self: GraphQLApp, data: str | bytes) -> object:
        calls.append(data)
        return decode_json(self, data)

    monkeypatch.setattr(GraphQLApp, "decode_json", counting)
    answer = await client.post("/graphql", content=b'{"query": ', headers={"content-type": "application/json"})
    assert refusal_message(answer) == "Unable to parse request body as JSON"
    assert len(calls) == 1
