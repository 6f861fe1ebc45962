"""Who sees and decides what: every principal x every operation x runs of every resource.

Over HTTP and WebSocket against real secured servers (memory store and MongoDB), with the
``/metrics`` counters, idempotent replays and expired credentials included. A run of a
resource the principal may not use must look exactly like a run that does not exist: absent
from lists, not counted, null from ``suspendedRun`` / ``node`` / ``_entities``, no events,
and ``RunNotFound`` (same message as for an unknown id) from every mutation, with nothing
changed. A missing scope is a ``FORBIDDEN`` GraphQL error, with nothing changed.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
import pytest

from .._auth import TestKey
from .._graphql import WsClosed, body, data, ws_connect, ws_execute
from .conftest import ADMIN, ALICE, BOB, DECIDER, JWT_SECRET, PRINCIPALS, READER, STARTER, Server

REFUND = "refund-agent"
WEATHER = "weather-agent"
RESOURCES: list[str | None] = ["tenant-a", "tenant-b", None]

LIST = """
query List($agentId: ID!, $filter: SuspendedRunFilter) {
  suspendedRuns(agentId: $agentId, filter: $filter) { totalCount nodes { runId resourceId events { type } } }
}"""
AGENT_LIST = """
query AgentList($filter: SuspendedRunFilter) {
  agents { id suspendedRuns(filter: $filter) { totalCount nodes { runId } } }
}"""
ONE = "query One($agentId: ID!, $runId: ID!) { suspendedRun(agentId: $agentId, runId: $runId) { runId } }"
NODE = "query Node($id: ID!) { node(id: $id) { id ... on SuspendedRun { runId } } }"
ENTITIES = "query E($reps: [_Any!]!) { _entities(representations: $reps) { ... on SuspendedRun { runId } } }"
EVENTS = "query Ev($agentId: ID!, $runId: ID!) { runEvents(agentId: $agentId, runId: $runId) { type by } }"

_RESULT = """{ __typename
  ... on UserError { code message }
  ... on RunNotFound { agentId runId }
  ... on Forbidden { requiredScope }
  ... on RunOutcome { runId status run { runId resourceId toolCalls { toolCallId decision { kind decidedBy } } } }
}"""
START = (
    "mutation S($input: StartRunInput!) { startRun(input: $input) "
    + _RESULT.replace("... on RunNotFound { agentId runId }", "")
    + " }"
)
APPROVE = "mutation A($input: ApproveToolCallInput!) { approveToolCall(input: $input) " + _RESULT + " }"
DECLINE = "mutation D($input: DeclineToolCallInput!) { declineToolCall(input: $input) " + _RESULT + " }"
RESUME = "mutation R($input: ResumeRunInput!) { resumeRun(input: $input) " + _RESULT + " }"
RETRY = "mutation T($input: RetryRunInput!) { retryRun(input: $input) " + _RESULT + " }"


def can_read(key: TestKey, resource: str | None) -> bool:
    return "runs:read" in key.scopes and (key.resources is None or resource in key.resources)


def may_use(key: TestKey, resource: str | None) -> bool:
    return key.resources is None or resource in key.resources


@dataclass(frozen=True)
class Run:
    agent_id: str
    run_id: str
    global_id: str
    tool_call_id: str
    resource: str | None


def start(server: Server, agent_id: str, resource: str | None, thread: str) -> Run:
    """Start a run as the admin; it must suspend."""
    prompt = "Please refund order 1042" if agent_id == REFUND else "What's the weather like?"
    fields = {"agentId": agent_id, "prompt": prompt, "threadId": thread, "resourceId": resource}
    outcome = data(server.url, ADMIN, START.replace("run { runId", "run { id runId"), input=fields)["startRun"]
    assert outcome["status"] == "SUSPENDED", outcome
    run = outcome["run"]
    return Run(agent_id, run["runId"], run["id"], run["toolCalls"][0]["toolCallId"], resource)


def admin_view(server: Server, run: Run) -> dict[str, Any] | None:
    """The run as the admin sees it (None once gone)."""
    query = ONE.replace("{ runId }", "{ runId status toolCalls { toolCallId decision { kind decidedBy } } }")
    found: dict[str, Any] | None = data(server.url, ADMIN, query, agentId=run.agent_id, runId=run.run_id)[
        "suspendedRun"
    ]
    return found


def is_forbidden(result: dict[str, Any], scope: str) -> bool:
    errors = result.get("errors") or []
    return bool(errors) and all(
        e["extensions"]["code"] == "FORBIDDEN" and e["extensions"]["requiredScope"] == scope for e in errors
    )


# -- reading ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def seeded(server: Server) -> tuple[str, dict[str | None, Run]]:
    """One refund run per resource (tenant-a, tenant-b, none), on a thread of their own."""
    thread = f"matrix-{uuid.uuid4().hex[:8]}"
    return thread, {resource: start(server, REFUND, resource, thread) for resource in RESOURCES}


@pytest.mark.parametrize("key", PRINCIPALS, ids=lambda k: k.name)
def test_each_principal_reads_exactly_the_runs_of_its_resources(
    server: Server, seeded: tuple[str, dict[str | None, Run]], key: TestKey
) -> None:
    thread, runs = seeded
    visible = {r.run_id for r in runs.values() if can_read(key, r.resource)}
    filter_ = {"threadId": thread}

    listing = body(server.url, key, LIST, agentId=REFUND, filter=filter_)
    by_agent = body(server.url, key, AGENT_LIST, filter=filter_)
    if "runs:read" not in key.scopes:
        # without runs:read every read is refused, and nothing is returned
        assert is_forbidden(listing, "runs:read"), listing
        assert listing["data"] is None
        assert is_forbidden(by_agent, "runs:read"), by_agent
        for run in runs.values():
            for document, variables in [
                (ONE, {"agentId": REFUND, "runId": run.run_id}),
                (NODE, {"id": run.global_id}),
                (EVENTS, {"agentId": REFUND, "runId": run.run_id}),
            ]:
                assert is_forbidden(body(server.url, key, document, **variables), "runs:read")
            entities = data(server.url, key, ENTITIES, reps=[{"__typename": "SuspendedRun", "runId": run.run_id}])
            assert entities["_entities"] == [None]
        return

    # lists and counts hold exactly the visible runs, with their events
    connection = listing["data"]["suspendedRuns"]
    assert {n["runId"] for n in connection["nodes"]} == visible
    assert connection["totalCount"] == len(visible)
    assert all(n["events"] for n in connection["nodes"])
    agent = next(a for a in by_agent["data"]["agents"] if a["id"] == REFUND)
    assert {n["runId"] for n in agent["suspendedRuns"]["nodes"]} == visible
    assert agent["suspendedRuns"]["totalCount"] == len(visible)

    unknown = uuid.uuid4().hex
    for resource, run in runs.items():
        seen = run.run_id in visible
        # the resourceId filter: the run's own resource lists it only when visible
        by_resource = data(server.url, key, LIST, agentId=REFUND, filter={"threadId": thread, "resourceId": resource})
        if resource is not None:
            assert by_resource["suspendedRuns"]["totalCount"] == (1 if seen else 0)
        one = data(server.url, key, ONE, agentId=REFUND, runId=run.run_id)["suspendedRun"]
        node = data(server.url, key, NODE, id=run.global_id)["node"]
        entities = data(server.url, key, ENTITIES, reps=[{"__typename": "SuspendedRun", "runId": run.run_id}])
        events = data(server.url, key, EVENTS, agentId=REFUND, runId=run.run_id)["runEvents"]
        if seen:
            assert one == {"runId": run.run_id}
            assert node == {"id": run.global_id, "runId": run.run_id}
            assert entities["_entities"] == [{"runId": run.run_id}]
            assert [e["type"] for e in events] == ["started", "suspended"]
        else:
            # hidden exactly as a run that does not exist
            assert one is None
            assert node is None
            assert entities["_entities"] == [None]
            assert events == []
            assert data(server.url, key, ONE, agentId=REFUND, runId=unknown)["suspendedRun"] is None
            assert data(server.url, key, EVENTS, agentId=REFUND, runId=unknown)["runEvents"] == []


# -- deciding -----------------------------------------------------------------------------------
OPERATIONS = ["approve", "decline", "resume", "retry"]


def decide(server: Server, key: TestKey, operation: str, run: Run) -> dict[str, Any]:
    ids = {"agentId": run.agent_id, "runId": run.run_id}
    if operation == "approve":
        return body(server.url, key, APPROVE, input={**ids, "toolCallId": run.tool_call_id})
    if operation == "decline":
        return body(server.url, key, DECLINE, input={**ids, "toolCallId": run.tool_call_id, "reason": "no"})
    if operation == "resume":
        return body(server.url, key, RESUME, input={**ids, "resumeData": {"name": "Paris"}})
    return body(server.url, key, RETRY, input=ids)


def not_found_metric(server: Server, operation: str) -> float:
    """``runsgate_decisions_total{kind=<operation>, outcome="run_not_found"}`` now."""
    wanted = f'runsgate_decisions_total{{kind="{operation}",outcome="run_not_found"}} '
    for line in httpx.get(f"{server.url}/metrics").text.splitlines():
        if line.startswith(wanted):
            return float(line[len(wanted) :])
    return 0.0


def not_found_like_unknown(
    server: Server, key: TestKey, operation: str, run: Run, result: dict[str, Any], counted: float | None = None
) -> None:
    """``result`` is ``RunNotFound`` and reads exactly as the answer for an unknown run id; with
    ``counted`` (the metric's delta for ``result``), ``/metrics`` counted both alike."""
    unknown = Run(run.agent_id, uuid.uuid4().hex, "", run.tool_call_id, run.resource)
    metric_before = not_found_metric(server, operation)
    reference = decide(server, key, operation, unknown)
    if counted is not None and operation != "retry":  # retry is not a decision (no counter)
        assert counted == not_found_metric(server, operation) - metric_before == 1
    answer = next(iter(result["data"].values()))
    expected = next(iter(reference["data"].values()))
    assert answer["__typename"] == expected["__typename"] == "RunNotFound", (answer, expected)
    assert answer == {
        **expected,
        "runId": run.run_id,
        "message": expected["message"].replace(unknown.run_id, run.run_id),
    }


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: str(r))
@pytest.mark.parametrize("key", PRINCIPALS, ids=lambda k: k.name)
def test_each_principal_decides_exactly_the_runs_of_its_resources(
    server: Server, key: TestKey, resource: str | None, operation: str
) -> None:
    # given a fresh run of that resource (a weather run for resume)
    run = start(server, WEATHER if operation == "resume" else REFUND, resource, f"decide-{uuid.uuid4().hex[:8]}")
    before = admin_view(server, run)
    metric_before = not_found_metric(server, operation)

    # when the principal decides it
    result = decide(server, key, operation, run)
    counted = not_found_metric(server, operation) - metric_before

    if "runs:decide" not in key.scopes:
        # then a missing scope is refused and nothing changes
        assert is_forbidden(result, "runs:decide"), result
        assert admin_view(server, run) == before
        return
    if not may_use(key, resource):
        # then another resource's run is reported as missing (answer and /metrics), and nothing changes
        not_found_like_unknown(server, key, operation, run, result, counted)
        assert admin_view(server, run) == before
        return
    answer = next(iter(result["data"].values()))
    if operation == "approve" and "refunds:approve" not in key.scopes:
        # then the per-tool rule refuses the approval of a refund above 40, and nothing changes
        assert answer["__typename"] == "Forbidden", answer
        assert answer["requiredScope"] == "refunds:approve"
        assert admin_view(server, run) == before
        return
    if operation == "retry":
        # then a run still waiting for its decision is not ready (the caller may see that)
        assert answer["__typename"] == "RunNotReady", answer
        assert admin_view(server, run) == before
        return
    # then the decision is taken, recorded under the principal's name, and the run completes
    assert answer["__typename"] == "RunOutcome", answer
    assert answer["status"] == "COMPLETED"
    assert admin_view(server, run) is None
    events = data(server.url, ADMIN, EVENTS, agentId=run.agent_id, runId=run.run_id)["runEvents"]
    assert {"type": "decision", "by": f"key:{key.name}"} in events


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: str(r))
@pytest.mark.parametrize("key", PRINCIPALS, ids=lambda k: k.name)
def test_each_principal_starts_runs_only_of_its_resources(server: Server, key: TestKey, resource: str | None) -> None:
    thread = f"start-{uuid.uuid4().hex[:8]}"
    fields = {"agentId": REFUND, "prompt": "Please refund order 1042", "threadId": thread, "resourceId": resource}

    result = body(server.url, key, START, input=fields)

    listed = data(server.url, ADMIN, LIST, agentId=REFUND, filter={"threadId": thread})["suspendedRuns"]
    if "runs:start" not in key.scopes:
        assert is_forbidden(result, "runs:start"), result
        assert listed["totalCount"] == 0
    elif not may_use(key, resource):
        assert result["data"]["startRun"]["__typename"] == "Forbidden", result
        assert listed["totalCount"] == 0
    else:
        assert result["data"]["startRun"]["status"] == "SUSPENDED", result
        assert listed["totalCount"] == 1


