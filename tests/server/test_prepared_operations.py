"""Prepared operations (``resolvers/fastpath/prepared.py``): a query that executed once runs again
without Strawberry's parse, validation and extension steps, with the same answers and metrics.

Through HTTP on the memory store (the store plays no part here; the differential test
``test_compiled_differential.py`` compares every suite document on FerretDB). The schema's
``prepared_operations.executed`` tells whether a request took the prepared path.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from graphql import parse
from prometheus_client import REGISTRY
from starlette.applications import Starlette
from strawberry.extensions import ValidationCache
from strawberry.extensions.tracing import OpenTelemetryExtension
from strawberry.schema.exceptions import InvalidOperationTypeError
from strawberry.types.graphql import OperationType

import resolvers.fastpath.schema
from resolvers.documents.operation_name import MESSAGE
from resolvers.fastpath.prepared import PreparedOperation, PreparedOperations
from resolvers.schema import CACHE_SIZE, build_schema
from server.app import create_app
from server.http.limits import graphql_extensions
from server.settings import DEMO_AGENTS, Settings
from storage import StoreUnavailableError

from .._graphql import REFUND, REFUND_PROMPT, START_RUN, graphql_schema, graphql_view

LISTING = """
query PreparedListing($agentId: ID!, $first: Int, $after: String) {
  suspendedRuns(agentId: $agentId, first: $first, after: $after) {
    edges { cursor node { runId status toolCalls { toolName args } } }
    pageInfo { hasNextPage endCursor }
  }
}
"""
TWO_OPERATIONS = """
query Ids { agents { id } }
query Descriptions { agents { description } }
"""
GRAPHQL_RESPONSE = "application/graphql-response+json"


@pytest.fixture
async def app() -> AsyncIterator[Starlette]:
    # loopback: auth may be off; the listing's operation name is the operator's, so /metrics counts it by name
    application = create_app(
        Settings(agents=DEMO_AGENTS, mongodb_uri=None, auth=False, metrics_operation_names=["PreparedListing"])
    )
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def http(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as client:
        client.headers["content-type"] = "application/json"
        # two suspended refund runs to list
        for _ in range(2):
            started = await client.post(
                "/graphql",
                json={"query": START_RUN, "variables": {"input": {"agentId": REFUND, "prompt": REFUND_PROMPT}}},
            )
            assert started.json()["data"]["startRun"]["status"] == "SUSPENDED", started.text
        yield client


_validated = ValidationCache(maxsize=CACHE_SIZE).cached_validate_document
"""The validation cache's LRU (shared by every ``ValidationCache`` of this size)."""


def _prepared(app: Starlette) -> PreparedOperations:
    prepared = graphql_schema(app).prepared_operations
    assert prepared is not None
    return prepared


async def _listing(http: httpx.AsyncClient, **variables: Any) -> httpx.Response:
    return await http.post("/graphql", json={"query": LISTING, "variables": {"agentId": REFUND, **variables}})


def _metric(name: str, operation_name: str) -> float:
    value = REGISTRY.get_sample_value(name, {"operation_name": operation_name, "operation_type": "query"})
    return value or 0.0


async def test_a_query_sent_again_is_prepared_and_not_validated_again(app: Starlette, http: httpx.AsyncClient) -> None:
    prepared = _prepared(app)
    # given a listing sent once (through Strawberry's pipeline, which validated it)
    first = await _listing(http, first=1)
    executed, validations = prepared.executed, _validated.cache_info()

    # when it is sent again
    second = await _listing(http, first=1)

    # then it ran as a prepared operation, without looking at the validation cache, same answer
    assert prepared.executed == executed + 1
    assert _validated.cache_info() == validations
    assert second.status_code == first.status_code == 200
    assert second.content == first.content
    assert len(second.json()["data"]["suspendedRuns"]["edges"]) == 1


async def test_variables_are_read_on_every_request(app: Starlette, http: httpx.AsyncClient) -> None:
    # given a prepared listing
    first = (await _listing(http, first=1)).json()["data"]["suspendedRuns"]
    await _listing(http, first=1)
    executed = _prepared(app).executed

    # when the next page is asked for with the first page's cursor
    second = (await _listing(http, first=1, after=first["pageInfo"]["endCursor"])).json()["data"]["suspendedRuns"]

    # then it is the other run, answered as a prepared operation
    assert _prepared(app).executed == executed + 1
    assert second["edges"][0]["node"]["runId"] != first["edges"][0]["node"]["runId"]
    assert second["pageInfo"]["hasNextPage"] is False


