"""GraphQL over HTTP (https://graphql.github.io/graphql-over-http/draft/): media types and status codes.

A client that accepts ``application/graphql-response+json`` gets it, and a request error (the
document does not parse or validate, or the variables do not coerce) is then a 400 with no
``data`` entry; ``application/json`` clients keep getting 200. The full audit of the spec, with
graphql-http's own suite, is ``tests/ecosystem/test_http_conformance.py``.
"""

from __future__ import annotations

import json

import httpx
import pytest
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send

from server.app import create_app
from server.settings import Settings
from server.view.conformance import preferred_media_type

from .._graphql import graphql_view, refusal_message

GRAPHQL_RESPONSE = "application/graphql-response+json"

AGENTS = "{ agents { id } }"
SYNTAX_ERROR = "{ agents { id }"
UNKNOWN_FIELD = "{ agents { nope } }"
LIST_FROM = """
query List($from: DateTime!) { suspendedRuns(agentId: "refund-agent", filter: {fromDate: $from}) { totalCount } }
"""
BAD_PAGE = '{ suspendedRuns(agentId: "refund-agent", page: {page: -1, perPage: 1}) { totalCount } }'
BAD_LITERALS = {
    "queue-deadline": '{ reviewQueue(filter: {expiresBefore: "yesterday"}) { totalCount } }',
    "runs-from": '{ suspendedRuns(agentId: "refund-agent", filter: {fromDate: "yesterday"}) { totalCount } }',
    "json-number": 'mutation { resumeRun(input: {agentId: "weather-agent", runId: "r", resumeData: 1e999}) '
    "{ __typename } }",
}
"""Literals their scalar refuses while the document is validated (``DateTime``, ``JSON``)."""


@pytest.fixture
def settings() -> Settings:
    """The HTTP layer does not depend on the store: the memory store only."""
    return Settings(mongodb_uri=None, agents="runtime.demo:AGENTS", graphiql=True, auth=False)


async def _post(http: httpx.AsyncClient, accept: str | None, query: str, **variables: object) -> httpx.Response:
    headers = {} if accept is None else {"accept": accept}
    return await http.post("/graphql", json={"query": query, "variables": variables}, headers=headers)


@pytest.mark.parametrize(
    ("accept", "media_type"),
    [
        (None, "application/json"),
        ("*/*", "application/json"),
        ("application/json", "application/json"),
        (GRAPHQL_RESPONSE, GRAPHQL_RESPONSE),
        (f"{GRAPHQL_RESPONSE}, application/json;q=0.9", GRAPHQL_RESPONSE),
        (f"application/json, {GRAPHQL_RESPONSE}", GRAPHQL_RESPONSE),
        (f"{GRAPHQL_RESPONSE};q=0.5, application/json", "application/json"),
        (f"{GRAPHQL_RESPONSE};q=0, */*", "application/json"),
        ("text/html", "application/json"),
        (", ".join(["text/plain"] * 40 + [GRAPHQL_RESPONSE]), GRAPHQL_RESPONSE),
    ],
)
def test_the_response_media_type_follows_the_accept_header(accept: str | None, media_type: str) -> None:
    assert preferred_media_type(accept) == media_type


async def test_a_client_accepting_graphql_response_json_gets_it(http: httpx.AsyncClient) -> None:
    # when a valid query is sent by a client that accepts the spec's media type
    response = await _post(http, f"{GRAPHQL_RESPONSE}, application/json;q=0.9", AGENTS)

    # then the answer uses it, with 200 and the data
    assert response.status_code == 200
    assert response.headers["content-type"] == f"{GRAPHQL_RESPONSE}; charset=utf-8"
    assert response.headers["vary"] == "Accept"
    assert [agent["id"] for agent in response.json()["data"]["agents"]] == [
        "refund-agent",
        "support-supervisor",
        "weather-agent",
    ]


