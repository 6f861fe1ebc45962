"""The tests' one GraphQL client: documents with shared fragments, GraphQL over HTTP (httpx) and
over WebSocket (``graphql-transport-ws``).

- Documents: the operations the tests send, built by ``document``, which appends the fragments
  an operation spreads (``RunFields``, ``ToolCallFields``, ``OutcomeFields``,
  ``UserErrorFields``...), so every test selects a run, a tool call, an outcome or a user error
  the same way. Mutation documents select ``__typename`` and ``UserErrorFields`` so a test sees
  which union member came back.
- ``GraphQLClient``: async, over an ``httpx.AsyncClient``, either in-process (``ASGITransport``
  around an app) or a real server's base URL (``GraphQLClient.at``); ``data`` asserts a 200
  without ``errors``; shortcuts for the run lifecycle (``start_run``, ``approve``...).
- ``post``/``body``/``data``: the same, synchronous, to a base URL, as an API key or anonymous.
- ``ws_connect``/``ws_execute``: ``graphql-transport-ws`` over ``websockets``.
- ``graphql_view``/``graphql_schema``: the view and schema of an app's ``/graphql`` route.

Node tests use the ``graphql-ws`` package itself (``tests/subscriptions/*.mjs``).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.routing import Route
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from resolvers.federation import FederationSchema
from server.view.graphql_view import GraphQLView

from ._auth import TestKey
from ._processes import scaled

WAIT = scaled(30.0)
"""Seconds to wait for an answer (HTTP response, WebSocket message) before failing: a liveness
bound, not a speed check (30 s times ``RUNSGATE_TEST_WAIT_SCALE``)."""

REFUND = "refund-agent"
WEATHER = "weather-agent"
SUPERVISOR = "support-supervisor"
REFUND_PROMPT = "Please refund order 1042"
TWO_REFUNDS_PROMPT = "Please refund orders 1042 and 1043"
WEATHER_PROMPT = "What's the weather like?"

# -- fragments --------------------------------------------------------------------------------
FRAGMENTS: dict[str, str] = {}
"""Fragment name -> its definition; ``document`` appends the ones an operation spreads."""


def _fragment(definition: str) -> str:
    name = definition.split()[1]
    FRAGMENTS[name] = definition
    return definition


DECISION_FIELDS = _fragment("fragment DecisionFields on ToolCallDecision { kind decidedAt decidedBy reason }")
TOOL_CALL_FIELDS = _fragment(
    """
fragment ToolCallFields on SuspendedToolCall {
  toolCallId toolName args requiresApproval suspendPayload resumeSchema
  decision { ...DecisionFields }
}"""
)
RUN_FIELDS = _fragment(
    """
fragment RunFields on SuspendedRun {
  id runId agentId status threadId resourceId parentRunId createdAt suspendedAt
  toolCalls { ...ToolCallFields }
}"""
)
RUN_DETAIL_FIELDS = _fragment(
    """
fragment RunDetailFields on SuspendedRun {
  ...RunFields
  lastError { type message at }
  events { id type at by data }
}"""
)
"""A run with its last error and its events (resolved live from the event log)."""
OUTCOME_FIELDS = _fragment(
    "fragment OutcomeFields on RunOutcome { runId agentId status output error run { ...RunFields } }"
)
OUTCOME_DETAIL_FIELDS = _fragment(
    "fragment OutcomeDetailFields on RunOutcome { runId agentId status output error run { ...RunDetailFields } }"
)
USER_ERROR_FIELDS = _fragment(
    """
