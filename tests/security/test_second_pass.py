"""The second security pass (issue 15), over HTTP and WebSocket against a real secured server.

One server on the memory store, with API keys, an HS256 JWT secret, batching on and per-tool
rules, two of which cannot be evaluated on the calls the tests make (``json-echo``'s ``hold``
with a value that is not a number, and ``ask``, whose calls have no arguments: it suspends
itself): a rule that cannot be evaluated must deny. (Rules naming an argument the tool does not
have at all are refused at start, ``tests/server/test_policies.py``.)
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from .._auth import ALL, TestKey, api_keys_json
from .._graphql import WsClosed, body, data, post, ws_connect
from .._servers import runsgate_process
from .test_access_matrix import APPROVE, DECLINE, NODE, RESUME, START

SECRET = "second-pass-secret-0123456789abcdefghijklmnopqrstuvwxyz"
ADMIN = TestKey(
    "root",
    "rg_second_root_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    (*ALL, "refunds:approve", "cities:answer"),
)
TENANT_A = TestKey("ta", "rg_second_ta_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", ALL, ("tenant-a",))
TENANT_B = TestKey("tb", "rg_second_tb_ccccccccccccccccccccccccccccccccccccccc", ALL, ("tenant-b",))
SHARED = TestKey("shared", "rg_second_shared_dddddddddddddddddddddddddddddddddd", ALL)
"""An API key named like the JWT subject ``shared``: a different principal."""
RULES = [
    {"tool": "issue_refund", "scope": "refunds:approve", "argument": "amount", "above": 10},
    {"tool": "hold", "scope": "refunds:approve", "argument": "value", "above": 100},
    {"tool": "ask", "scope": "cities:answer", "argument": "payload", "above": 3},
]
REFUND = "refund-agent"
WEATHER = "weather-agent"
JSON_ECHO = "json-echo"


class Token:
    """A JWT as a ``TestKey``-like credential for ``post``/``body``."""

    def __init__(self, **claims: Any) -> None:
        claims.setdefault("exp", int(time.time()) + 600)
        self.key = jwt.encode(claims, SECRET, algorithm="HS256")
        self.headers = {"Authorization": f"Bearer {self.key}"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    log = tmp_path_factory.mktemp("second-pass") / "runsgate.log"
    env = {
        "RUNSGATE_AUTH": "on",
        "RUNSGATE_API_KEYS": api_keys_json(ADMIN, TENANT_A, TENANT_B, SHARED),
        "RUNSGATE_JWT_SECRET": SECRET,
        "RUNSGATE_TOOL_RULES": json.dumps(RULES),
        "RUNSGATE_AGENTS": "tests._json_agent:AGENTS",
        "RUNSGATE_GRAPHIQL": "false",
        "RUNSGATE_MAX_BATCH": "5",
        "RUNSGATE_LOG_LEVEL": "INFO",
        "RUNSGATE_LOG_FORMAT": "text",
        "RUNSGATE_MAX_PROMPT_BYTES": "2000",
        "RUNSGATE_MAX_REASON_BYTES": "500",
    }
    with runsgate_process(log, **env) as url:
        yield url, log


def start(
    url: str, key: Any, agent: str = REFUND, resource: str | None = "tenant-a", prompt: str | None = None
) -> dict[str, Any]:
    if prompt is None:
        prompt = "Please refund order 1042" if agent == REFUND else "What's the weather like?"
    fields = {"agentId": agent, "prompt": prompt, "threadId": f"sp-{uuid.uuid4().hex[:8]}", "resourceId": resource}
    outcome: dict[str, Any] = data(url, key, START.replace("run { runId", "run { id runId"), input=fields)["startRun"]
    assert outcome["status"] == "SUSPENDED", outcome
    return outcome["run"]  # type: ignore[no-any-return]


def approve_input(run: dict[str, Any], key: str | None = None) -> dict[str, Any]:
    fields = {"agentId": REFUND, "runId": run["runId"], "toolCallId": run["toolCalls"][0]["toolCallId"]}
    return fields if key is None else {**fields, "idempotencyKey": key}


def log_text(log: Path) -> str:
    return log.read_text(encoding="utf-8", errors="replace")


# -- 4: a per-tool rule that cannot be evaluated denies -------------------------------------------
def test_a_rule_whose_argument_is_missing_denies_the_approval(server: tuple[str, Path]) -> None:
    url, _ = server
    run = start(url, ADMIN, JSON_ECHO, prompt=json.dumps({"hold": "a lot"}))  # not a number
    fields = {**approve_input(run), "agentId": JSON_ECHO}
    result = data(url, TENANT_A, APPROVE, input=fields)["approveToolCall"]
    assert result == {
        "__typename": "Forbidden",
        "code": "FORBIDDEN",
        "message": result["message"],
        "requiredScope": "refunds:approve",
    }, result
    assert data(url, ADMIN, APPROVE, input=fields)["approveToolCall"]["__typename"] == "RunOutcome"


def test_a_rule_whose_argument_is_missing_denies_resuming_too(server: tuple[str, Path]) -> None:
    url, _ = server
    run = start(url, ADMIN, JSON_ECHO, prompt=json.dumps({"ask": {"payload": "Which city?"}}))
    fields = {"agentId": JSON_ECHO, "runId": run["runId"], "resumeData": {"name": "Paris"}}
    result = data(url, TENANT_A, RESUME, input=fields)["resumeRun"]
    assert result["__typename"] == "Forbidden", result
    assert result["requiredScope"] == "cities:answer"


# -- 5: hidden and missing runs look the same, /metrics included ------------------------------------
def metric(url: str, name: str, **labels: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(name + "{"):
            found = ",".join(sorted(line[len(name) + 1 : line.index("}")].split(",")))
            if found == wanted:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize(("kind", "document"), [("approve", APPROVE), ("decline", DECLINE)])
def test_a_hidden_run_and_a_missing_one_are_alike_in_the_answer_the_metrics_and_the_log(
    server: tuple[str, Path], kind: str, document: str
) -> None:
    url, log = server
    hidden = start(url, ADMIN, resource="tenant-b")
    missing = {**hidden, "runId": "no-such-" + hidden["runId"][8:]}
    observed = []
    for run in (hidden, missing):
        before = metric(url, "runsgate_decisions_total", kind=kind, outcome="run_not_found")
        size = len(log_text(log))
        response = post(url, TENANT_A, document, input=approve_input(run))
        time.sleep(0.2)
        lines = log_text(log)[size:].replace(run["runId"], "<id>")
        after = metric(url, "runsgate_decisions_total", kind=kind, outcome="run_not_found")
        answer = json.dumps(response.json()).replace(run["runId"], "<id>")
        shape = re.sub(r"^\S+ \S+ ", "", lines, flags=re.M)  # without the time
        shape = re.sub(r"\[[^\]]*\]", "[-]", shape)
        observed.append((response.status_code, answer, after - before, shape))
    assert observed[0] == observed[1]
    assert observed[0][2] == 1


# -- 6: idempotency keys and identities ----------------------------------------------------------
def test_an_idempotency_key_belongs_to_one_principal(server: tuple[str, Path]) -> None:
    url, _ = server
    key = f"approve-{uuid.uuid4().hex[:6]}"
    mine = start(url, ADMIN, resource="tenant-a")
    theirs = start(url, ADMIN, resource="tenant-b")
    first = data(url, TENANT_A, DECLINE, input=approve_input(mine, key))["declineToolCall"]
    assert first["__typename"] == "RunOutcome", first
    second = data(url, TENANT_B, DECLINE, input=approve_input(theirs, key))["declineToolCall"]
    assert second["__typename"] == "RunOutcome", second


def test_an_api_key_and_a_jwt_of_the_same_name_are_different_principals(server: tuple[str, Path]) -> None:
    url, _ = server
    key = f"same-{uuid.uuid4().hex[:6]}"
    by_key = start(url, ADMIN, resource=None)
    by_jwt = start(url, ADMIN, resource=None)
    token = Token(sub="shared", scope="runs:read runs:decide runs:start", resources="*")
    one = data(url, SHARED, DECLINE, input=approve_input(by_key, key))["declineToolCall"]
    two = data(url, token, DECLINE, input=approve_input(by_jwt, key))["declineToolCall"]
    assert one["__typename"] == two["__typename"] == "RunOutcome", (one, two)
    assert {"type": "decision", "by": "key:shared"} in events(url, by_key)
    assert {"type": "decision", "by": "jwt:shared"} in events(url, by_jwt)


def events(url: str, run: dict[str, Any]) -> list[dict[str, Any]]:
    query = "query E($a: ID!, $r: ID!) { runEvents(agentId: $a, runId: $r) { type by } }"
    found: list[dict[str, Any]] = data(url, ADMIN, query, a=REFUND, r=run["runId"])["runEvents"]
    return found


def test_a_replay_is_checked_against_what_the_caller_may_see_now(server: tuple[str, Path]) -> None:
    url, _ = server
    key = f"replay-{uuid.uuid4().hex[:6]}"
    run = start(url, ADMIN, resource="tenant-a")
    then = Token(sub="mover", scope="runs:read runs:decide", resources=["tenant-a"])
    now = Token(sub="mover", scope="runs:read runs:decide", resources=["tenant-b"])
    first = data(url, then, DECLINE, input=approve_input(run, key))["declineToolCall"]
    assert first["__typename"] == "RunOutcome", first
    again = data(url, now, DECLINE, input=approve_input(run, key))["declineToolCall"]
    assert again["__typename"] == "RunNotFound", again


# -- 7: a subscription over plain HTTP --------------------------------------------------------------
SUBSCRIBE = 'subscription S { suspendedRunEvents(agentId: "refund-agent") { type } }'


@pytest.mark.parametrize("method", ["POST", "GET"])
def test_a_subscription_over_http_is_a_request_error_logged_in_one_line(server: tuple[str, Path], method: str) -> None:
    url, log = server
    size = len(log_text(log))
    if method == "POST":
        response = post(url, TENANT_A, SUBSCRIBE)
    else:
        response = httpx.get(f"{url}/graphql", params={"query": SUBSCRIBE}, headers=TENANT_A.headers)
    result = response.json()
    assert response.status_code in (200, 400), response.text
    assert "data" not in result or result["data"] is None, result
    assert "WebSocket" in result["errors"][0]["message"], result
    time.sleep(0.2)
    written = log_text(log)[size:]
    assert "Traceback" not in written
    assert "Unexpected error" not in written


# -- 8: request-scoped caches are per operation on a WebSocket ---------------------------------------
def test_a_websocket_sees_a_decision_made_after_its_first_read(server: tuple[str, Path]) -> None:
    url, _ = server
    # two calls: deciding the first leaves the run suspended, waiting for the second
    run = start(url, ADMIN, resource="tenant-a", prompt="Please refund orders 1042 and 1043")
    query = NODE.replace("{ runId }", "{ runId toolCalls { decision { kind } } }")

    async def scenario() -> tuple[Any, Any]:
        async with ws_connect(url, init_payload=TENANT_A.headers) as ws:

            async def once() -> Any:
                op = await ws.subscribe(query, {"id": run["id"]})
                reply = await ws.receive()
                assert reply["id"] == op
                assert reply["type"] == "next", reply
                assert (await ws.receive())["type"] == "complete"
                return reply["payload"]["data"]["node"]["toolCalls"][0]["decision"]

            before = await once()
            data(url, ADMIN, DECLINE, input=approve_input(run))
            return before, await once()

    before, after = asyncio.run(scenario())
    assert before is None
    assert after == {"kind": "DECLINED"}


def test_a_websocket_sees_events_written_after_its_first_read(server: tuple[str, Path]) -> None:
    url, _ = server
    run = start(url, ADMIN, resource="tenant-a")
    query = "query E($a: ID!, $r: ID!) { runEvents(agentId: $a, runId: $r) { type } }"

    async def scenario() -> tuple[int, int]:
        async with ws_connect(url, init_payload=TENANT_A.headers) as ws:

            async def count() -> int:
                await ws.subscribe(query, {"a": REFUND, "r": run["runId"]})
                reply = await ws.receive()
                assert (await ws.receive())["type"] == "complete"
                return len(reply["payload"]["data"]["runEvents"])

            before = await count()
            data(url, ADMIN, DECLINE, input=approve_input(run))
            return before, await count()

    before, after = asyncio.run(scenario())
    assert after > before


# -- 1: a WebSocket does not outlive its JWT -------------------------------------------------------
def test_a_websocket_is_closed_when_its_token_expires(server: tuple[str, Path]) -> None:
    url, _ = server
    token = Token(sub="brief", scope="runs:read runs:start", resources="*", exp=int(time.time()) + 2)

    async def scenario() -> Any:
        async with ws_connect(url, init_payload=token.headers) as ws:
            await asyncio.sleep(3.5)
            await ws.subscribe(START, {"input": {"agentId": REFUND, "prompt": "Please refund order 1042"}})
            return await ws.receive()

    with pytest.raises(WsClosed) as closed:
        asyncio.run(scenario())
    assert closed.value.code == 4403


def test_a_running_subscription_stops_when_its_token_expires(server: tuple[str, Path]) -> None:
    url, _ = server
    token = Token(sub="brief", scope="runs:read", resources="*", exp=int(time.time()) + 2)

    async def scenario() -> None:
        async with ws_connect(url, init_payload=token.headers) as ws:
            await ws.subscribe(SUBSCRIBE, {})
            await asyncio.sleep(3.5)
            start(url, ADMIN, resource=None)  # an event the subscriber must no longer hear of
            while True:
                message = await ws.receive()
                assert message["type"] != "next", message

    with pytest.raises(WsClosed) as closed:
        asyncio.run(scenario())
    assert closed.value.code == 4403


def test_an_expired_token_is_refused_over_http(server: tuple[str, Path]) -> None:
    url, _ = server
    token = Token(sub="late", scope="runs:read", resources="*", exp=int(time.time()) - 5)
    assert post(url, token, "{ agents { id } }").status_code == 401  # type: ignore[arg-type]


# -- 9: every field of each batch item is shape-checked --------------------------------------------
@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"query": ["{ agents { id } }"]}, "query"),
        ({"query": "{ agents { id } }", "operationName": ["A"]}, "operationName"),
    ],
)
def test_a_batch_item_of_the_wrong_shape_is_a_400_naming_the_field(
    server: tuple[str, Path], item: dict[str, Any], field: str
) -> None:
    url, _ = server
    response = httpx.post(f"{url}/graphql", json=[{"query": "{ agents { id } }"}, item], headers=ADMIN.headers)
    assert response.status_code == 400, response.text
    assert f"`{field}`" in response.text, response.text


# -- hardening ---------------------------------------------------------------------------------------
def test_a_long_prompt_and_a_long_reason_are_refused_before_anything_is_written(server: tuple[str, Path]) -> None:
    url, _ = server
    thread = f"long-{uuid.uuid4().hex[:8]}"
    fields = {"agentId": REFUND, "prompt": "Please refund order 1042 " + "x" * 3000, "threadId": thread}
    result = body(url, ADMIN, START, input=fields)
    assert result["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT", result
    assert "input.prompt" in json.dumps(result), result
    listing = data(
        url,
        ADMIN,
        'query L($f: SuspendedRunFilter) { suspendedRuns(agentId: "refund-agent", filter: $f) { totalCount } }',
        f={"threadId": thread},
    )
    assert listing["suspendedRuns"]["totalCount"] == 0

    run = start(url, ADMIN)
    result = body(url, ADMIN, DECLINE, input={**approve_input(run), "reason": "no " * 400})
    assert result["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT", result
    assert "input.reason" in json.dumps(result), result
    still = data(url, ADMIN, NODE.replace("{ runId }", "{ toolCalls { decision { kind } } }"), id=run["id"])
    assert still["node"]["toolCalls"][0]["decision"] is None


@pytest.mark.parametrize("parameter", ["access_token", "token", "api_key"])
def test_a_credential_in_the_query_string_is_refused_and_not_logged(server: tuple[str, Path], parameter: str) -> None:
    url, log = server
    size = len(log_text(log))
    response = httpx.get(
        f"{url}/graphql", params={"query": "{ agents { id } }", parameter: ADMIN.key}, headers=ADMIN.headers
    )
    assert response.status_code == 400, response.text
    assert parameter in response.text
    time.sleep(0.2)
    assert ADMIN.key not in log_text(log)[size:]


def test_untrusted_values_are_logged_escaped(server: tuple[str, Path]) -> None:
    url, log = server
    size = len(log_text(log))
    header = jwt.api_jws.base64url_encode(json.dumps({"alg": "HS256", "kid": "evil\nFORGED line"}).encode()).decode()
    claims = jwt.api_jws.base64url_encode(b'{"sub":"x"}').decode()
    response = httpx.post(
        f"{url}/graphql",
        json={"query": "{ agents { id } }"},
        headers={"Authorization": f"Bearer {header}.{claims}.c2ln"},
    )
    assert response.status_code == 401
    response = post(url, ADMIN, "query Q { agents { id } }", operation_name="Q\nFORGED line")
    time.sleep(0.2)
    assert "\nFORGED" not in log_text(log)[size:]


def test_replaying_a_subscription_reads_only_the_subscribers_events(server: tuple[str, Path]) -> None:
    url, _ = server
    mine = start(url, ADMIN, resource="tenant-a")
    start(url, ADMIN, resource="tenant-b")
    first = data(
        url, ADMIN, "query E($a: ID!, $r: ID!) { runEvents(agentId: $a, runId: $r) { id } }", a=REFUND, r=mine["runId"]
    )["runEvents"][0]["id"]
    query = (
        'subscription S($after: ID) { suspendedRunEvents(agentId: "refund-agent", afterEventId: $after)'
        " { runId resourceId } }"
    )

    async def scenario() -> list[Any]:
        seen = []
        async with ws_connect(url, init_payload=TENANT_A.headers) as ws:
            await ws.subscribe(query, {"after": first})
            try:
                while True:
                    seen.append((await asyncio.wait_for(ws.receive(), 2))["payload"]["data"]["suspendedRunEvents"])
            except TimeoutError:
                return seen

    seen = asyncio.run(scenario())
    assert seen
    assert all(event["resourceId"] == "tenant-a" for event in seen), seen
