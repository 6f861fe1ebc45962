"""An answer's budget in bytes (``RUNSGATE_MAX_RESPONSE_BYTES``, ``server.http.encoding``), in process.

The encoder writes what orjson writes, refuses exactly the answers over the budget, and lets
the event loop run between its chunks; the view answers one byte over the budget with
``RESPONSE_TOO_LARGE``, on the standard and the prepared path, and a batch shares one budget.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.app import create_app
from server.http.encoding import CHUNK, SCAN_STEP, AnswerTooLarge, bound, chunks, encode_within
from server.settings import DEMO_AGENTS, Settings

from .._graphql import REFUND, REFUND_PROMPT, GraphQLClient, graphql_view

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(alphabet=st.characters(codec="utf-8"), max_size=40)
    | st.text(alphabet=st.sampled_from('ab "\\\n\r\t\x01é'), min_size=60, max_size=200),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=8), children, max_size=6),
    max_leaves=60,
)
"""What an answer holds (a float may be NaN or infinite: an older runsgate stored some)."""


def shown(value: Any) -> Any:
    """``value`` as JSON shows it: a float that is not finite is null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: shown(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shown(item) for item in value]
    return value


def encoded(value: Any, limit: int = 1 << 30, chunk: int = CHUNK) -> bytes | None:
    try:
        return b"".join(chunks(value, limit, chunk))
    except AnswerTooLarge:
        return None


@settings(max_examples=400, derandomize=True, deadline=None)
@given(JSON_VALUES, st.sampled_from([1, 7, CHUNK]))
def test_the_encoder_writes_what_orjson_writes(value: Any, chunk: int) -> None:
    written = encoded(value, chunk=chunk)
    assert written is not None
    try:
        expected = orjson.dumps(value)
    except TypeError:  # an integer beyond 64 bits: the same value, written by json
        assert json.loads(written) == shown(value)
    else:
        assert written == expected


@settings(max_examples=400, derandomize=True, deadline=None)
@given(JSON_VALUES, st.data())
def test_the_encoder_refuses_exactly_what_is_over_the_budget(value: Any, data: st.DataObject) -> None:
    size = len(encoded(value) or b"")
    limit = data.draw(st.integers(max(0, size - 3), size + 3))
    assert (encoded(value, limit) is None) == (size > limit)


async def turns_while_encoding(answer: Any, limit: int) -> tuple[list[bytes] | None, int]:
    """``encode_within(answer, limit)``, and the turns the event loop gave another task meanwhile."""
    turns = 0
    stop = False

    async def count() -> None:
        nonlocal turns
        while not stop:
            turns += 1
            await asyncio.sleep(0)

    counter = asyncio.create_task(count())
    await asyncio.sleep(0)
    found = await encode_within(answer, limit)
    stop = True
    await counter
    return found, turns


async def test_the_event_loop_runs_while_a_large_answer_is_encoded() -> None:
    # given a 4 MB answer of short texts (whose bound, 6 bytes a character for a short string,
    # passes a 4 MiB budget: it is written piece by piece), and one of 300,000 small values
    texts = {"data": {"items": [{"text": "x" * 60, "n": n} for n in range(50_000)]}}
    values = {"data": {"items": [{"n": n, "ok": True} for n in range(100_000)]}}

    # when each is encoded while another task counts its turns
    text_chunks, text_turns = await turns_while_encoding(texts, 4 << 20)
    value_chunks, value_turns = await turns_while_encoding(values, 4 << 20)

    # then each is what orjson writes, and the other task ran every 64 KiB, or every 4,096 values
    assert text_chunks is not None
    assert value_chunks is not None
    assert b"".join(text_chunks) == orjson.dumps(texts)
    assert b"".join(value_chunks) == orjson.dumps(values)
    assert len(text_chunks) >= 3_500_000 // CHUNK
    assert text_turns >= len(text_chunks) - 1
    assert value_turns >= 300_000 // SCAN_STEP - 1