fragment UserErrorFields on UserError {
  code message
  ... on AgentNotFound { agentId }
  ... on RunNotFound { agentId runId }
  ... on ToolCallNotFound { runId missingToolCallId: toolCallId }
  ... on ToolCallAlreadyDecided { runId toolCallId decision { ...DecisionFields } }
  ... on WrongToolCallKind { runId toolCallId expected }
  ... on AmbiguousToolCall { runId toolCallIds }
  ... on InvalidResumeData { problems { path message } }
  ... on IdempotencyKeyReused { idempotencyKey }
}"""
)
EVENT_FIELDS = _fragment("fragment EventFields on RunEvent { id type runId threadId resourceId at by data }")

_SPREAD = re.compile(r"\.\.\.\s*([_A-Za-z]\w*)")


def document(operation: str) -> str:
    """``operation`` followed by the definitions of the fragments it spreads, transitively (a
    GraphQL document may not define a fragment it does not use)."""
    needed: list[str] = []
    pending = [operation]
    while pending:
        for name in _SPREAD.findall(pending.pop()):
            if name != "on" and name not in needed:
                needed.append(name)
                pending.append(FRAGMENTS[name])
    return operation + "".join(FRAGMENTS[name] for name in sorted(needed))


def _result(name: str, mutation: str, input_type: str, outcome: str) -> str:
    return document(
        f"mutation {name}($input: {input_type}!) {{ {mutation}(input: $input) "
        f"{{ __typename ...UserErrorFields ...{outcome} }} }}"
    )


def refusal_message(response: httpx.Response, status: int = 400, code: str = "BAD_REQUEST") -> str:
    """The message of a request refused before GraphQL ran it (``server.http.http_errors``), after
    checking its shape: ``status``, a JSON body with ``errors`` only, one error with ``code``."""
    assert response.status_code == status, response.text
    media_type = response.headers["content-type"].split(";")[0]
    assert media_type in ("application/json", "application/graphql-response+json"), response.headers
    body = response.json()
    assert set(body) == {"errors"}, body
    [error] = body["errors"]
    assert error["extensions"] == {"code": code}, error
    message: str = error["message"]
    return message


# -- documents --------------------------------------------------------------------------------
START_RUN = _result("StartRun", "startRun", "StartRunInput", "OutcomeFields")
APPROVE = _result("Approve", "approveToolCall", "ApproveToolCallInput", "OutcomeFields")
DECLINE = _result("Decline", "declineToolCall", "DeclineToolCallInput", "OutcomeFields")
RESUME = _result("Resume", "resumeRun", "ResumeRunInput", "OutcomeFields")
DETAILED_RESULTS = {
    "startRun": _result("StartRunDetailed", "startRun", "StartRunInput", "OutcomeDetailFields"),
    "approveToolCall": _result("ApproveDetailed", "approveToolCall", "ApproveToolCallInput", "OutcomeDetailFields"),
    "declineToolCall": _result("DeclineDetailed", "declineToolCall", "DeclineToolCallInput", "OutcomeDetailFields"),
    "retryRun": _result("RetryDetailed", "retryRun", "RetryRunInput", "OutcomeDetailFields"),
}
"""Mutation field -> its document, the outcome's run with ``RunDetailFields``."""

SUSPENDED_RUNS = document(
    """
query SuspendedRuns($agentId: ID!, $filter: SuspendedRunFilter, $page: PageInput,
                    $first: Int, $after: String, $last: Int, $before: String) {
  suspendedRuns(agentId: $agentId, filter: $filter, page: $page,
                first: $first, after: $after, last: $last, before: $before) {
    totalCount
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    edges { cursor node { ...RunFields } }
    nodes { runId }
  }
}
"""
)
DETAILED_SUSPENDED_RUNS = document(
    """
query DetailedSuspendedRuns($agentId: ID!, $filter: SuspendedRunFilter) {
  suspendedRuns(agentId: $agentId, filter: $filter) {
    totalCount
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    edges { cursor node { ...RunDetailFields } }
    nodes { runId }
  }
}
"""
)
SUSPENDED_RUN = document(
    "query SuspendedRun($agentId: ID!, $runId: ID!) { suspendedRun(agentId: $agentId, runId: $runId) { ...RunFields } }"
)
DETAILED_SUSPENDED_RUN = document(
    "query DetailedSuspendedRun($agentId: ID!, $runId: ID!) "
    "{ suspendedRun(agentId: $agentId, runId: $runId) { ...RunDetailFields } }"
)
NODE = document("query Node($id: ID!) { node(id: $id) { __typename id ... on SuspendedRun { ...RunFields } } }")
AGENTS = "query Agents { agents { id name } }"
RUN_EVENTS = document(
    "query RunEvents($agentId: ID!, $runId: ID!) { runEvents(agentId: $agentId, runId: $runId) { ...EventFields } }"
)
EVENTS = document(
    """
subscription Events($agentId: ID!, $filter: RunEventFilter, $afterEventId: ID) {
  suspendedRunEvents(agentId: $agentId, filter: $filter, afterEventId: $afterEventId) { ...EventFields }
}
"""
)