# -- WebSocket ----------------------------------------------------------------------------------
@pytest.mark.parametrize("key", [ADMIN, ALICE, BOB, READER, STARTER], ids=lambda k: k.name)
def test_over_websocket_a_query_sees_what_it_sees_over_http(
    server: Server, seeded: tuple[str, dict[str | None, Run]], key: TestKey
) -> None:
    thread, _ = seeded
    variables = {"agentId": REFUND, "filter": {"threadId": thread}}
    over_http = body(server.url, key, LIST, **variables)

    # token in the connection_init payload, then in the upgrade request's header
    in_payload = asyncio.run(
        ws_execute(server.url, LIST, variables, init_payload={"Authorization": f"Bearer {key.key}"})
    )
    in_header = asyncio.run(ws_execute(server.url, LIST, variables, header=f"Bearer {key.key}"))

    if "runs:read" in key.scopes:
        assert in_payload == in_header == {"data": over_http["data"], "extensions": over_http["extensions"]}
    else:
        assert is_forbidden(in_payload, "runs:read"), in_payload
        assert is_forbidden(in_header, "runs:read"), in_header


def test_over_websocket_another_resources_run_is_not_found(
    server: Server, seeded: tuple[str, dict[str | None, Run]]
) -> None:
    _, runs = seeded
    run = runs["tenant-b"]
    before = admin_view(server, run)
    approve = {"input": {"agentId": REFUND, "runId": run.run_id, "toolCallId": run.tool_call_id}}

    result = asyncio.run(
        ws_execute(server.url, APPROVE, approve, init_payload={"Authorization": f"Bearer {ALICE.key}"})
    )

    assert result["data"]["approveToolCall"]["__typename"] == "RunNotFound", result
    assert admin_view(server, run) == before


