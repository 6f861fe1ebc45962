"""A document of several operations sent without ``operationName`` is a request error
(GraphQL spec "GetOperation"; ``resolvers/documents/operation_name.py``), on the compiled and the standard
execution paths: nothing in it executes. Naming an operation runs that one only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from resolvers.documents.operation_name import MESSAGE
from runtime.demo import LEDGER
from server.app import create_app
from server.settings import Settings
from tests._graphql import data, ws_connect
from tests._servers import runsgate_process

GRAPHQL_RESPONSE = "application/graphql-response+json"
START_THEN_LIST = """
mutation Start { startRun(input: {agentId: "refund-agent", prompt: "Please refund order 1044"}) {
  ... on RunOutcome { status } } }
query Agents { agents { id } }
"""
TWO_QUERIES = "query A { agents { id } } query B { agents { name } }"
COUNT = '{ suspendedRuns(agentId: "refund-agent") { totalCount } }'


@pytest.fixture(params=[True, False], ids=["compiled", "standard"])
async def http(request: pytest.FixtureRequest) -> AsyncIterator[httpx.AsyncClient]:
    app: Starlette = create_app(
        Settings(mongodb_uri=None, agents="runtime.demo:AGENTS", auth=False, compiled_execution=request.param)
    )
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as client,
    ):
        yield client


async def _post(http: httpx.AsyncClient, body: dict[str, Any], accept: str = "application/json") -> httpx.Response:
    return await http.post("/graphql", json=body, headers={"accept": accept})


async def test_a_mutation_beside_a_query_without_operation_name_runs_nothing(http: httpx.AsyncClient) -> None:
    response = await _post(http, {"query": START_THEN_LIST})

    assert response.status_code == 200
    body = response.json()
    assert "data" not in body
    assert [error["message"] for error in body["errors"]] == [MESSAGE]
    assert LEDGER == []  # the demo's $15.50 refund would have been issued at once

    spec_client = await _post(http, {"query": START_THEN_LIST}, accept=GRAPHQL_RESPONSE)
    assert spec_client.status_code == 400
    assert [error["message"] for error in spec_client.json()["errors"]] == [MESSAGE]
    assert LEDGER == []


async def test_several_queries_without_operation_name_are_refused_every_time(http: httpx.AsyncClient) -> None:
    for _ in range(3):  # a repeated query may be served as a prepared operation
        response = await _post(http, {"query": TWO_QUERIES})
        assert response.json() == {
            "errors": [{"message": MESSAGE, "extensions": {"code": "OPERATION_RESOLUTION_FAILURE"}}]
        }
        by_get = await http.get("/graphql", params={"query": TWO_QUERIES})
        assert by_get.json() == {
            "errors": [{"message": MESSAGE, "extensions": {"code": "OPERATION_RESOLUTION_FAILURE"}}]
        }


async def test_the_named_operation_runs_and_only_it(http: httpx.AsyncClient) -> None:
    for _ in range(3):
        named = await _post(http, {"query": TWO_QUERIES, "operationName": "B"})
        assert named.status_code == 200
        assert named.json()["data"]["agents"][0] == {"name": "refund-agent"}

    agents = await _post(http, {"query": START_THEN_LIST, "operationName": "Agents"})
    assert "id" in agents.json()["data"]["agents"][0]
    assert LEDGER == []
    started = await _post(http, {"query": START_THEN_LIST, "operationName": "Start"})
    assert started.json() == {
        "data": {"startRun": {"status": "COMPLETED"}},
        "extensions": {"cost": {"requestedQueryCost": 11, "maximumAvailable": 10_000}},
    }
    assert LEDGER == [{"orderId": 1044, "amount": 15.5}]


async def test_a_single_operation_needs_no_name(http: httpx.AsyncClient) -> None:
    for _ in range(2):
        response = await _post(http, {"query": COUNT})
        assert response.json() == {
            "data": {"suspendedRuns": {"totalCount": 0}},
            "extensions": {"cost": {"requestedQueryCost": 2, "maximumAvailable": 10_000}},
        }


@pytest.mark.process
async def test_over_websocket_too(tmp_path: Path) -> None:
    suspend_then_list = START_THEN_LIST.replace("1044", "1042")  # $49.90: it would wait, listed
    with runsgate_process(tmp_path / "server.log") as url:
        async with ws_connect(url) as socket:
            await socket.subscribe(suspend_then_list, {})
            message = await socket.receive()
        assert message["type"] == "error", message
        assert [error["message"] for error in message["payload"]] == [MESSAGE]
        assert data(url, None, COUNT) == {"suspendedRuns": {"totalCount": 0}}


async def test_an_operation_name_the_document_lacks_is_a_request_error(http: httpx.AsyncClient) -> None:
    body = {"query": TWO_QUERIES, "operationName": "C"}
    response = await _post(http, body)
    assert response.status_code == 200
    unknown = {
        "errors": [{"message": "Unknown operation named 'C'.", "extensions": {"code": "OPERATION_RESOLUTION_FAILURE"}}]
    }
    assert response.json() == unknown
    spec_client = await _post(http, body, accept=GRAPHQL_RESPONSE)
    assert spec_client.status_code == 400
    assert spec_client.json() == unknown