def _request_body(document: str, operation_name: str | None, variables: dict[str, Any]) -> dict[str, Any]:
    """A GraphQL-over-HTTP request body (``operationName`` only when given)."""
    request: dict[str, Any] = {"query": document, "variables": variables}
    if operation_name is not None:
        request["operationName"] = operation_name
    return request


# -- HTTP, async ------------------------------------------------------------------------------
class GraphQLClient:
    """POSTs documents to ``/graphql`` through ``http`` and unpacks the GraphQL response.

    ``http`` speaks to an app in-process (``httpx.ASGITransport``) or to a server's base URL
    (``GraphQLClient.at``); its headers (credentials) go with every request.
    """

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    @classmethod
    @asynccontextmanager
    async def at(
        cls, base_url: str, *, headers: dict[str, str] | None = None, limits: httpx.Limits | None = None
    ) -> AsyncIterator[GraphQLClient]:
        """A client of the server at ``base_url`` (e.g. ``http://127.0.0.1:41234``), closed after the block."""
        async with httpx.AsyncClient(
            base_url=base_url, headers=headers, timeout=WAIT, limits=limits or httpx.Limits()
        ) as http:
            yield cls(http)

    async def post(
        self,
        document: str,
        *,
        headers: dict[str, str] | None = None,
        operation_name: str | None = None,
        **variables: Any,
    ) -> httpx.Response:
        """The raw response to one POST of ``document``."""
        return await self.http.post(
            "/graphql", json=_request_body(document, operation_name, variables), headers=headers
        )

    async def execute(self, document: str, **variables: Any) -> dict[str, Any]:
        """The whole response body (``data`` and/or ``errors``)."""
        response = await self.post(document, **variables)
        body: dict[str, Any] = response.json()
        assert "data" in body or "errors" in body, body
        return body

    async def data(self, document: str, **variables: Any) -> dict[str, Any]:
        """``data`` of a 200 response that must have no ``errors``."""
        response = await self.post(document, **variables)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        assert "errors" not in body, body["errors"]
        data: dict[str, Any] = body["data"]
        return data

    async def errors(self, document: str, **variables: Any) -> tuple[Any, list[dict[str, Any]]]:
        """``(data, errors)`` of a response that must carry ``errors``."""
        body = await self.execute(document, **variables)
        assert body.get("errors"), body
        return body.get("data"), body["errors"]

    # -- shortcuts -------------------------------------------------------------------------------
    async def start_run(self, agent_id: str, prompt: str, **fields: Any) -> dict[str, Any]:
        """``startRun``: the ``RunOutcome`` (any other union member fails the test)."""
        result: dict[str, Any] = (await self.data(START_RUN, input={"agentId": agent_id, "prompt": prompt, **fields}))[
            "startRun"
        ]
        assert result["__typename"] == "RunOutcome", result
        return result

    async def suspend(self, agent_id: str, prompt: str, **fields: Any) -> dict[str, Any]:
        """Start a run that must suspend; its stored run."""
        outcome = await self.start_run(agent_id, prompt, **fields)
        assert outcome["status"] == "SUSPENDED", outcome
        run: dict[str, Any] = outcome["run"]
        return run

    async def suspended_runs(self, agent_id: str, **arguments: Any) -> dict[str, Any]:
        """``suspendedRuns`` connection (no errors allowed)."""
        connection: dict[str, Any] = (await self.data(SUSPENDED_RUNS, agentId=agent_id, **arguments))["suspendedRuns"]
        assert [edge["node"]["runId"] for edge in connection["edges"]] == [
            node["runId"] for node in connection["nodes"]
        ]
        return connection

    async def listed_ids(self, agent_id: str, **arguments: Any) -> list[str]:
        """Run ids of one ``suspendedRuns`` page, in listing order."""
        return [node["runId"] for node in (await self.suspended_runs(agent_id, **arguments))["nodes"]]

    async def suspended_run(self, agent_id: str, run_id: str) -> dict[str, Any] | None:
        run: dict[str, Any] | None = (await self.data(SUSPENDED_RUN, agentId=agent_id, runId=run_id))["suspendedRun"]
        return run

    async def approve(self, agent_id: str, run_id: str, tool_call_id: str, **fields: Any) -> dict[str, Any]:
        result: dict[str, Any] = (
            await self.data(APPROVE, input={"agentId": agent_id, "runId": run_id, "toolCallId": tool_call_id, **fields})
        )["approveToolCall"]
        return result

    async def decline(self, agent_id: str, run_id: str, tool_call_id: str, **fields: Any) -> dict[str, Any]:
        result: dict[str, Any] = (
            await self.data(DECLINE, input={"agentId": agent_id, "runId": run_id, "toolCallId": tool_call_id, **fields})
        )["declineToolCall"]
        return result

    async def resume(self, agent_id: str, run_id: str, resume_data: Any, **fields: Any) -> dict[str, Any]:
        result: dict[str, Any] = (
            await self.data(RESUME, input={"agentId": agent_id, "runId": run_id, "resumeData": resume_data, **fields})
        )["resumeRun"]
        return result

    async def run_events(self, agent_id: str, run_id: str) -> list[dict[str, Any]]:
        """``runEvents`` of a run, oldest first."""
        events: list[dict[str, Any]] = (await self.data(RUN_EVENTS, agentId=agent_id, runId=run_id))["runEvents"]
        return events