@pytest.mark.parametrize(
    ("query", "variables", "message"),
    [
        (SYNTAX_ERROR, {}, "Syntax Error"),
        (UNKNOWN_FIELD, {}, "Cannot query field 'nope'"),
        (LIST_FROM, {"from": "2025-01-01T00:00:00"}, "$from"),
    ],
    ids=["parse", "validation", "variable-coercion"],
)
async def test_a_request_error_is_400_without_data_for_graphql_response_json(
    http: httpx.AsyncClient, query: str, variables: dict[str, object], message: str
) -> None:
    # when a request that cannot be executed is sent accepting application/graphql-response+json
    response = await _post(http, GRAPHQL_RESPONSE, query, **variables)

    # then it is a 400 in that media type, with the errors and no data entry
    assert response.status_code == 400
    assert response.headers["content-type"] == f"{GRAPHQL_RESPONSE}; charset=utf-8"
    body = response.json()
    assert "data" not in body
    assert message in body["errors"][0]["message"]


async def test_a_request_error_stays_200_for_application_json_clients(http: httpx.AsyncClient) -> None:
    # when an invalid document is sent by a client that accepts only application/json
    response = await _post(http, "application/json", UNKNOWN_FIELD)

    # then the answer is the legacy one: 200, application/json, errors and no data entry
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert "data" not in body
    assert "Cannot query field 'nope'" in body["errors"][0]["message"]


async def test_a_field_error_that_nulls_data_is_still_200(http: httpx.AsyncClient) -> None:
    # when execution starts and a field fails (a bad page argument), nulling the whole data
    response = await _post(http, GRAPHQL_RESPONSE, BAD_PAGE)

    # then the operation did execute: 200, with data null and the field's error
    assert response.status_code == 200
    assert response.headers["content-type"] == f"{GRAPHQL_RESPONSE}; charset=utf-8"
    body = response.json()
    assert body["data"] is None
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    assert body["errors"][0]["path"] == ["suspendedRuns"]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
async def test_a_post_of_an_unsupported_content_type_says_which_types_are_accepted(
    http: httpx.AsyncClient, content_type: str | None
) -> None:
    # when a client POSTs a document with another content type than JSON (or none)
    headers = {} if content_type is None else {"content-type": content_type}
    response = await http.post("/graphql", content=AGENTS.encode(), headers=headers)

    # then the 400 names the type it got and the ones runsgate accepts
    message = refusal_message(response)
    assert message.startswith(f'Unsupported content type "{content_type or ""}"; '), message
    assert "Content-Type: application/json" in message
    assert GRAPHQL_RESPONSE in message
    assert "GET parameters" in message


@pytest.mark.parametrize("accept", [None, "application/json", GRAPHQL_RESPONSE])
@pytest.mark.parametrize(
    ("method", "target", "body", "content_type", "status", "code", "says"),
    [
        ("POST", "/graphql", b'{"query": ', "application/json", 400, "BAD_REQUEST", "Unable to parse request body"),
        ("POST", "/graphql", b'"{ agents { id } }"', "application/json", 400, "BAD_REQUEST", "must be a JSON object"),
        ("POST", "/graphql", b"{}", "application/json", 400, "BAD_REQUEST", "No GraphQL query found"),
        ("POST", "/graphql", AGENTS.encode(), "application/graphql", 400, "BAD_REQUEST", "Unsupported content type"),
        ("GET", "/graphql?query=mutation{__typename}", b"", None, 405, "METHOD_NOT_ALLOWED", "send it by POST"),
        ("GET", "/graphql?query={agents{id}}&variables=[", b"", None, 400, "BAD_REQUEST", "query parameter as JSON"),
        ("PUT", "/graphql", b"{}", "application/json", 405, "METHOD_NOT_ALLOWED", "PUT /graphql takes only"),
        ("POST", "/graphq", b"{}", "application/json", 404, "NOT_FOUND", "no route serves /graphq"),
    ],
    ids=[
        "malformed-json",
        "not-an-object",
        "no-query",
        "content-type",
        "get-mutation",
        "get-variables",
        "put",
        "no-route",
    ],
)
async def test_a_request_refused_before_it_runs_is_a_typed_graphql_error_not_text(
    http: httpx.AsyncClient,
    accept: str | None,
    method: str,
    target: str,
    body: bytes,
    content_type: str | None,
    status: int,
    code: str,
    says: str,
) -> None:
    # when a client sends a request that never executes: its body, content type, method or parameters
    headers = {key: value for key, value in (("accept", accept), ("content-type", content_type)) if value}
    response = await http.request(method, target, content=body or None, headers=headers)

    # then it gets the status, and errors with a code, as every refusal (never a text/plain body)
    assert says in refusal_message(response, status, code)
    if status == 400:  # the view's refusals are in the negotiated media type; the routes' in JSON
        expected = GRAPHQL_RESPONSE if accept == GRAPHQL_RESPONSE else "application/json"
        assert response.headers["content-type"].split(";")[0] == expected
    if status == 405:  # Allow: the methods that serve it (a mutation: POST only), else those /graphql serves
        served = {"POST"} if "mutation" in target else {"GET", "POST"}
        assert set(response.headers["allow"].split(", ")) == served


