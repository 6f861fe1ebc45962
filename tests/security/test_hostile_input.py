"""Hostile input, hand-written, over HTTP against a real secured server on MongoDB.

Every case must be refused cleanly: no 5xx, no masked fault ("Unexpected error.") and no
traceback in the server's log, the error the case expects (a typed ``BAD_USER_INPUT``, a
GraphQL request error, 400, 401 or 413, a null or ``RunNotFound`` for what the caller may not
see), and nothing written: the database holds the same documents before and after.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from .._auth import TestKey
from .._graphql import data
from ._store import store_state
from .conftest import ADMIN, ALICE, BOB, Server

pytestmark = pytest.mark.mongo

LIST = """query L($agentId: ID!, $filter: SuspendedRunFilter, $page: PageInput, $first: Int, $after: String,
  $last: Int, $before: String) {
  suspendedRuns(agentId: $agentId, filter: $filter, page: $page, first: $first, after: $after, last: $last,
    before: $before) { totalCount nodes { runId } } }"""
ONE = "query O($agentId: ID!, $runId: ID!) { suspendedRun(agentId: $agentId, runId: $runId) { runId } }"
NODE = "query N($id: ID!) { node(id: $id) { id } }"
EVENTS = "query E($agentId: ID!, $runId: ID!) { runEvents(agentId: $agentId, runId: $runId) { type } }"
ENTITIES = "query X($r: [_Any!]!) { _entities(representations: $r) { ... on SuspendedRun { runId } } }"
_RESULT = "{ __typename ... on UserError { code message } ... on RunOutcome { status } }"
APPROVE = "mutation A($input: ApproveToolCallInput!) { approveToolCall(input: $input) " + _RESULT + " }"
DECLINE = "mutation D($input: DeclineToolCallInput!) { declineToolCall(input: $input) " + _RESULT + " }"
RESUME = "mutation R($input: ResumeRunInput!) { resumeRun(input: $input) " + _RESULT + " }"
START = "mutation S($input: StartRunInput!) { startRun(input: $input) " + _RESULT + " }"

MASKED = "Unexpected error."


def b64(raw: bytes | str) -> str:
    return base64.urlsafe_b64encode(raw.encode() if isinstance(raw, str) else raw).decode().rstrip("=")


def global_id(type_name: str, node_id: str) -> str:
    return base64.b64encode(f"{type_name}:{node_id}".encode()).decode()


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@dataclass(frozen=True)
class Tenants:
    """Suspended runs of tenant-a (alice's) and tenant-b (bob's), started by the admin."""

    a_refund: str
    a_call: str
    b_refund: str
    b_call: str
    a_weather: str


@pytest.fixture(scope="module")
def tenants(mongo_server: Server) -> Tenants:
    def start(agent: str, prompt: str, resource: str) -> tuple[str, str]:
        query = START.replace("{ status }", "{ status run { runId toolCalls { toolCallId } } }")
        fields = {"agentId": agent, "prompt": prompt, "resourceId": resource}
        run = data(mongo_server.url, ADMIN, query, input=fields)["startRun"]["run"]
        return run["runId"], run["toolCalls"][0]["toolCallId"]

    a_refund, a_call = start("refund-agent", "Please refund order 1042", "tenant-a")
    b_refund, b_call = start("refund-agent", "Please refund order 1042", "tenant-b")
    a_weather, _ = start("weather-agent", "What's the weather like?", "tenant-a")
    return Tenants(a_refund, a_call, b_refund, b_call, a_weather)


Check = Callable[[httpx.Response, Tenants], None]


def status(code: int) -> Check:
    def check(response: httpx.Response, _: Tenants) -> None:
        assert response.status_code == code, response.text

    return check


def coded(code: str, argument: str) -> Check:
    """A typed GraphQL error: ``extensions.code`` and the ``argument`` it names."""

    def check(response: httpx.Response, _: Tenants) -> None:
        errors = response.json()["errors"]
        assert errors[0]["extensions"] == {"code": code, "argument": argument}, errors

    return check


def bad_user_input(argument: str) -> Check:
    return coded("BAD_USER_INPUT", argument)


def request_error(fragment: str) -> Check:
    """A GraphQL request error (parse, validation, variable coercion): no path, data null."""

    def check(response: httpx.Response, _: Tenants) -> None:
        body = response.json()
        assert body.get("data") is None, body
        assert fragment.lower() in body["errors"][0]["message"].lower(), body
        assert "path" not in body["errors"][0], body

    return check


def answer(field: str, expected: Any) -> Check:
    def check(response: httpx.Response, _: Tenants) -> None:
        body = response.json()
        assert "errors" not in body, body
        assert body["data"][field] == expected, body

    return check


def union(field: str, typename: str, code: str | None = None) -> Check:
    def check(response: httpx.Response, _: Tenants) -> None:
        body = response.json()
        assert "errors" not in body, body
        result = body["data"][field]
        assert result["__typename"] == typename, result
        if code is not None:
            assert result["code"] == code, result

    return check


@dataclass(frozen=True)
class Case:
    name: str
    check: Check
    document: str | None = None
    variables: Callable[[Tenants], dict[str, Any]] = field(default=lambda t: {})
    raw: bytes | None = None
    """Sent as the body instead of ``{"query": document, "variables": ...}``."""
    key: TestKey | None = ALICE
    headers: dict[str, str | bytes] = field(default_factory=dict)


def list_vars(**arguments: Any) -> Callable[[Tenants], dict[str, Any]]:
    return lambda t: {"agentId": "refund-agent", **arguments}


CASES = [
    # -- invalid dates
    *[
        Case(f"date-{label}", request_error("DateTime"), LIST, list_vars(filter={"fromDate": value}))
        for label, value in [
            ("month-13", "2026-13-45T00:00:00Z"),
            ("word", "yesterday"),
            ("no-offset", "2026-01-01T00:00:00"),
            ("year-275760", "+275760-09-13T00:00:00Z"),
            ("before-year-1", "0001-01-01T00:00:00+14:00"),
            ("number", 1767225600),
            ("empty", ""),
            ("nul", "2026-01-01T00:00:00Z\u0000"),
        ]
    ],
    Case(
        "date-from-after-to",
        bad_user_input("filter.fromDate"),
        LIST,
        list_vars(filter={"fromDate": "2026-02-01T00:00:00Z", "toDate": "2026-01-01T00:00:00Z"}),
    ),
    Case(
        "date-literal-in-document",
        request_error("DateTime"),
        '{ suspendedRuns(agentId: "refund-agent", filter: {toDate: "31/12/2026"}) { totalCount } }',
    ),
    # -- invalid cursors
    *[
        Case(f"cursor-{label}", bad_user_input(argument), LIST, list_vars(**{argument: value}))
        for label, argument, value in [
            ("punctuation", "after", "!!!"),
            ("empty", "after", ""),
            ("not-a-pair", "after", b64("[1,2,3]")),
            ("object", "before", b64('{"a": 1}')),
            ("number-id", "after", b64('["2026-01-01T00:00:00Z", 1]')),
            ("bad-date", "after", b64('["x", "y"]')),
            ("date-overflow", "after", b64('["0001-01-01T00:00:00+14:00", "x"]')),
            ("binary", "before", b64(b"\xff\xfe\x00\x01")),
            ("nul", "after", "\u0000"),
            ("long", "after", "A" * 100_000),
        ]
    ],
    # -- wrong types in variables
    Case("page-strings", request_error("Int"), LIST, list_vars(page={"page": "0", "perPage": "ten"})),
    Case("page-negative", bad_user_input("page.page"), LIST, list_vars(page={"page": -1, "perPage": 10})),
    Case("per-page-zero", bad_user_input("page.perPage"), LIST, list_vars(page={"page": 0, "perPage": 0})),
    Case("per-page-huge", bad_user_input("page.perPage"), LIST, list_vars(page={"page": 0, "perPage": 10**6})),
    Case("first-over-int32", request_error("32-bit"), LIST, list_vars(first=2**31)),
    Case("first-float", request_error("Int"), LIST, list_vars(first=1.5)),
    Case("first-negative", bad_user_input("first"), LIST, list_vars(first=-1)),
    Case("first-and-page", bad_user_input("page"), LIST, list_vars(first=1, page={"page": 0, "perPage": 1})),
    Case("agent-id-object", request_error("ID"), LIST, lambda t: {"agentId": {"$ne": None}}),
    Case("run-id-list", request_error("ID"), ONE, lambda t: {"agentId": "refund-agent", "runId": ["a"]}),
    Case("input-null", request_error("input"), APPROVE, lambda t: {"input": None}),
    Case(
        "resume-data-missing",
        request_error("resumeData"),
        RESUME,
        lambda t: {"input": {"agentId": "weather-agent", "runId": t.a_weather}},
    ),
    Case("variables-a-string", status(400), raw=b'{"query": "{ agents { id } }", "variables": "x"}'),
    Case("query-a-number", status(400), raw=b'{"query": 42}'),
    Case("body-a-list", status(400), raw=b'[{"query": "{ agents { id } }"}]'),
    Case(
        "unknown-operation-name",
        request_error("Unknown operation named 'B'"),
        raw=b'{"query": "query A { agents { id } }", "operationName": "B"}',
    ),
    Case(
        "two-operations-without-a-name",
        request_error("Must provide operation name"),
        raw=b'{"query": "query A { agents { id } } query B { agents { name } }"}',
    ),
    # -- huge and deeply nested JSON
    Case("body-2-mib", status(413), raw=b'{"query": "' + b" " * (2 << 20) + b'{ agents { id } }"}'),
    Case("json-nested-100k", status(400), raw=b"[" * 100_000 + b"]" * 100_000),
    Case(
        "resume-data-200-kib",
        bad_user_input("input.resumeData"),
        RESUME,
        lambda t: {"input": {"agentId": "weather-agent", "runId": t.a_weather, "resumeData": {"name": "x" * 200_000}}},
    ),
    Case(
        "resume-data-nested-500",
        bad_user_input("input.resumeData"),
        RESUME,
        lambda t: {"input": {"agentId": "weather-agent", "runId": t.a_weather, "resumeData": nested(500)}},
    ),
    Case(
        "resume-data-nested-5000",
        status(400),
        raw=b'{"query": "mutation($i: ResumeRunInput!) { resumeRun(input: $i) { __typename } }", "variables":'
        b' {"i": {"agentId": "weather-agent", "runId": "x", "resumeData": ' + b"[" * 5000 + b"]" * 5000 + b"}}}",
    ),
    Case(
        "literal-nested-400",
        request_error("nested too deeply"),
        'mutation { resumeRun(input: {agentId: "weather-agent", runId: "x", resumeData: '
        + "[" * 400
        + "]" * 400
        + "}) { __typename } }",
    ),
    Case(
        "many-aliases",
        request_error("aliases"),
        "{" + " ".join(f"a{i}: agents {{ id }}" for i in range(100)) + "}",
    ),
    Case("many-tokens", request_error("tokens"), "{ agents { " + "id " * 5000 + "} }"),
    Case("nan", status(400), raw=b'{"query": "{ agents { id } }", "variables": {"x": NaN}}'),
    Case(
        "fragment-cycle",
        request_error("within itself"),
        "fragment A on Query { ...B } fragment B on Query { ...A } { ...A }",
    ),
    # -- unicode and NUL bytes in ids
    Case("run-id-nul", answer("suspendedRun", None), ONE, lambda t: {"agentId": "refund-agent", "runId": "\u0000"}),
    Case(
        "run-id-nul-inside",
        answer("suspendedRun", None),
        ONE,
        lambda t: {"agentId": "refund-agent", "runId": t.a_refund + "\u0000"},
    ),
    Case("run-id-emoji", answer("suspendedRun", None), ONE, lambda t: {"agentId": "refund-agent", "runId": "🙂\u202e"}),
    Case("run-id-100k", bad_user_input("runId"), ONE, lambda t: {"agentId": "refund-agent", "runId": "r" * 100_000}),
    Case(
        "run-id-lone-surrogate",
        status(400),
        raw=b'{"query": "query($r: ID!) { suspendedRun(agentId: \\"refund-agent\\", runId: $r) { runId } }",'
        b' "variables": {"r": "\\ud800"}}',
    ),
    Case(
        "literal-lone-surrogate",
        request_error("Unicode"),
        '{ suspendedRun(agentId: "refund-agent", runId: "\\ud800") { runId } }',
    ),
    Case(
        "agent-id-nul",
        coded("AGENT_NOT_FOUND", "agentId"),
        ONE,
        lambda t: {"agentId": "refund-agent\u0000", "runId": t.a_refund},
    ),
    Case(
        "approve-nul-ids",
        union("approveToolCall", "RunNotFound", "RUN_NOT_FOUND"),
        APPROVE,
        lambda t: {"input": {"agentId": "refund-agent", "runId": "\u0000", "toolCallId": "\u0000"}},
    ),
    Case(
        "thread-filter-operator-string",
        answer("suspendedRuns", {"totalCount": 0, "nodes": []}),
        LIST,
        list_vars(filter={"threadId": '{"$ne": null}', "resourceId": "tenant-a\u0000"}),
    ),
    # -- ids of other tenants
    Case(
        "other-tenant-run",
        answer("suspendedRun", None),
        ONE,
        lambda t: {"agentId": "refund-agent", "runId": t.b_refund},
    ),
    Case(
        "other-tenant-events",
        answer("runEvents", []),
        EVENTS,
        lambda t: {"agentId": "refund-agent", "runId": t.b_refund},
    ),
    Case(
        "other-tenant-filter",
        answer("suspendedRuns", {"totalCount": 0, "nodes": []}),
        LIST,
        list_vars(filter={"resourceId": "tenant-b"}),
    ),
    Case(
        "other-tenant-approve",
        union("approveToolCall", "RunNotFound", "RUN_NOT_FOUND"),
        APPROVE,
        lambda t: {"input": {"agentId": "refund-agent", "runId": t.b_refund, "toolCallId": t.b_call}},
    ),
    Case(
        "other-tenant-approve-with-idempotency-key",
        union("approveToolCall", "RunNotFound", "RUN_NOT_FOUND"),
        APPROVE,
        lambda t: {
            "input": {"agentId": "refund-agent", "runId": t.b_refund, "toolCallId": t.b_call, "idempotencyKey": "k1"}
        },
    ),
    Case(
        "other-tenant-decline",
        union("declineToolCall", "RunNotFound", "RUN_NOT_FOUND"),
        DECLINE,
        lambda t: {"input": {"agentId": "refund-agent", "runId": t.b_refund, "toolCallId": t.b_call}},
    ),
    Case(
        "other-tenant-entities",
        answer("_entities", [None]),
        ENTITIES,
        lambda t: {"r": [{"__typename": "SuspendedRun", "runId": t.b_refund}]},
    ),
    Case(
        "other-tenant-start",
        union("startRun", "Forbidden", "FORBIDDEN"),
        START,
        lambda t: {
            "input": {"agentId": "refund-agent", "prompt": "Please refund order 1042", "resourceId": "tenant-b"}
        },
    ),
    Case(
        "tenant-b-key-on-tenant-a-run",
        union("approveToolCall", "RunNotFound", "RUN_NOT_FOUND"),
        APPROVE,
        lambda t: {"input": {"agentId": "refund-agent", "runId": t.a_refund, "toolCallId": t.a_call}},
        key=BOB,
    ),
    # -- forged global ids and entity representations
    Case("global-id-other-tenant", answer("node", None), NODE, lambda t: {"id": global_id("SuspendedRun", t.b_refund)}),
    Case("global-id-agent-type", answer("node", None), NODE, lambda t: {"id": global_id("Agent", "refund-agent")}),
    Case("global-id-unknown-type", answer("node", None), NODE, lambda t: {"id": global_id("Admin", "root")}),
    Case("global-id-empty-node", answer("node", None), NODE, lambda t: {"id": global_id("SuspendedRun", "")}),
    Case("global-id-nul", answer("node", None), NODE, lambda t: {"id": global_id("SuspendedRun", "\u0000")}),
    Case("global-id-not-base64", bad_user_input("id"), NODE, lambda t: {"id": "not base64!"}),
    Case("global-id-binary", bad_user_input("id"), NODE, lambda t: {"id": base64.b64encode(b"\xff\xfe\xfd").decode()}),
    Case(
        "global-id-no-colon", bad_user_input("id"), NODE, lambda t: {"id": base64.b64encode(b"SuspendedRun").decode()}
    ),
    Case(
        "entities-without-key",
        bad_user_input("representations[0]"),
        ENTITIES,
        lambda t: {"r": [{"__typename": "SuspendedRun"}]},
    ),
    Case(
        "entities-unknown-type",
        bad_user_input("representations[0]"),
        ENTITIES,
        lambda t: {"r": [{"__typename": "Admin", "runId": t.a_refund}]},
    ),
    Case(
        "entities-operator-key",
        bad_user_input("representations[0]"),
        ENTITIES,
        lambda t: {"r": [{"__typename": "SuspendedRun", "runId": {"$ne": None}}]},
    ),
    Case("entities-not-objects", bad_user_input("representations[0]"), ENTITIES, lambda t: {"r": [1]}),
    # -- credentials
    Case("no-credentials", status(401), LIST, list_vars(), key=None),
    Case(
        "non-ascii-token",
        status(401),
        LIST,
        list_vars(),
        key=None,
        headers={"Authorization": b"Bearer rg_\xc3\xa9\xff"},
    ),
    Case(
        "forged-jwt-none",
        status(401),
        LIST,
        list_vars(),
        key=None,
        headers={"Authorization": "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9."},
    ),
]


def _send(server: Server, case: Case, tenants: Tenants) -> httpx.Response:
    headers: dict[str, str | bytes] = {
        "Content-Type": "application/json",
        **(case.key.headers if case.key else {}),
        **case.headers,
    }
    if case.raw is not None:
        content = case.raw
    else:
        content = json.dumps({"query": case.document, "variables": case.variables(tenants)}).encode()
    return httpx.post(f"{server.url}/graphql", content=content, headers=headers, timeout=60)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_hostile_input_is_refused_cleanly_and_writes_nothing(
    mongo_server: Server, tenants: Tenants, case: Case
) -> None:
    assert mongo_server.mongodb_uri is not None
    before = store_state(mongo_server.mongodb_uri)
    log_mark = mongo_server.log.stat().st_size

    response = _send(mongo_server, case, tenants)

    assert response.status_code < 500, response.text
    if response.headers.get("content-type", "").startswith("application/json"):
        for error in response.json().get("errors") or []:
            assert error["message"] != MASKED, error
    case.check(response, tenants)
    assert store_state(mongo_server.mongodb_uri) == before
    with open(mongo_server.log, encoding="utf-8", errors="replace") as log:
        log.seek(log_mark)
        written = log.read()
    assert "Traceback" not in written, written
    assert "unexpected error" not in written, written


def test_the_seeded_runs_are_still_there_and_intact(mongo_server: Server, tenants: Tenants) -> None:
    # after every hostile case, the admin still lists the three runs, each still waiting
    for run_id, agent in [(tenants.a_refund, "refund-agent"), (tenants.b_refund, "refund-agent")]:
        run = data(mongo_server.url, ADMIN, ONE.replace("{ runId }", "{ runId status }"), agentId=agent, runId=run_id)
        assert run["suspendedRun"] == {"runId": run_id, "status": "SUSPENDED"}
    weather = data(mongo_server.url, ADMIN, ONE, agentId="weather-agent", runId=tenants.a_weather)
    assert weather["suspendedRun"] == {"runId": tenants.a_weather}