async def start_refund_run(base_url: str, *, resource_id: str | None, thread_id: str | None) -> str:
    """Start a ``refund-agent`` run that suspends on the server at ``base_url``; its runId."""
    async with GraphQLClient.at(base_url) as client:
        run = await client.suspend(REFUND, REFUND_PROMPT, resourceId=resource_id, threadId=thread_id)
    run_id: str = run["runId"]
    return run_id


async def run_event_ids(base_url: str, run_id: str, agent_id: str = REFUND) -> list[str]:
    """Ids of a run's events on the server at ``base_url``, oldest first."""
    async with GraphQLClient.at(base_url) as client:
        return [event["id"] for event in await client.run_events(agent_id, run_id)]


# -- HTTP, sync -------------------------------------------------------------------------------
_CLIENT = httpx.Client(timeout=scaled(60))
"""One keep-alive client for every synchronous request of the session (a new connection per
call is slow)."""


def post(
    base_url: str,
    key: TestKey | None,
    document: str,
    *,
    headers: dict[str, str] | None = None,
    operation_name: str | None = None,
    **variables: Any,
) -> httpx.Response:
    """POST one document to ``{base_url}/graphql`` as ``key`` (no credentials when ``None``),
    with ``headers`` added."""
    sent = {**({} if key is None else key.headers), **(headers or {})}
    return _CLIENT.post(f"{base_url}/graphql", json=_request_body(document, operation_name, variables), headers=sent)


def body(base_url: str, key: TestKey | None, document: str, **variables: Any) -> dict[str, Any]:
    """The JSON body of a request answered with 200."""
    response = post(base_url, key, document, **variables)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def data(base_url: str, key: TestKey | None, document: str, **variables: Any) -> dict[str, Any]:
    """``data`` of a 200 response without errors."""
    result = body(base_url, key, document, **variables)
    assert "errors" not in result, result
    payload: dict[str, Any] = result["data"]
    return payload


# -- WebSocket (graphql-transport-ws) ---------------------------------------------------------
class WsClosed(Exception):
    """The server closed the WebSocket; ``code`` and ``reason`` as sent."""

    def __init__(self, code: int | None, reason: str) -> None:
        super().__init__(f"{code} {reason}")
        self.code = code
        self.reason = reason


