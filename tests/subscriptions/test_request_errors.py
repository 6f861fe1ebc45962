"""A WebSocket operation whose document cannot run gets the protocol's ``error`` message, with the
``extensions.code`` the same document gets over HTTP, and the socket stays open (issue 42, 4b).

graphql-transport-ws: an ``error`` message carries "operation execution error(s) ... before the
actual execution", and ends that operation only. Over HTTP the same documents are request
errors (``server/view/request_errors.py``'s codes). Nothing of it is a fault: no traceback is logged.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .._graphql import WsClosed, post, ws_connect
from .._servers import runsgate_process

AGENTS = "query Agents { agents { id } }"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    log = tmp_path_factory.mktemp("ws-request-errors") / "runsgate.log"
    with runsgate_process(log, RUNSGATE_LOG_LEVEL="INFO", RUNSGATE_LOG_FORMAT="text", RUNSGATE_GRAPHIQL="false") as url:
        yield url, log


CASES = {
    "a subscription that does not parse": (
        'subscription { suspendedRunEvents(agentId: "refund-agent") { id ',
        None,
        "GRAPHQL_PARSE_FAILED",
    ),
    "a query that does not parse": ("{ agents { id } ", None, "GRAPHQL_PARSE_FAILED"),
    "a query selecting an unknown field": ("{ agents { nope } }", None, "GRAPHQL_VALIDATION_FAILED"),
    "an operation name the document lacks": (AGENTS, "Invented", "OPERATION_RESOLUTION_FAILURE"),
    "an Int literal of 5,000 digits": (
        "{ reviewQueue(first: %s) { totalCount } }" % ("9" * 5000),
        None,
        "GRAPHQL_VALIDATION_FAILED",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_a_document_that_cannot_run_is_an_error_message_with_the_http_code(
    server: tuple[str, Path], case: str
) -> None:
    url, log = server
    document, operation_name, code = CASES[case]
    written_before = len(log.read_text())
    over_http = post(url, None, document, operation_name=operation_name).json()

    async with ws_connect(url) as ws:
        # when the operation is sent over WebSocket
        operation = await ws.subscribe(document, {}, operation_name=operation_name)
        refused = await ws.receive()
        # then the socket still serves another operation
        after = await ws.subscribe(AGENTS, {})
        answered = [await ws.receive(), await ws.receive()]

    # then the operation got the protocol's error message, with HTTP's errors and code
    assert refused["type"] == "error", refused
    assert refused["id"] == operation
    errors: list[dict[str, Any]] = refused["payload"]
    assert errors == over_http["errors"], (errors, over_http)
    assert code in {error.get("extensions", {}).get("code") for error in errors}, errors
    assert [m["type"] for m in answered] == ["next", "complete"], answered
    assert all(m["id"] == after for m in answered)
    assert answered[0]["payload"]["data"]["agents"]
    # and the server logged no fault
    await asyncio.sleep(0.2)  # the lines written before the answers reach the file
    written = log.read_text()[written_before:]
    assert "Traceback" not in written, written
    assert "Exception in worker task" not in written, written


async def test_a_subscription_with_a_literal_its_scalar_refuses_is_a_validation_failure(
    server: tuple[str, Path],
) -> None:
    url, log = server
    written_before = len(log.read_text())
    query = 'query { reviewQueue(filter: {expiresBefore: "yesterday"}) { totalCount } }'
    over_http = post(url, None, query).json()["errors"]

    async with ws_connect(url) as ws:
        # when a subscription whose filter holds a DateTime its scalar refuses is sent
        subscription = 'subscription { reviewQueueEvents(filter: {expiresBefore: "yesterday"}) { id } }'
        operation = await ws.subscribe(subscription, {})
        refused = await ws.receive()

    # then it is the error message with the code and words HTTP gives the same literal in a query
    assert (refused["type"], refused["id"]) == ("error", operation), refused
    [error] = refused["payload"]
    assert error.get("extensions") == {"code": "GRAPHQL_VALIDATION_FAILED"}, error
    assert [e["extensions"] for e in over_http] == [{"code": "GRAPHQL_VALIDATION_FAILED"}], over_http
    assert error["message"] == over_http[0]["message"], (error, over_http)
    await asyncio.sleep(0.2)  # the lines written before the answers reach the file
    written = log.read_text()[written_before:]
    assert "Traceback" not in written, written


QUEUE = "query Q($a: ReviewQueueFilter) { reviewQueue(filter: $a) { totalCount } }"
VARIABLE_CASES = {
    "a query": (QUEUE, {"a": "x"}),
    "a subscription": (
        "subscription S($a: ReviewQueueFilter) { reviewQueueEvents(filter: $a) { id } }",
        {"a": {"expiresBefore": "x"}},
    ),
}


@pytest.mark.parametrize("case", list(VARIABLE_CASES))
async def test_variables_that_do_not_coerce_are_an_error_message_with_the_http_code(
    server: tuple[str, Path], case: str
) -> None:
    url, _ = server
    document, variables = VARIABLE_CASES[case]
    # given variables their types refuse, which HTTP answers as a request error (in a query)
    over_http = post(url, None, QUEUE, **variables).json()
    assert {error["extensions"]["code"] for error in over_http["errors"]} == {"BAD_USER_INPUT"}, over_http

    async with ws_connect(url) as ws:
        # when it is sent over WebSocket
        operation = await ws.subscribe(document, variables)
        refused = await ws.receive()

    # then it gets the protocol's error message with the code HTTP gives such variables
    assert refused["type"] == "error", refused
    assert refused["id"] == operation
    assert {error.get("extensions", {}).get("code") for error in refused["payload"]} == {"BAD_USER_INPUT"}, refused


def _subscribe(payload: Any, **fields: Any) -> str:
    return json.dumps({"id": "1", "type": "subscribe", "payload": payload, **fields})


MALFORMED = {
    "a list": ("[]", "a JSON object"),
    "a number": ("1", "a JSON object"),
    "a string": ('"x"', "a JSON object"),
    "null": ("null", "a JSON object"),
    "true": ("true", "a JSON object"),
    "a type that is no string": ('{"type": 1}', "`type`"),
    "a subscribe whose payload is a string": (_subscribe("x"), "`payload`"),
    "a subscribe whose payload is a list": (_subscribe([1]), "`payload`"),
    "a subscribe whose query is a number": (_subscribe({"query": 1}), "`payload.query`"),
    "a subscribe whose variables are a list": (_subscribe({"query": AGENTS, "variables": [1]}), "`payload.variables`"),
    "a subscribe whose variables are a string": (
        _subscribe({"query": AGENTS, "variables": "x"}),
        "`payload.variables`",
    ),
    "a subscribe whose operationName is a number": (
        _subscribe({"query": AGENTS, "operationName": 1}),
        "`payload.operationName`",
    ),
    "a subscribe whose extensions are a list": (
        _subscribe({"query": AGENTS, "extensions": []}),
        "`payload.extensions`",
    ),
    "a subscribe whose id is a number": (_subscribe({"query": AGENTS}, id=1), "`id`"),
    "a complete whose id is a list": ('{"type": "complete", "id": []}', "`id`"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
async def test_a_message_of_the_wrong_shape_closes_the_socket_with_4400_naming_the_fault(
    server: tuple[str, Path], case: str
) -> None:
    url, log = server
    text, named = MALFORMED[case]
    written_before = len(log.read_text())

    async def send() -> None:
        async with ws_connect(url) as ws:
            await ws.send_text(text)
            await ws.receive()

    # when an acknowledged socket gets a message the protocol does not define
    with pytest.raises(WsClosed) as closed:
        await send()

    # then it is closed with 4400, as graphql-transport-ws says, naming what is wrong
    assert closed.value.code == 4400, closed.value
    assert named in closed.value.reason, closed.value
    # and the server logged no fault
    await asyncio.sleep(0.2)
    written = log.read_text()[written_before:]
    assert "Traceback" not in written, written
    assert "Exception in" not in written, written