def test_the_websocket_carries_the_principal_of_its_token(server: Server) -> None:
    # a decision over WebSocket records the name of the connection's principal
    run = start(server, REFUND, "tenant-a", f"ws-{uuid.uuid4().hex[:8]}")
    approve = {"input": {"agentId": REFUND, "runId": run.run_id, "toolCallId": run.tool_call_id}}

    result = asyncio.run(
        ws_execute(server.url, APPROVE, approve, init_payload={"Authorization": f"Bearer {DECIDER.key}"})
    )

    assert result["data"]["approveToolCall"]["status"] == "COMPLETED", result
    events = data(server.url, ADMIN, EVENTS, agentId=REFUND, runId=run.run_id)["runEvents"]
    assert {"type": "decision", "by": f"key:{DECIDER.name}"} in events


@pytest.mark.parametrize(
    ("init_payload", "header"),
    [
        (None, None),
        ({}, None),
        ({"Authorization": "Bearer rg_not_a_key"}, None),
        ({"Authorization": f"Basic {ADMIN.key}"}, None),
        ({"Authorization": 42}, None),
        (None, "Bearer rg_not_a_key"),
    ],
    ids=["no-payload", "empty-payload", "unknown-key", "basic-scheme", "not-a-string", "bad-header"],
)
def test_a_websocket_without_valid_credentials_is_closed_with_4403_and_runs_nothing(
    server: Server, seeded: tuple[str, dict[str | None, Run]], init_payload: dict[str, Any] | None, header: str | None
) -> None:
    _, runs = seeded
    run = runs["tenant-a"]
    before = admin_view(server, run)
    approve = {"input": {"agentId": REFUND, "runId": run.run_id, "toolCallId": run.tool_call_id}}

    with pytest.raises(WsClosed) as closed:
        asyncio.run(ws_execute(server.url, APPROVE, approve, init_payload=init_payload, header=header))

    assert closed.value.code == 4403
    assert admin_view(server, run) == before


