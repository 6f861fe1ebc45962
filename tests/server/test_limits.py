"""Request limits (SECURITY.md): body size, query depth, tokens, aliases, batching,
introspection and ``resumeData`` size and nesting. Every refused request changes nothing."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson
import pytest

from server.app import create_app
from server.settings import DEMO_AGENTS, ApiKeyConfig, Settings

from .._auth import ADMIN
from .._graphql import REFUND, REFUND_PROMPT, RESUME, START_RUN, WEATHER, WEATHER_PROMPT, GraphQLClient

DEEP = '{ suspendedRuns(agentId: "refund-agent") { edges { node { toolCalls { decision { kind } } } } } }'
"""Depth 5 as Strawberry counts it (root fields at 0): suspendedRuns > edges > node > toolCalls > decision > kind."""
INTROSPECTION = "{ __schema { queryType { name } } }"


@asynccontextmanager
async def running(**limits: Any) -> AsyncIterator[GraphQLClient]:
    settings = Settings(
        agents=DEMO_AGENTS, mongodb_uri=None, api_keys=[ApiKeyConfig.model_validate(ADMIN.entry())], **limits
    )
    app = create_app(settings)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://test", headers=ADMIN.headers
        ) as client,
    ):
        yield GraphQLClient(client)


async def count_runs(gql: GraphQLClient, agent_id: str = REFUND) -> int:
    total: int = (await gql.suspended_runs(agent_id))["totalCount"]
    return total


# -- body size ------------------------------------------------------------------------------------
async def test_a_body_over_the_limit_gets_413_before_anything_runs() -> None:
    async with running(max_body_bytes=2048) as gql:
        padding = "x" * 4096
        document = START_RUN
        payload = {"query": document, "variables": {"input": {"agentId": REFUND, "prompt": REFUND_PROMPT + padding}}}

        response = await gql.http.post("/graphql", json=payload)

        assert response.status_code == 413
        assert await count_runs(gql) == 0


async def test_a_chunked_body_over_the_limit_gets_413_too() -> None:
    async with running(max_body_bytes=2048) as gql:
        payload = json.dumps(
            {"query": START_RUN, "variables": {"input": {"agentId": REFUND, "prompt": "x" * 4096}}}
        ).encode()

        async def chunks() -> AsyncIterator[bytes]:
            for i in range(0, len(payload), 512):
                yield payload[i : i + 512]

        response = await gql.http.post("/graphql", content=chunks(), headers={"Content-Type": "application/json"})

        assert response.request.headers.get("transfer-encoding") == "chunked"
        assert "content-length" not in response.request.headers
        assert response.status_code == 413
        assert await count_runs(gql) == 0


async def test_a_body_over_the_limit_is_answered_in_compact_json_as_every_answer() -> None:
    async with running(max_body_bytes=2048) as gql:
        response = await gql.http.post("/graphql", content=b"x" * 4096, headers={"Content-Type": "application/json"})

    assert response.status_code == 413
    assert response.content == orjson.dumps(response.json())  # docs/api.md: orjson's compact UTF-8 JSON


async def test_a_body_under_the_limit_passes() -> None:
    async with running(max_body_bytes=4096) as gql:
        await gql.suspend(REFUND, REFUND_PROMPT)

        assert await count_runs(gql) == 1


async def test_a_non_numeric_content_length_gets_400() -> None:
    async with running() as gql:
        response = await gql.http.post(
            "/graphql", content=b"{}", headers={"Content-Type": "application/json", "Content-Length": "abc"}
        )

    assert response.status_code == 400


# -- document limits ------------------------------------------------------------------------------
async def test_a_query_deeper_than_the_limit_is_refused() -> None:
    async with running(max_query_depth=4) as gql:
        _, errors = await gql.errors(DEEP)
    async with running(max_query_depth=5) as gql:
        allowed = await gql.data(DEEP)

    assert "exceeds maximum operation depth of 4" in errors[0]["message"]
    assert allowed == {"suspendedRuns": {"edges": []}}


async def test_a_document_with_too_many_tokens_is_refused() -> None:
    async with running(max_query_tokens=20) as gql:
        _, errors = await gql.errors(DEEP)

    assert "more than 20 tokens" in errors[0]["message"]


async def test_too_many_aliases_are_refused_and_nothing_runs() -> None:
    aliased = (
        "mutation {"
        + "".join(
            f' r{i}: startRun(input: {{agentId: "refund-agent", prompt: "{REFUND_PROMPT}"}}) {{ __typename }}'
            for i in range(4)
        )
        + " }"
    )
    async with running(max_aliases=3) as gql:
        _, errors = await gql.errors(aliased)

        assert "4 aliases found. Allowed: 3" in errors[0]["message"]
        assert await count_runs(gql) == 0


async def test_batching_is_off_by_default_and_capped_when_on() -> None:
    one = {"query": "{ agents { id } }"}
    async with running() as gql:
        off = await gql.http.post("/graphql", json=[one, one])
    async with running(max_batch=2) as gql:
        two = await gql.http.post("/graphql", json=[one, one])
        three = await gql.http.post("/graphql", json=[one, one, one])

    assert off.status_code == 400
    assert "Batching is not enabled" in off.text
    assert two.status_code == 200
    assert [r["data"]["agents"][0]["id"] for r in two.json()] == ["refund-agent", "refund-agent"]
    assert three.status_code == 400


async def test_introspection_can_be_turned_off() -> None:
    async with running(introspection=False) as gql:
        _, errors = await gql.errors(INTROSPECTION)
    async with running() as gql:
        on = await gql.data(INTROSPECTION)

    assert "introspection" in errors[0]["message"].lower()
    assert on == {"__schema": {"queryType": {"name": "Query"}}}


# -- resumeData -----------------------------------------------------------------------------------
def nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = {"name": value}
    return value


@pytest.mark.parametrize(
    ("resume_data", "message"),
    [
        (nested(5), "nested deeper than 4 levels"),
        ({"name": "x" * 300}, "at most 256 are accepted"),
        ({"name": "é" * 200}, "at most 256 are accepted"),  # bytes, not characters
    ],
    ids=["too-deep", "too-large", "too-many-bytes"],
)
async def test_resume_data_over_the_limits_is_bad_user_input_and_changes_nothing(
    resume_data: Any, message: str
) -> None:
    async with running(max_resume_data_depth=4, max_resume_data_bytes=256) as gql:
        run = await gql.suspend(WEATHER, WEATHER_PROMPT)

        _, errors = await gql.errors(
            RESUME, input={"agentId": WEATHER, "runId": run["runId"], "resumeData": resume_data}
        )

        assert errors[0]["extensions"] == {"code": "BAD_USER_INPUT", "argument": "input.resumeData"}
        assert message in errors[0]["message"]
        assert await gql.suspended_run(WEATHER, run["runId"]) == run


async def test_resume_data_within_the_limits_resumes() -> None:
    async with running(max_resume_data_depth=4, max_resume_data_bytes=256) as gql:
        run = await gql.suspend(WEATHER, WEATHER_PROMPT)

        outcome = await gql.resume(WEATHER, run["runId"], {"name": "San Francisco"})

    assert outcome["status"] == "COMPLETED", outcome


# -- malformed JSON bodies ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"query": "{ agents { id } }", "variables": {"x": NaN}}',
        b'{"query": "{ agents { id } }", "variables": {"x": ' + b"9" * 5000 + b"}}",
        b'{"query": "\xff\xfe"}',
        b'{"query": ',
    ],
    ids=["nested-100k", "nan", "5000-digit-number", "bad-utf8", "truncated"],
)
async def test_a_body_that_is_not_strict_json_gets_400(raw: bytes) -> None:
    async with running(max_body_bytes=1 << 20) as gql:
        response = await gql.http.post("/graphql", content=raw, headers={"Content-Type": "application/json"})

    assert response.status_code == 400, response.text


@pytest.mark.parametrize(
    "raw",
    [
        b'{"query": "{ agents { id } }", "query": "mutation { startRun(input: {agentId: \\"x\\", '
        b'prompt: \\"y\\"}) { __typename } }"}',
        b'{"query": "{ agents { id } }", "variables": {"x": 1, "x": 2}}',
    ],
    ids=["query-twice", "variable-twice"],
)
async def test_a_body_with_a_key_twice_in_one_object_gets_400_and_runs_nothing(raw: bytes) -> None:
    # I-JSON (RFC 7493): names unique; a proxy reading the first "query" and runsgate the last
    # would disagree on what runs
    async with running(max_body_bytes=1 << 20) as gql:
        response = await gql.http.post("/graphql", content=raw, headers={"Content-Type": "application/json"})

    assert response.status_code == 400, response.text
    assert "twice" in response.text, response.text


# -- the work of checking a document --------------------------------------------------------------
def fragment_bomb(levels: int, body: str = "id") -> str:
    """``F0 { <body> }`` and ``F<i> { ...F<i-1> ...F<i-1> }`` up to ``F<levels-1>``, spread by
    ``{ agents { ... } }``: 2^(levels-1) copies of ``body`` once inlined."""
    fragments = [f"fragment F0 on Agent {{ {body} }}"] + [
        f"fragment F{i} on Agent {{ ...F{i - 1} ...F{i - 1} }}" for i in range(1, levels)
    ]
    return f"query {{ agents {{ ...F{levels - 1} }} }}\n" + "\n".join(fragments)


async def python_calls(gql: GraphQLClient, document: str) -> int:
    """Python function calls (outside asyncio) made while the app answers ``document``: a
    measure of its work that no machine load changes."""
    calls = 0

    def count(frame: Any, event: str, _arg: Any) -> None:
        nonlocal calls
        if event == "call" and "asyncio" not in frame.f_code.co_filename:
            calls += 1

    sys.setprofile(count)
    try:
        response = await gql.http.post("/graphql", json={"query": document})
    finally:
        sys.setprofile(None)
    assert response.status_code == 200, response.text
    return calls


async def test_the_work_of_checking_a_fragment_bomb_grows_with_its_size_not_its_expansion() -> None:
    async with running() as gql:
        await python_calls(gql, "{ agents { id } }")  # what a first request does once
        # given fragment bombs of 6, 12 and 18 levels (each 6 levels multiply the expansion by 64)
        work = [await python_calls(gql, fragment_bomb(levels)) for levels in (6, 12, 18)]

    # then each 6 more levels add about the same work, as 6 more fragments of a document would
    first, second = work[1] - work[0], work[2] - work[1]
    assert 0 < second <= 3 * first, work


@pytest.mark.parametrize(
    "document",
    [
        "{ agents { " + "suspendedRuns { totalCount } " * 300 + "} }",
        "{ agents { "
        + " ".join(f"...F{i}" for i in range(200))
        + " } } "
        + " ".join(f"fragment F{i} on Agent {{ id }}" for i in range(200)),
    ],
    ids=["fields-sharing-a-name", "fragments-side-by-side"],
)
async def test_a_document_whose_fields_overlap_too_much_to_check_is_refused_saying_why(document: str) -> None:
    # given a document within the token limit whose overlapping fields would take graphql-core's
    # check quadratic work (300 fields of one name; 200 fragments spread in one selection set)
    async with running() as gql:
        data, errors = await gql.errors(document)

    # then it is refused with a validation error telling why, and nothing ran
    assert data is None
    assert [error["extensions"]["code"] for error in errors] == ["GRAPHQL_VALIDATION_FAILED"]
    assert errors[0]["message"].startswith("Validation aborted: the document is too complex to check.")