@pytest.mark.parametrize(
    ("method", "target"),
    [
        ("HEAD", "/graphql"),
        ("HEAD", "/graphql?query={agents{id}}"),
        ("PUT", "/graphql"),
        ("DELETE", "/graphql"),
        ("OPTIONS", "/graphql"),
        ("PATCH", "/graphql"),
    ],
    ids=["head", "head-query", "put", "delete", "options", "patch"],
)
async def test_graphql_serves_get_and_post_only_and_every_405_says_so(
    http: httpx.AsyncClient, method: str, target: str
) -> None:
    # when a client sends /graphql another method than GET or POST (HEAD too, which Starlette
    # would otherwise route to the view as if it were served)
    response = await http.request(method, target)

    # then it is a 405 whose Allow lists exactly the methods /graphql serves
    assert response.status_code == 405, response.text
    assert sorted(response.headers["allow"].split(", ")) == ["GET", "POST"]
    if method != "HEAD":  # a HEAD answer has no body to read
        assert f"{method} /graphql takes only" in refusal_message(response, 405, "METHOD_NOT_ALLOWED")


@pytest.mark.parametrize("method", ["HEAD", "PUT"])
async def test_a_405_of_the_view_itself_carries_allow(app: Starlette, method: str) -> None:
    # given the view reached without its route's check of the method (as under another route)
    view = graphql_view(app)

    async def unrouted(scope: Scope, receive: Receive, send: Send) -> None:
        scope["app"] = app
        await view(scope, receive, send)

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=unrouted), base_url="http://localhost") as client:
        # when it gets a method it does not serve
        response = await client.request(method, "/graphql", params={"query": AGENTS})

    # then its own 405 (Strawberry's) lists in Allow what it serves, as the route's does
    assert response.status_code == 405, response.text
    assert sorted(response.headers["allow"].split(", ")) == ["GET", "POST"]
    if method != "HEAD":
        assert "GET and POST" in refusal_message(response, 405, "METHOD_NOT_ALLOWED")


@pytest.mark.parametrize("accept", [None, "application/json", GRAPHQL_RESPONSE])
async def test_a_mutation_sent_by_get_is_405_allowing_post(http: httpx.AsyncClient, accept: str | None) -> None:
    # when a client sends a mutation by GET (GraphQL over HTTP: "the server MUST respond with 405")
    headers = {} if accept is None else {"accept": accept}
    response = await http.get("/graphql", params={"query": "mutation { __typename }"}, headers=headers)

    # then it is a 405 that says to POST it, with Allow: POST, the one method that serves it
    message = refusal_message(response, 405, "METHOD_NOT_ALLOWED")
    assert "POST" in message, message
    assert response.headers["allow"] == "POST"


TWO_QUERIES = "query A { agents { id } } query B { agents { name } }"
SUBSCRIBE = 'subscription S { suspendedRunEvents(agentId: "refund-agent") { type } }'
REQUEST_ERRORS: list[tuple[str, dict[str, object], str, str]] = [
    # (case, request parameters, extensions.code of every error, a part of the first message)
    ("parse", {"query": SYNTAX_ERROR}, "GRAPHQL_PARSE_FAILED", "Syntax Error"),
    ("validation", {"query": UNKNOWN_FIELD}, "GRAPHQL_VALIDATION_FAILED", "Cannot query field 'nope'"),
    (
        "validations",
        {"query": "{ agents { nope } suspendedRuns { totalCount } }"},
        "GRAPHQL_VALIDATION_FAILED",
        "Cannot query field 'nope'",
    ),
    (
        "variable-coercion",
        {"query": LIST_FROM, "variables": {"from": "2025-01-01T00:00:00"}},
        "BAD_USER_INPUT",
        "$from",
    ),
    (
        "unknown-operation",
        {"query": TWO_QUERIES, "operationName": "C"},
        "OPERATION_RESOLUTION_FAILURE",
        "Unknown operation named 'C'.",
    ),
    ("no-operation-name", {"query": TWO_QUERIES}, "OPERATION_RESOLUTION_FAILURE", "Must provide operation name"),
    (
        "no-operation",
        {"query": "fragment F on Query { agents { id } }"},
        "OPERATION_RESOLUTION_FAILURE",
        "Must provide an operation.",
    ),
    ("subscription", {"query": SUBSCRIBE}, "SUBSCRIPTIONS_OVER_WEBSOCKET", "WebSocket"),
    ("datetime-literal", {"query": BAD_LITERALS["queue-deadline"]}, "GRAPHQL_VALIDATION_FAILED", "'yesterday'"),
    ("datetime-filter", {"query": BAD_LITERALS["runs-from"]}, "GRAPHQL_VALIDATION_FAILED", "not RFC 3339"),
]