def test_an_operation_sent_before_connection_init_is_refused_with_4401(server: Server) -> None:
    # even with a valid token in the upgrade header, nothing runs before the connection_ack
    with pytest.raises(WsClosed) as closed:
        asyncio.run(ws_execute(server.url, LIST, {"agentId": REFUND}, header=f"Bearer {ADMIN.key}", send_init=False))

    assert closed.value.code == 4401


def test_a_websocket_message_over_the_body_limit_closes_the_socket(server: Server) -> None:
    # the servers keep the default limit of 1 MiB; this connection_init is 2 MiB
    payload = {"Authorization": f"Bearer {ADMIN.key}", "padding": "x" * (2 << 20)}

    with pytest.raises(WsClosed) as closed:
        asyncio.run(ws_execute(server.url, LIST, {"agentId": REFUND}, init_payload=payload))

    assert closed.value.code == 1009


def test_a_websocket_message_with_a_lone_surrogate_is_refused_as_bad_json(server: Server) -> None:
    # the same strict JSON as over HTTP: the socket is closed with 4400 and nothing runs
    with pytest.raises(WsClosed) as closed:
        asyncio.run(
            ws_execute(
                server.url,
                ONE,
                {"agentId": REFUND, "runId": "\ud800"},
                init_payload={"Authorization": f"Bearer {ADMIN.key}"},
            )
        )

    assert closed.value.code == 4400