async def test_a_request_error_of_a_prepared_query_is_a_request_error(app: Starlette, http: httpx.AsyncClient) -> None:
    # given a prepared listing
    await _listing(http, first=1)
    executed = _prepared(app).executed

    # when its variables do not coerce, for a client of the GraphQL-over-HTTP media type
    response = await http.post(
        "/graphql",
        json={"query": LISTING, "variables": {"agentId": REFUND, "first": "many"}},
        headers={"accept": GRAPHQL_RESPONSE},
    )

    # then it is a 400 without data, as from the standard path (graphql_view.py), via the prepared path
    assert _prepared(app).executed == executed + 1
    assert response.status_code == 400, response.text
    body = response.json()
    assert "data" not in body
    assert "$first" in body["errors"][0]["message"]


async def test_prepared_queries_are_counted_and_their_errors_too(
    app: Starlette, http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    name = "PreparedListing"
    requests = "runsgate_graphql_requests_total"
    errors = "runsgate_graphql_errors_total"
    durations = "runsgate_graphql_request_duration_seconds_count"
    before = {metric: _metric(metric, name) for metric in (requests, errors, durations)}

    # when the listing runs twice, then twice with a cursor that is not one (a field error)
    for _ in range(2):
        assert "errors" not in (await _listing(http, first=1)).json()
    executed = _prepared(app).executed
    bad = [(await _listing(http, first=1, after="not-a-cursor")).json()]
    with caplog.at_level(logging.INFO, logger="runsgate.graphql"):
        caplog.clear()  # only the prepared request's records (the level may be INFO already)
        bad.append((await _listing(http, first=1, after="not-a-cursor")).json())

    # then all four were counted and timed, the two bad ones as errors, the last three prepared
    assert _prepared(app).executed == executed + 2
    assert bad[0] == bad[1]
    assert bad[0]["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    assert _metric(requests, name) - before[requests] == 4
    assert _metric(durations, name) - before[durations] == 4
    assert _metric(errors, name) - before[errors] == 2
    # and the prepared one's error was logged as on the standard path: one INFO line, no traceback
    (logged,) = [r for r in caplog.records if r.name == "runsgate.graphql"]
    assert logged.levelno == logging.INFO
    assert logged.getMessage().startswith("GraphQL error at ['suspendedRuns']")
    assert logged.exc_info is None


async def test_each_operation_of_a_document_is_prepared_by_its_name(app: Starlette, http: httpx.AsyncClient) -> None:
    async def run(operation_name: str) -> dict[str, Any]:
        response = await http.post("/graphql", json={"query": TWO_OPERATIONS, "operationName": operation_name})
        return response.json()["data"]["agents"][0]  # type: ignore[no-any-return]

    # when each operation of one document runs twice
    executed = _prepared(app).executed
    answers = [await run(name) for name in ("Ids", "Descriptions", "Ids", "Descriptions")]

    # then each answered its own selection, and the second of each was prepared
    assert [sorted(answer) for answer in answers] == [["id"], ["description"], ["id"], ["description"]]
    assert answers[:2] == answers[2:]
    assert _prepared(app).executed == executed + 2
    # and without a name, twice: a request error each time, as the GraphQL spec asks
    # (resolvers/documents/operation_name.py), never prepared
    unnamed = [await http.post("/graphql", json={"query": TWO_OPERATIONS}) for _ in range(2)]
    assert unnamed[0].status_code == unnamed[1].status_code == 200
    assert (
        unnamed[0].json()
        == unnamed[1].json()
        == {"errors": [{"message": MESSAGE, "extensions": {"code": "OPERATION_RESOLUTION_FAILURE"}}]}
    )
    assert _prepared(app).executed == executed + 2


async def test_refused_documents_are_never_prepared_and_a_prepared_mutation_runs_each_time(
    app: Starlette, http: httpx.AsyncClient
) -> None:
    prepared = _prepared(app)
    size, executed = len(prepared), prepared.executed

    # when a mutation, a document that does not validate and one that does not parse are sent twice
    bodies = [
        {"query": START_RUN, "variables": {"input": {"agentId": REFUND, "prompt": REFUND_PROMPT}}},
        {"query": "{ agents { nope } }"},
        {"query": "{ agents { id }"},
    ]
    answers = [(await http.post("/graphql", json=body)).json() for body in bodies for _ in range(2)]

    # then only the mutation was prepared (by the fixture's startRun already; without a root plan:
    # its root field has effects), both sends ran as a prepared operation, and it really ran twice
    assert (len(prepared), prepared.executed) == (size, executed + 2)
    entry = prepared.get(START_RUN, None)
    assert entry is not None
    assert (entry.operation_type, entry.root) == (OperationType.MUTATION, None)
    assert answers[0]["data"]["startRun"]["runId"] != answers[1]["data"]["startRun"]["runId"]
    assert answers[2] == answers[3]
    assert "data" not in answers[2]
    assert answers[4] == answers[5]
    assert "data" not in answers[4]


async def test_a_query_over_get_uses_the_prepared_operation(app: Starlette, http: httpx.AsyncClient) -> None:
    # given a query prepared from a POST
    query = "query Ids { agents { id } }"
    posted = await http.post("/graphql", json={"query": query})
    executed = _prepared(app).executed

    # when it comes as a GET
    got = await http.get("/graphql", params={"query": query})

    # then the same answer, prepared
    assert got.status_code == 200, got.text
    assert got.content == posted.content
    assert _prepared(app).executed == executed + 1


async def test_a_failure_of_the_prepared_path_is_answered_by_the_standard_path(
    app: Starlette, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # given a prepared listing, and a prepared path that fails before answering (a fault
    # injected: execute_prepared replaced by a function that raises)
    expected = await _listing(http, first=2)
    await _listing(http, first=2)

    async def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("injected fault")

    monkeypatch.setattr(resolvers.fastpath.schema, "execute_prepared", broken)

    # when it is sent again
    with caplog.at_level(logging.ERROR, logger="runsgate.graphql"):
        answer = await _listing(http, first=2)

    # then Strawberry's pipeline answered it, and the fault is in the log with its traceback
    assert answer.status_code == 200
    assert answer.content == expected.content
    (record,) = [r for r in caplog.records if "prepared operation failed" in r.getMessage()]
    assert record.exc_info is not None
    assert "injected fault" in str(record.exc_info[1])


def test_only_covered_extensions_allow_prepared_operations() -> None:
    settings = Settings(agents=DEMO_AGENTS, mongodb_uri=None, auth=False, introspection=False)
    # the server's limits (parser options and validation rules) are covered
    assert build_schema(extensions=graphql_extensions(settings)).prepared_operations is not None
    # tracing wraps every operation: no prepared operations; nor without compiled execution
    assert build_schema(extra_extensions=[OpenTelemetryExtension]).prepared_operations is None
    assert not hasattr(build_schema(compiled_execution=False), "prepared_operations")


def test_the_least_recently_used_operation_is_dropped_first() -> None:
    prepared = PreparedOperations(lambda errors: errors, maxsize=2)
    for text in ("{ a }", "{ b }"):
        prepared.record(text, None, parse(text), None)
    assert isinstance(prepared.get("{ a }", None), PreparedOperation)  # "{ a }" is now the most recent

    prepared.record("{ c }", None, parse("{ c }"), None)

    assert len(prepared) == 2
    assert prepared.get("{ b }", None) is None
    assert prepared.get("{ a }", None) is not None
    assert prepared.get("{ c }", None) is not None
    assert prepared.get("{ a }", "Other") is None  # the operation name is part of the key


MALFORMED = [
    {"query": "{ agents { id } }", "operationName": ["x"]},
    {"query": "{ agents { id } }", "operationName": {"a": 1}},
    {"query": "{ agents { id } }", "operationName": 5},
    [{"query": ["{ agents { id } }"]}],
    [{"query": "{ agents { id } }", "operationName": ["x"]}],
    [{"query": 'query Q($a: ID!) { suspendedRun(agentId: $a, runId: "x") { runId } }', "variables": [1]}],
    [{"query": "{ agents { id } }", "extensions": [1]}],
]


@pytest.mark.parametrize("body", MALFORMED, ids=lambda body: json.dumps(body)[:60])
async def test_parts_of_the_wrong_type_get_the_standard_answer(body: object, caplog: pytest.LogCaptureFixture) -> None:
    # the view answers each with a 400 naming the part (test_request_body.py), on both paths:
    # neither may reach the prepared operations' cache (a list is not hashable) or graphql-core
    # (variables that are not a dict)
    answers: dict[bool, list[tuple[int, bytes]]] = {}
    for compiled in (True, False):
        application = create_app(
            Settings(agents=DEMO_AGENTS, mongodb_uri=None, auth=False, max_batch=2, compiled_execution=compiled)
        )
        async with (
            application.router.lifespan_context(application),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=application), base_url="http://localhost") as client,
        ):
            with caplog.at_level(logging.INFO):
                # the well-formed request first, so that its text is prepared, then the bad one 3 times
                await client.post("/graphql", json={"query": "{ agents { id } }"})
                responses = [await client.post("/graphql", json=body) for _ in range(3)]
            answers[compiled] = [(response.status_code, response.content) for response in responses]

    assert answers[True] == answers[False]
    assert all(status < 500 for status, _ in answers[True])
    # and no fault was logged (client mistakes are INFO lines without traceback)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], caplog.records


async def test_an_operation_type_not_allowed_is_refused_as_by_strawberry() -> None:
    # runsgate's views allow queries over GET and POST; Strawberry's views without
    # allow_queries_via_get pass only mutations as allowed for a GET
    schema = build_schema()
    assert (await schema.execute("{ __typename }")).data == {"__typename": "Query"}
    assert schema.prepared_operations is not None
    executed = schema.prepared_operations.executed

    with pytest.raises(InvalidOperationTypeError):
        await schema.execute("{ __typename }", allowed_operation_types={OperationType.MUTATION})
    assert schema.prepared_operations.executed == executed


UNKNOWN_RUN_APPROVAL = (
    'mutation { approveToolCall(input: {agentId: "refund-agent", runId: "none", toolCallId: "c_none"}) '
    "{ __typename ... on UserError { code } } }"
)


PAGE = "query Page($a: ID!, $n: Int) { suspendedRuns(agentId: $a, first: $n) { edges { node { runId } } } }"
PAGE_BODY = json.dumps({"query": PAGE, "variables": {"a": REFUND, "n": 1}}).encode()
FRAMINGS: list[tuple[str, dict[str, str], bytes, int]] = [
    # (case, request headers, body, how many of two sends the view's prepared path serves)
    ("json", {"content-type": "application/json"}, PAGE_BODY, 2),
    ("charset", {"content-type": "application/json; charset=utf-8"}, PAGE_BODY, 2),
    ("graphql-response accepted", {"content-type": "application/json", "accept": GRAPHQL_RESPONSE}, PAGE_BODY, 2),
    ("multipart accepted", {"content-type": "application/json", "accept": "multipart/mixed"}, PAGE_BODY, 2),
    (
        "request error",
        {"content-type": "application/json", "accept": GRAPHQL_RESPONSE},
        json.dumps({"query": PAGE, "variables": {"a": REFUND, "n": "x"}}).encode(),
        2,
    ),
    (
        "null parts",
        {"content-type": "application/json"},
        json.dumps({"query": PAGE, "variables": {"a": REFUND}, "operationName": None, "extensions": None}).encode(),
        2,
    ),
    (
        "named",
        {"content-type": "application/json"},
        json.dumps({"query": PAGE, "variables": {"a": REFUND}, "operationName": "Page", "extensions": {}}).encode(),
        2,  # the first send prepares the operation under its name, both take the view's path
    ),
    ("media type in capitals", {"content-type": "Application/JSON"}, PAGE_BODY, 0),
    ("a json-like media type", {"content-type": "application/json-patch+json"}, PAGE_BODY, 0),
    ("no content type", {}, PAGE_BODY, 0),
    ("form", {"content-type": "application/x-www-form-urlencoded"}, PAGE_BODY, 0),
    ("a batch", {"content-type": "application/json"}, b"[" + PAGE_BODY + b"]", 0),
    ("a string", {"content-type": "application/json"}, b'"query"', 0),
    ("a number", {"content-type": "application/json"}, b"5", 0),
    ("a batch of a number", {"content-type": "application/json"}, b"[5]", 0),
    ("a batch of null", {"content-type": "application/json"}, b"[null]", 0),
    ("a batch too large, of numbers", {"content-type": "application/json"}, b"[1, 2, 3]", 0),
    ("null", {"content-type": "application/json"}, b"null", 0),
    ("NaN", {"content-type": "application/json"}, PAGE_BODY.replace(b'"n": 1', b'"n": NaN'), 0),
    ("not json", {"content-type": "application/json"}, PAGE_BODY[:-1], 0),
    ("an unknown name", {"content-type": "application/json"}, PAGE_BODY.replace(b"}}", b'}, "operationName": "X"}'), 2),
    ("a mutation", {"content-type": "application/json"}, json.dumps({"query": UNKNOWN_RUN_APPROVAL}).encode(), 2),
    (
        "a subscription",
        {"content-type": "application/json", "accept": GRAPHQL_RESPONSE},
        json.dumps({"query": "subscription { __typename }"}).encode(),
        2,
    ),
    ("no query", {"content-type": "application/json"}, b'{"variables": {}}', 0),
    ("a query not a string", {"content-type": "application/json"}, b'{"query": 5}', 0),
    (
        "variables a list",
        {"content-type": "application/json"},
        json.dumps({"query": PAGE, "variables": [1]}).encode(),
        0,
    ),
]


@pytest.mark.parametrize(
    ("headers", "body", "fast"), [case[1:] for case in FRAMINGS], ids=[case[0] for case in FRAMINGS]
)
async def test_the_view_serves_prepared_requests_as_strawberry_does(
    headers: dict[str, str], body: bytes, fast: int
) -> None:
    # given a compiled app and a standard one, each with the page prepared (sent once)
    answers: dict[bool, list[tuple[int, str | None, str | None, bytes]]] = {}
    served: dict[bool, int] = {}
    for compiled in (True, False):
        application = create_app(
            Settings(agents=DEMO_AGENTS, mongodb_uri=None, auth=False, max_batch=2, compiled_execution=compiled)
        )
        async with (
            application.router.lifespan_context(application),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=application), base_url="http://localhost") as client,
        ):
            assert (
                await client.post("/graphql", content=PAGE_BODY, headers={"content-type": "application/json"})
            ).status_code == 200
            view = graphql_view(application)
            before = view.prepared_requests
            # when the request is sent twice
            responses = [await client.post("/graphql", content=body, headers=headers) for _ in range(2)]
            served[compiled] = view.prepared_requests - before
        answers[compiled] = [
            (r.status_code, r.headers.get("content-type"), r.headers.get("vary"), r.content) for r in responses
        ]

    # then both apps answer alike, never with a server error, and the compiled one served it
    # through run_prepared when it qualifies
    assert answers[True] == answers[False]
    assert all(status < 500 for status, *_ in answers[True])
    assert served == {True: fast, False: 0}