class GraphQLWebSocket:
    """One ``graphql-transport-ws`` connection (acknowledged, unless opened with ``send_init=False``)."""

    def __init__(self, socket: ClientConnection) -> None:
        self._socket = socket
        self._next_id = 0

    async def subscribe(self, query: str, variables: dict[str, Any], *, operation_name: str | None = None) -> str:
        """Send one operation (with ``operationName`` when given); its id."""
        self._next_id += 1
        operation = str(self._next_id)
        payload: dict[str, Any] = {"query": query, "variables": variables}
        if operation_name is not None:
            payload["operationName"] = operation_name
        message = {"id": operation, "type": "subscribe", "payload": payload}
        await self._socket.send(json.dumps(message))
        return operation

    async def send_text(self, text: str) -> None:
        """Send ``text`` as one message, as it is (a malformed message, say)."""
        await self._socket.send(text)

    async def complete(self, operation: str) -> None:
        """Stop one operation (the client's ``complete``)."""
        await self._socket.send(json.dumps({"id": operation, "type": "complete"}))

    async def receive(self) -> dict[str, Any]:
        """The next message (``next``, ``error`` or ``complete``), pings answered."""
        while True:
            message: dict[str, Any] = json.loads(await asyncio.wait_for(self._socket.recv(), WAIT))
            if message["type"] == "ping":
                await self._socket.send(json.dumps({"type": "pong"}))
                continue
            return message

    async def events_until(self, operation: str, last: tuple[str, str]) -> list[dict[str, Any]]:
        """``suspendedRunEvents`` of ``operation`` up to and including the one of run ``last[0]``
        with type ``last[1]``."""
        received: list[dict[str, Any]] = []
        while True:
            message = await self.receive()
            assert message["id"] == operation, message
            assert message["type"] == "next", message
            assert "errors" not in message["payload"], message
            event = message["payload"]["data"]["suspendedRunEvents"]
            received.append(event)
            if (event["runId"], event["type"]) == last:
                return received


@asynccontextmanager
async def ws_connect(
    base_url: str,
    *,
    init_payload: dict[str, Any] | None = None,
    header: str | None = None,
    send_init: bool = True,
) -> AsyncIterator[GraphQLWebSocket]:
    """Connect to ``base_url``'s ``/graphql`` with ``graphql-transport-ws`` (``header`` as its
    ``Authorization``), send ``connection_init`` (with ``init_payload``) and wait for the ack.

    Raises:
        WsClosed: The server closed the connection, here or inside the block (e.g. 4403 on bad
            credentials).
    """
    headers = {} if header is None else {"Authorization": header}
    url = base_url.replace("http", "ws", 1) + "/graphql"
    try:
        async with connect(url, subprotocols=["graphql-transport-ws"], additional_headers=headers) as socket:  # type: ignore[list-item]
            if send_init:
                init: dict[str, Any] = {"type": "connection_init"}
                if init_payload is not None:
                    init["payload"] = init_payload
                await socket.send(json.dumps(init))
                ack = json.loads(await asyncio.wait_for(socket.recv(), WAIT))
                assert ack["type"] == "connection_ack", ack
            yield GraphQLWebSocket(socket)
    except ConnectionClosed as closed:
        rcvd = closed.rcvd
        raise WsClosed(None if rcvd is None else rcvd.code, "" if rcvd is None else rcvd.reason) from None


async def ws_execute(
    base_url: str,
    document: str,
    variables: dict[str, Any] | None = None,
    *,
    init_payload: dict[str, Any] | None = None,
    header: str | None = None,
    send_init: bool = True,
) -> dict[str, Any]:
    """Run one operation over ``graphql-transport-ws``; its last ``next`` payload (or ``{"errors": ...}``).

    Raises:
        WsClosed: The server closed the connection (e.g. 4403 on bad credentials).
    """
    async with ws_connect(base_url, init_payload=init_payload, header=header, send_init=send_init) as ws:
        await ws.subscribe(document, variables or {})
        result: dict[str, Any] = {}
        while True:
            reply = await ws.receive()
            if reply["type"] == "next":
                result = reply["payload"]
            elif reply["type"] == "error":
                return {"errors": reply["payload"]}
            elif reply["type"] == "complete":
                return result


# -- the app's /graphql route -------------------------------------------------------------------
def graphql_view(app: Starlette) -> GraphQLView:
    """The view the app's ``/graphql`` route serves."""
    view = next(route.endpoint for route in app.routes if isinstance(route, Route) and route.path == "/graphql")
    assert isinstance(view, GraphQLView)
    return view


def graphql_schema(app: Starlette) -> FederationSchema:
    """The schema the app's ``/graphql`` route serves (its extensions, prepared operations...)."""
    schema = graphql_view(app).schema
    assert isinstance(schema, FederationSchema)
    return schema