# -- the view ---------------------------------------------------------------------------------------
LIST = 'query List { suspendedRuns(agentId: "refund-agent") { nodes { runId toolCalls { args } } } }'


@asynccontextmanager
async def app_with_runs(compiled: bool) -> AsyncIterator[tuple[GraphQLClient, Any]]:
    app = create_app(Settings(agents=DEMO_AGENTS, mongodb_uri=None, auth=False, compiled_execution=compiled))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as http,
    ):
        gql = GraphQLClient(http)
        for _ in range(3):
            await gql.suspend(REFUND, REFUND_PROMPT)
        yield gql, graphql_view(app)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "standard"])
async def test_an_answer_one_byte_over_the_budget_is_refused(compiled: bool) -> None:
    async with app_with_runs(compiled) as (gql, view):
        # given an answer's size (sent twice: the second time it is a prepared query)
        full = await gql.post(LIST)
        size = len(full.content)
        assert int(full.headers["content-length"]) == size

        # when the budget is exactly that, then one byte less
        view.max_response_bytes = size
        within = [await gql.post(LIST) for _ in range(2)]
        view.max_response_bytes = size - 1
        over = [await gql.post(LIST) for _ in range(2)]

    # then the first is answered whole, the second refused with the code and the limit
    assert [response.content for response in within] == [full.content] * 2
    for response in over:
        assert response.status_code == 200
        body = response.json()
        assert body["data"] is None
        assert body["errors"][0]["extensions"] == {"code": "RESPONSE_TOO_LARGE", "maxResponseBytes": size - 1}
        assert body["extensions"] == full.json()["extensions"]
        assert int(response.headers["content-length"]) == len(response.content)


async def test_a_batch_shares_one_budget() -> None:
    app = create_app(Settings(agents=DEMO_AGENTS, mongodb_uri=None, auth=False, max_batch=3))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as http,
    ):
        one = await http.post("/graphql", json={"query": "{ agents { id } }"})
        view = graphql_view(app)
        # given a budget for two answers, not three
        view.max_response_bytes = 2 * len(one.content) + 10
        batch = await http.post("/graphql", json=[{"query": "{ agents { id } }"}] * 3)

    # then the first two are answered, the third refused
    answers = batch.json()
    assert answers[:2] == [one.json()] * 2
    assert answers[2]["errors"][0]["extensions"]["code"] == "RESPONSE_TOO_LARGE"
    assert int(batch.headers["content-length"]) == len(batch.content)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(JSON_VALUES)
def test_the_bound_is_never_below_the_encoded_size(value: Any) -> None:
    found = 0
    scan = bound(value, 1 << 30)
    try:
        while True:
            next(scan)
    except StopIteration as done:
        found = done.value
    written = encoded(value)
    assert written is not None
    assert found >= len(written) or found == (1 << 30) + 1


async def _body_messages(app: Any, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``http.response.body`` messages the app sends for a ``POST /graphql`` of ``body``."""
    raw = json.dumps(body).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/graphql",
        "raw_path": b"/graphql",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"localhost"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("localhost", 80),
    }
    received = False
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal received
        if not received:
            received = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await asyncio.Event().wait()  # the client stays connected
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return [message for message in sent if message["type"] == "http.response.body"]


async def test_an_answer_within_one_chunk_is_sent_as_one_body() -> None:
    app = create_app(Settings(agents=DEMO_AGENTS, mongodb_uri=None, auth=False))
    async with app.router.lifespan_context(app):
        # given an answer under one chunk, served by the standard path, then by the prepared one
        answers = [await _body_messages(app, {"query": "{ agents { id } }"}) for _ in range(2)]

    # then each is one body message, the whole answer
    for messages in answers:
        assert len(messages) == 1
        assert not messages[0].get("more_body", False)
        assert json.loads(messages[0]["body"])["data"]["agents"]