async def test_a_mutation_sent_as_one_json_object_takes_the_views_shorter_path(
    app: Starlette, http: httpx.AsyncClient
) -> None:
    # given the view's count of requests it served itself (server/view/prepared_http.py)
    view = graphql_view(app)
    served = view.prepared_requests

    # when a mutation is sent as one JSON object
    response = await http.post("/graphql", json={"query": UNKNOWN_RUN_APPROVAL})

    # then the view served it without Strawberry's request parsing, with the mutation's answer
    assert view.prepared_requests == served + 1
    assert response.json()["data"] == {"approveToolCall": {"__typename": "RunNotFound", "code": "RUN_NOT_FOUND"}}


async def test_a_root_plan_calls_the_resolver_once_even_when_it_fails(app: Starlette, http: httpx.AsyncClient) -> None:
    # given a prepared listing answered by its root plan (resolvers/fastpath/root_plan.py)
    await _listing(http, first=1)
    prepared = _prepared(app)
    planned = prepared.planned
    assert "errors" not in (await _listing(http, first=1)).json()
    assert prepared.planned == planned + 1
    answers = []
    calls = 0
    store = app.state.store
    listing = store.list_runs

    async def unavailable(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        raise StoreUnavailableError("injected outage")

    # when the store fails under it, then without the plan (a first request of another text)
    store.list_runs = unavailable
    try:
        answers.append((await _listing(http, first=1)).json())
        first_calls, calls = calls, 0
        answers.append(
            (
                await http.post("/graphql", json={"query": LISTING + " ", "variables": {"agentId": REFUND, "first": 1}})
            ).json()
        )
    finally:
        store.list_runs = listing

    # then the plan called the store once (no second try through graphql-core: an outage would
    # wait twice), and answered as the standard path does
    assert prepared.planned == planned + 2
    assert first_calls == 1
    assert calls == 1
    assert answers[0] == answers[1]
    assert answers[0]["data"] is None
    assert answers[0]["errors"][0]["extensions"]["code"] == "STORE_UNAVAILABLE"


async def test_the_document_caches_keep_at_most_their_number_of_documents(
    app: Starlette, http: httpx.AsyncClient
) -> None:
    # the bound SECURITY.md lists for the caches a client fills with distinct documents: items
    # (CACHE_SIZE of each), each a document of at most the token limit
    from strawberry.extensions import ParserCache

    parsed = ParserCache(maxsize=CACHE_SIZE).cached_parse_document
    for number in range(CACHE_SIZE + 40):
        response = await http.post("/graphql", json={"query": f"query Distinct{number} {{ agents {{ id }} }}"})
        assert response.status_code == 200, response.text

    assert len(_prepared(app)) <= CACHE_SIZE
    assert parsed.cache_info().currsize <= CACHE_SIZE
    assert _validated.cache_info().currsize <= CACHE_SIZE