@pytest.mark.parametrize("accept", ["application/json", GRAPHQL_RESPONSE])
@pytest.mark.parametrize("method", ["POST", "GET"])
@pytest.mark.parametrize(
    ("parameters", "code", "says"), [case[1:] for case in REQUEST_ERRORS], ids=[case[0] for case in REQUEST_ERRORS]
)
async def test_every_request_error_has_a_code(
    http: httpx.AsyncClient, method: str, accept: str, parameters: dict[str, object], code: str, says: str
) -> None:
    # when a request that never executes is sent, by POST or GET, twice (the second may be served
    # from the caches of parsing and validation, or as a prepared operation)
    headers = {"accept": accept}
    for _ in range(2):
        if method == "POST":
            response = await http.post("/graphql", json=parameters, headers=headers)
        else:
            params = {k: json.dumps(v) if k == "variables" else str(v) for k, v in parameters.items()}
            response = await http.get("/graphql", params=params, headers=headers)

        # then it is a request error (no data; 400 for the spec's media type), and each of its
        # errors has the code of what went wrong
        assert response.status_code == (400 if accept == GRAPHQL_RESPONSE else 200), response.text
        body = response.json()
        assert "data" not in body, body
        assert says in body["errors"][0]["message"], body
        assert [error["extensions"]["code"] for error in body["errors"]] == [code] * len(body["errors"]), body


async def test_a_prepared_query_whose_variables_do_not_coerce_is_bad_user_input(
    app: Starlette, http: httpx.AsyncClient
) -> None:
    # given a query that ran once, so that the view's fast path serves it (server/view/prepared_http.py)
    query = 'query Page($n: Int) { suspendedRuns(agentId: "refund-agent", first: $n) { totalCount } }'
    assert "errors" not in (await http.post("/graphql", json={"query": query, "variables": {"n": 1}})).json()
    view = graphql_view(app)
    served = view.prepared_requests

    # when it is sent with a variable that does not coerce
    response = await http.post("/graphql", json={"query": query, "variables": {"n": "many"}})

    # then the fast path answers it with the standard path's code
    assert view.prepared_requests == served + 1
    body = response.json()
    assert "data" not in body, body
    assert [error["extensions"]["code"] for error in body["errors"]] == ["BAD_USER_INPUT"], body


@pytest.mark.parametrize("case", list(BAD_LITERALS))
async def test_a_literal_its_scalar_refuses_fails_validation_on_both_paths(settings: Settings, case: str) -> None:
    # given an app on the compiled path (the default) and one on Strawberry's alone
    answers: dict[bool, list[httpx.Response]] = {}
    for compiled in (True, False):
        app = create_app(settings.model_copy(update={"compiled_execution": compiled}))
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as http,
        ):
            # when a document with a literal its scalar refuses is sent twice (the second from the caches)
            answers[compiled] = [await http.post("/graphql", json={"query": BAD_LITERALS[case]}) for _ in range(2)]

    # then each answer is a validation failure with its code, byte for byte the same on both paths
    standard = answers[False][0]
    assert [error["extensions"]["code"] for error in standard.json()["errors"]] == ["GRAPHQL_VALIDATION_FAILED"]
    for response in [*answers[True], *answers[False]]:
        assert (response.status_code, response.content) == (standard.status_code, standard.content)