# -- idempotent replays -----------------------------------------------------------------------------
DECIDERS = [key for key in PRINCIPALS if "runs:decide" in key.scopes]


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: str(r))
@pytest.mark.parametrize("key", DECIDERS, ids=lambda k: k.name)
def test_an_idempotency_key_replays_only_for_its_own_principal(
    server: Server, key: TestKey, resource: str | None
) -> None:
    # given a run the admin declined with an idempotency key (the run completed)
    idem = f"k-{uuid.uuid4().hex[:8]}"
    run = start(server, REFUND, resource, f"replay-{uuid.uuid4().hex[:8]}")
    fields = {"agentId": REFUND, "runId": run.run_id, "toolCallId": run.tool_call_id, "reason": "no"}
    first = data(server.url, ADMIN, DECLINE, input={**fields, "idempotencyKey": idem})["declineToolCall"]
    assert first["__typename"] == "RunOutcome", first

    # when the principal sends the same request with the same key
    again = data(server.url, key, DECLINE, input={**fields, "idempotencyKey": idem})["declineToolCall"]
    mine = data(server.url, ADMIN, DECLINE, input={**fields, "idempotencyKey": idem})["declineToolCall"]

    # then the admin's key is not the principal's: neither a replay nor "key reused", but the
    # answer to its own request (the run is gone: its call was decided, for a principal that may
    # see the run's events; no such run, for one that may not), while the admin gets its replay
    if key == ADMIN:
        assert again == first
    else:
        expected = "ToolCallAlreadyDecided" if may_use(key, resource) else "RunNotFound"
        assert again["__typename"] == expected, again
    assert mine == first


# -- expired credentials ------------------------------------------------------------------------------
def expired_token(**claims: Any) -> str:
    token: str = jwt.encode(
        {"sub": "late", "scope": "runs:read runs:decide runs:start", "resources": "*", "exp": 1, **claims},
        JWT_SECRET,
        algorithm="HS256",
    )
    return token


@pytest.mark.parametrize("document", [LIST, APPROVE, START], ids=["read", "decide", "start"])
def test_an_expired_jwt_is_refused_over_http_and_websocket(server: Server, document: str) -> None:
    token = expired_token()
    variables: dict[str, Any] = {"agentId": REFUND} if document == LIST else {"input": {}}

    response = httpx.post(
        f"{server.url}/graphql",
        json={"query": document, "variables": variables},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 401, response.text
    with pytest.raises(WsClosed) as closed:
        asyncio.run(ws_execute(server.url, document, variables, init_payload={"Authorization": f"Bearer {token}"}))
    assert closed.value.code == 4403


def test_a_jwt_that_expires_on_an_open_socket_closes_it(server: Server) -> None:
    token = expired_token(exp=int(time.time()) + 2)

    async def scenario() -> None:
        async with ws_connect(server.url, init_payload={"Authorization": f"Bearer {token}"}) as ws:
            await asyncio.sleep(3)
            await ws.subscribe(LIST, {"agentId": REFUND})
            await ws.receive()

    with pytest.raises(WsClosed) as closed:
        asyncio.run(scenario())
    assert closed.value.code == 4403
