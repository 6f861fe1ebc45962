"""Each root field's scope (its permission class) holds on every execution path.

Over HTTP against the real secured servers, with compiled execution on (the default): a query
document seen before runs as a prepared operation or a root plan that may call the field's
resolver directly, and must still run the field's permission check. So the same document is
sent by a principal that holds the scope, then twice by one that does not: both refusals are
the same ``FORBIDDEN`` error, and the first principal is still answered afterwards. The selections
are plain fields of an existing run, so the compiled path answers them when it may.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from websockets.asyncio.client import connect

from .._graphql import body, data
from .conftest import ADMIN, READER, STARTER, Server

REFUND = "refund-agent"

# Selections of plain fields only, which the root plan answers itself (``resolvers/fastpath/root_plan.py``).
LIST = 'query { suspendedRuns(agentId: "refund-agent") { edges { node { runId status } } pageInfo { hasNextPage } } }'
ONE = "query One($agentId: ID!, $runId: ID!) { suspendedRun(agentId: $agentId, runId: $runId) { runId status } }"
START = """
mutation S($input: StartRunInput!) { startRun(input: $input) { __typename ... on RunOutcome { runId status } } }"""


def _forbidden(field: str, scope: str = "runs:read") -> dict[str, Any]:
    """The error of a root field refused for want of ``scope`` (locations left out)."""
    return {
        "message": f"this operation needs the scope {scope!r}",
        "path": [field],
        "extensions": {"code": "FORBIDDEN", "requiredScope": scope},
    }


def _errors(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in error.items() if k != "locations"} for error in result["errors"]]


@pytest.mark.parametrize(
    ("document", "field", "refused_data"),
    [(LIST, "suspendedRuns", None), (ONE, "suspendedRun", {"suspendedRun": None})],
    ids=["suspendedRuns", "suspendedRun"],
)
def test_a_document_seen_before_is_still_refused_without_the_scope(
    server: Server, document: str, field: str, refused_data: dict[str, Any] | None
) -> None:
    # given a suspended run, and the document answered with it for a principal holding runs:read
    started = data(server.url, ADMIN, START, input={"agentId": REFUND, "prompt": "Please refund order 1042"})
    assert started["startRun"]["status"] == "SUSPENDED", started
    variables = {"agentId": REFUND, "runId": started["startRun"]["runId"]} if field == "suspendedRun" else {}
    allowed = data(server.url, ADMIN, document, **variables)
    assert allowed[field], allowed

    # when a principal without runs:read sends the very same request twice
    first = body(server.url, STARTER, document, **variables)
    second = body(server.url, STARTER, document, **variables)

    # then both answers are the FORBIDDEN error (not masked), and nothing else
    for refused in (first, second):
        assert refused.get("data") == refused_data, refused
        assert _errors(refused) == [_forbidden(field)], refused

    # and the principal holding the scope is answered as before
    assert data(server.url, ADMIN, document, **variables) == allowed


def test_the_scope_of_every_root_field_is_refused_the_same_way(server: Server) -> None:
    """Queries need runs:read, startRun runs:start, the decisions runs:decide."""
    starter_cases = [
        ('query { node(id: "U3VzcGVuZGVkUnVuOng=") { id } }', "node", {"node": None}),
        ('query { runEvents(agentId: "refund-agent", runId: "x") { id } }', "runEvents", None),
    ]
    for document, field, refused_data in starter_cases:
        for _ in range(2):
            refused = body(server.url, STARTER, document)
            assert refused.get("data") == refused_data, refused
            assert _errors(refused) == [_forbidden(field)], refused

    nested = body(server.url, STARTER, "query { agents { id suspendedRuns { totalCount } } }")
    assert nested.get("data") is None, nested
    assert [e["extensions"] for e in nested["errors"]] == [{"code": "FORBIDDEN", "requiredScope": "runs:read"}]
    assert nested["errors"][0]["path"] == ["agents", 0, "suspendedRuns"]

    # agents needs no scope
    assert len(data(server.url, STARTER, "query { agents { id } }")["agents"]) == 3

    mutations = [
        (
            'mutation { startRun(input: {agentId: "refund-agent", prompt: "x"}) { __typename } }',
            "startRun",
            "runs:start",
        ),
        (
            'mutation { approveToolCall(input: {agentId: "refund-agent", runId: "r", toolCallId: "c"}) '
            "{ __typename } }",
            "approveToolCall",
            "runs:decide",
        ),
        (
            'mutation { declineToolCall(input: {agentId: "refund-agent", runId: "r", toolCallId: "c"}) '
            "{ __typename } }",
            "declineToolCall",
            "runs:decide",
        ),
        (
            'mutation { resumeRun(input: {agentId: "refund-agent", runId: "r", resumeData: 1}) { __typename } }',
            "resumeRun",
            "runs:decide",
        ),
        (
            'mutation { retryRun(input: {agentId: "refund-agent", runId: "r"}) { __typename } }',
            "retryRun",
            "runs:decide",
        ),
    ]
    for document, field, scope in mutations:
        refused = body(server.url, READER, document)
        assert refused.get("data") is None, refused
        assert _errors(refused) == [_forbidden(field, scope)], refused


async def test_a_subscription_without_the_scope_ends_with_the_error_as_its_one_result(server: Server) -> None:
    # given a WebSocket of a principal without runs:read
    ws_url = server.url.replace("http://", "ws://") + "/graphql"
    async with connect(ws_url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
        await ws.send(json.dumps({"type": "connection_init", "payload": {"Authorization": f"Bearer {STARTER.key}"}}))
        assert json.loads(await ws.recv())["type"] == "connection_ack"

        # when it subscribes to an agent's events
        query = 'subscription { suspendedRunEvents(agentId: "refund-agent") { id } }'
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": query}}))

        # then the stream's one result is the FORBIDDEN error, and the stream completes
        assert json.loads(await ws.recv()) == {
            "id": "1",
            "type": "next",
            "payload": {
                "data": None,
                "errors": [
                    {
                        "message": "this operation needs the scope 'runs:read'",
                        "extensions": {"code": "FORBIDDEN", "requiredScope": "runs:read"},
                    }
                ],
                "extensions": {"cost": {"requestedQueryCost": 1, "maximumAvailable": 10000}},
            },
        }
        assert json.loads(await ws.recv()) == {"id": "1", "type": "complete"}
