"""The third security pass (issue 26), over HTTP and WebSocket against real server processes.

One secured server on a SQLite file (so a test can read what was stored, and write what an older
runsgate might have stored), with the demo agents and ``json-echo`` (``tests/_json_agent.py``).
Findings that need another configuration (authentication off, a webhook receiver) start their
own server.
"""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from .._auth import ALL, TestKey, api_keys_json
from .._graphql import GraphQLClient, WsClosed, data, post, refusal_message, ws_connect, ws_execute
from .._receiver import new_secret, receiving
from .._servers import runsgate_process, runsgate_servers
from ..webhooks._setup import webhooks_env
from .test_access_matrix import APPROVE, DECLINE, START

ADMIN = TestKey(
    "third-root", "rg_third_root_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", (*ALL, "refunds:approve", "webhooks:read")
)
REFUND = "refund-agent"
JSON_ECHO = "json-echo"
START_WITH_ERROR = START.replace("... on RunOutcome { runId status", "... on RunOutcome { runId status error")
BIG = 2**70
ONE = (
    "query One($agentId: ID!, $runId: ID!) { suspendedRun(agentId: $agentId, runId: $runId) { runId status "
    "threadId resourceId toolCalls { toolCallId args decision { kind } } } }"
)


@dataclass(frozen=True)
class Secured:
    url: str
    database: Path
    log: Path


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    folder = tmp_path_factory.mktemp("third-pass")
    database, log = folder / "runsgate.db", folder / "runsgate.log"
    env = {
        "RUNSGATE_AUTH": "on",
        "RUNSGATE_API_KEYS": api_keys_json(ADMIN),
        "RUNSGATE_AGENTS": "tests._json_agent:AGENTS",
        "RUNSGATE_TOOL_RULES": "[]",
        "RUNSGATE_STORE": f"sqlite:///{database}",
        "RUNSGATE_LOG_LEVEL": "INFO",
        "RUNSGATE_LOG_FORMAT": "text",
    }
    with runsgate_process(log, **env) as url:
        yield Secured(url, database, log)


def start(url: str, agent: str = REFUND, prompt: str = "Please refund order 1042", **fields: Any) -> dict[str, Any]:
    """A run that must suspend; its stored run."""
    given = {"agentId": agent, "prompt": prompt, "threadId": f"tp-{uuid.uuid4().hex[:8]}", **fields}
    outcome: dict[str, Any] = data(url, ADMIN, START, input=given)["startRun"]
    assert outcome["status"] == "SUSPENDED", outcome
    return outcome["run"]  # type: ignore[no-any-return]


def stored_rows(database: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table a request could write, per table (equal: nothing was written)."""
    with sqlite3.connect(database) as connection:
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {
            table: sorted(map(tuple, connection.execute(f'SELECT * FROM "{table}"')), key=repr)
            for table in tables
            if table not in {"runsgate_meta", "run_write_locks", "webhook_cursors"}
        }


def strict_loads(text: str | bytes) -> Any:
    """RFC 8259 JSON only: ``NaN``, ``Infinity`` and numbers beyond a double are refused."""

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not RFC 8259 JSON")

    def number(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(f"{text} does not fit a double")
        return value

    return json.loads(text, parse_constant=constant, parse_float=number)


# -- 1: every JSON document entering or leaving runsgate is RFC 8259 JSON --------------------------
NOT_NUMBERS = ["1e999", "-1e999", "1E400", "NaN", "Infinity"]
"""Numbers no double holds, and the constants RFC 8259 has not."""


@pytest.mark.parametrize("number", NOT_NUMBERS)
def test_a_number_beyond_a_double_in_a_body_is_refused_and_nothing_is_decided(secured: Secured, number: str) -> None:
    run = start(secured.url)
    call = run["toolCalls"][0]["toolCallId"]
    before = stored_rows(secured.database)
    edited = f'{{"order_id": 1042, "amount": {number}}}'
    raw = (
        f'{{"query": {json.dumps(APPROVE)}, "variables": {{"input": {{"agentId": "{REFUND}", '
        f'"runId": "{run["runId"]}", "toolCallId": "{call}", "editedArgs": {edited}}}}}}}'
    )

    response = httpx.post(
        f"{secured.url}/graphql", content=raw, headers={**ADMIN.headers, "content-type": "application/json"}
    )

    message = refusal_message(response)
    assert message.startswith("Unable to parse request body as JSON: "), message
    assert number.lstrip("-") in message
    assert "RFC 8259" in message
    assert stored_rows(secured.database) == before
    still = data(secured.url, ADMIN, ONE, agentId=REFUND, runId=run["runId"])["suspendedRun"]
    assert still["toolCalls"][0]["decision"] is None


@pytest.mark.parametrize("number", NOT_NUMBERS)
def test_a_number_beyond_a_double_in_get_variables_is_refused(secured: Secured, number: str) -> None:
    query = urlencode({"query": "query Agents($x: JSON) { agents { id } }", "variables": f'{{"x": {number}}}'})

    response = httpx.get(f"{secured.url}/graphql?{query}", headers=ADMIN.headers)

    message = refusal_message(response)
    assert message.startswith("Unable to parse a query parameter as JSON: "), message  # no body
    assert number.lstrip("-") in message
    assert "RFC 8259" in message


@pytest.mark.parametrize("number", NOT_NUMBERS)
def test_a_number_beyond_a_double_in_a_websocket_message_closes_it(secured: Secured, number: str) -> None:
    message = (
        '{"id": "1", "type": "subscribe", "payload": {"query": "query Agents($x: JSON) { agents { id } }", '
        f'"variables": {{"x": {number}}}}}}}'
    )

    async def send() -> None:
        async with ws_connect(secured.url, init_payload=ADMIN.headers) as ws:
            await ws._socket.send(message)
            await ws.receive()

    with pytest.raises(WsClosed) as closed:
        asyncio.run(send())

    assert closed.value.code == 4400


def test_a_value_no_json_holds_is_never_stored_and_the_run_fails_saying_why(secured: Secured) -> None:
    # json-echo's model reads its prompt with Python's json, which takes Infinity: the tool call's
    # arguments hold a float no RFC 8259 document can carry
    fields = {"agentId": JSON_ECHO, "prompt": '{"hold": Infinity}', "threadId": "tp-infinity"}

    outcome = data(secured.url, ADMIN, START_WITH_ERROR, input=fields)["startRun"]

    assert outcome["status"] == "FAILED", outcome
    assert "JSON" in outcome["error"], outcome
    with sqlite3.connect(secured.database) as connection:
        texts = [
            text
            for query in (
                "SELECT tool_calls FROM run_snapshots",
                "SELECT data FROM run_events",
                "SELECT result FROM idempotency_keys WHERE result IS NOT NULL",
            )
            for (text,) in connection.execute(query)
        ]
    for text in texts:
        strict_loads(text)  # every stored document is RFC 8259 JSON


def test_a_stored_infinity_written_before_is_read_and_shown_as_null(secured: Secured) -> None:
    # with an integer beyond 64 bits beside it, which the reply's fast encoder (orjson) does not take
    run = start(secured.url)
    with sqlite3.connect(secured.database) as connection:  # as an older runsgate could have stored it
        connection.execute(
            "UPDATE run_snapshots SET tool_calls = "
            "replace(replace(tool_calls, '\"amount\":49.9', '\"amount\":Infinity'), "
            f"'\"order_id\":1042', '\"order_id\":{BIG}') WHERE run_id = ?",
            (run["runId"],),
        )

    variables = {"agentId": REFUND, "runId": run["runId"]}
    query = urlencode({"query": ONE, "variables": json.dumps(variables)})
    for response in (
        post(secured.url, ADMIN, ONE, **variables),
        httpx.get(f"{secured.url}/graphql?{query}", headers=ADMIN.headers),
    ):
        assert response.status_code == 200, response.text
        read = strict_loads(response.content)["data"]["suspendedRun"]
        assert read["toolCalls"][0]["args"] == {"order_id": BIG, "amount": None}


@pytest.mark.parametrize("mutation", ["approve", "decline"])
def test_a_run_holding_a_stored_infinity_is_still_decided(secured: Secured, mutation: str) -> None:
    # given a run whose call's arguments an older runsgate stored with Infinity in them
    run = start(secured.url)
    with sqlite3.connect(secured.database) as connection:
        connection.execute(
            "UPDATE run_snapshots SET tool_calls = replace(tool_calls, '\"amount\":49.9', '\"amount\":Infinity') "
            "WHERE run_id = ?",
            (run["runId"],),
        )
    call = {"agentId": REFUND, "runId": run["runId"], "toolCallId": run["toolCalls"][0]["toolCallId"]}

    # when a person decides its call
    document, given = (APPROVE, call) if mutation == "approve" else (DECLINE, {**call, "reason": "no"})
    response = post(secured.url, ADMIN, document, input=given)

    # then the decision is recorded and the run goes on, as for any run
    assert response.status_code == 200, response.text
    outcome = strict_loads(response.content)["data"]
    assert "errors" not in strict_loads(response.content), response.text
    [result] = outcome.values()
    assert result["__typename"] == "RunOutcome", result
    assert result["status"] == "COMPLETED", result


async def test_a_stored_infinity_written_before_reaches_a_webhook_receiver_as_null(tmp_path: Path) -> None:
    store = {"RUNSGATE_STORE": f"sqlite:///{tmp_path / 'runsgate.db'}"}
    with receiving(new_secret()) as receiver:
        hooks = webhooks_env((receiver, ["run.suspended"]), **store)
        # an instance that reads the event log only when it starts: it records nothing yet
        with runsgate_servers([tmp_path / "a.log"], **{**hooks, "RUNSGATE_WEBHOOK_POLL_INTERVAL": "3600"}) as [a]:
            await asyncio.sleep(1.0)  # its first scan stored the cursor
            async with GraphQLClient.at(a.url) as client:
                started = await client.data(START, input={"agentId": REFUND, "prompt": "Please refund order 1042"})
            outcome = started["startRun"]
            assert outcome["status"] == "SUSPENDED", outcome
        with sqlite3.connect(tmp_path / "runsgate.db") as connection:  # as an older runsgate could have stored it
            for table, column in (("run_snapshots", "tool_calls"), ("run_events", "data")):
                connection.execute(
                    f"UPDATE {table} SET {column} = replace({column}, '\"amount\":49.9', '\"amount\":Infinity')"
                )

        with runsgate_servers([tmp_path / "b.log"], **hooks):
            receiver.wait_for(lambda r: len(r.received) >= 1)

    [got] = receiver.received
    assert got.verified
    sent = strict_loads(got.body)
    assert sent["data"]["runId"] == outcome["runId"]
    assert sent["data"]["pendingCalls"][0]["args"] == {"order_id": 1042, "amount": None}


# -- 2: with authentication off, only loopback host names are answered --------------------------
REBIND = "rebind.evil.example:4304"
LIST = 'query L { suspendedRuns(agentId: "refund-agent") { totalCount } }'


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server with authentication off (allowed: it listens on 127.0.0.1), a proxy's name allowed."""
    log = tmp_path_factory.mktemp("auth-off") / "runsgate.log"
    with runsgate_process(log, RUNSGATE_ALLOWED_HOSTS='["dev-proxy.internal"]', RUNSGATE_LOG_LEVEL="INFO") as url:
        yield url


def upgrade_status(url: str, host: str, origin: str | None = None) -> int:
    """The HTTP status a WebSocket upgrade of ``/graphql`` gets with these ``Host`` and ``Origin``."""
    import socket

    port = int(url.rsplit(":", 1)[1])
    request = (
        "GET /graphql HTTP/1.1\r\n"
        f"Host: {host}\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        "Sec-WebSocket-Protocol: graphql-transport-ws\r\n"
        + ("" if origin is None else f"Origin: {origin}\r\n")
        + "\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(request.encode())
        status_line = connection.makefile("rb").readline().decode()
    return int(status_line.split()[1])


def started_runs(url: str) -> int:
    count: int = data(url, None, LIST)["suspendedRuns"]["totalCount"]
    return count


@pytest.mark.parametrize(
    ("host", "origin"),
    [(REBIND, f"http://{REBIND}"), (REBIND, None), ("localhost:4304", f"http://{REBIND}"), ("127.0.0.2", None)],
    ids=["rebound", "rebound-no-origin", "cross-site-origin", "other-loopback-name"],
)
def test_a_request_for_another_host_is_refused_with_one_line_of_json(
    open_server: str, host: str, origin: str | None
) -> None:
    before = started_runs(open_server)
    headers = {"Host": host, **({} if origin is None else {"Origin": origin})}

    response = httpx.post(
        f"{open_server}/graphql",
        json={"query": START, "variables": {"input": {"agentId": REFUND, "prompt": "Please refund order 1042"}}},
        headers=headers,
        timeout=30,
    )

    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.text.count("\n") == 0
    [error] = response.json()["errors"]
    assert error["extensions"]["code"] == "BAD_REQUEST"
    assert "RUNSGATE_ALLOWED_HOSTS" in error["message"]
    assert started_runs(open_server) == before
    for path in ("/inbox", "/healthz", "/graphql"):
        assert httpx.get(f"{open_server}{path}", headers=headers, timeout=30).status_code == 400, path


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        (REBIND, f"http://{REBIND}"),
        (REBIND, None),
        ("localhost:4304", "https://elsewhere.example"),  # Strawberry's own check of the Origin
    ],
    ids=["rebound", "rebound-no-origin", "cross-site-origin"],
)
def test_a_websocket_for_another_host_is_refused_at_the_handshake(
    open_server: str, host: str, origin: str | None
) -> None:
    assert upgrade_status(open_server, host, origin) == 403


@pytest.mark.parametrize(
    "host", ["localhost:4304", "127.0.0.1:4304", "[::1]:4304", "LOCALHOST", "127.0.0.1", "dev-proxy.internal:8080"]
)
def test_loopback_names_and_the_allowed_hosts_are_answered(open_server: str, host: str) -> None:
    origin = f"http://{host}"

    response = httpx.post(f"{open_server}/graphql", json={"query": LIST}, headers={"Host": host, "Origin": origin})

    assert response.status_code == 200, response.text
    assert upgrade_status(open_server, host, origin) == 101


def test_with_authentication_on_every_host_is_answered(secured: Secured) -> None:
    # a token is needed anyway: a page on another site has none
    response = httpx.post(
        f"{secured.url}/graphql",
        json={"query": LIST},
        headers={**ADMIN.headers, "Host": REBIND, "Origin": f"http://{REBIND}"},
    )

    assert response.status_code == 200, response.text
    assert httpx.post(f"{secured.url}/graphql", json={"query": LIST}, headers={"Host": REBIND}).status_code == 401


# -- 3: the webhook sender reads at most a small prefix of the receiver's answer -----------------
MIB = 1 << 20


class AnsweringReceiver:
    """A loopback HTTP receiver that reads each request and answers ``head`` then ``body_size``
    bytes of body (``chunk`` at a time), or ``head`` and a first chunk then nothing (``hang``),
    counting the body bytes the peer accepted before it closed the connection."""

    def __init__(self, status: int, body_size: int, *, first: bytes = b"", hang: bool = False) -> None:
        import socket
        import threading

        self.status, self.body_size, self.first, self.hang = status, body_size, first, hang
        self.sent: list[int] = []
        self.requests = 0
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/hooks/T0KEN-in-the-path?key=s3cret"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        import threading

        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: Any) -> None:
        with connection:
            reader = connection.makefile("rb")
            length = 0
            while (line := reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            reader.read(length)
            self.requests += 1
            head = (
                f"HTTP/1.1 {self.status} Answer\r\nContent-Type: text/plain\r\nContent-Length: {self.body_size}\r\n\r\n"
            )
            sent = 0
            try:
                connection.sendall(head.encode() + self.first)
                sent = len(self.first)
                if self.hang:
                    self._stop.wait(60)
                    return
                chunk = b"x" * (64 * 1024)
                while sent < self.body_size and not self._stop.is_set():
                    part = chunk[: self.body_size - sent]
                    connection.sendall(part)
                    sent += len(part)
            except OSError:
                pass  # the sender closed the connection
            finally:
                self.sent.append(sent)

    def close(self) -> None:
        self._stop.set()
        self._listener.close()


DELIVERIES = "query D { webhookDeliveries(first: 10) { nodes { status attempts lastStatusCode lastError endpoint } } }"


def _deliveries(url: str) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = data(url, None, DELIVERIES)["webhookDeliveries"]["nodes"]
    return nodes


def _hooks(receiver: AnsweringReceiver) -> dict[str, str]:
    hooks = [{"url": receiver.url, "secret": new_secret(), "events": ["run.suspended"]}]
    return {
        "RUNSGATE_WEBHOOKS": json.dumps(hooks),
        "RUNSGATE_WEBHOOK_POLL_INTERVAL": "0.2",
        "RUNSGATE_SUBSCRIPTION_LOOKBACK": "1",
        "RUNSGATE_WEBHOOK_BACKOFF": "30",
        "RUNSGATE_WEBHOOK_CONNECT_TIMEOUT": "2",
        "RUNSGATE_WEBHOOK_READ_TIMEOUT": "3",
    }


async def test_a_receiver_answering_200_with_an_endless_body_has_its_delivery_delivered(tmp_path: Path) -> None:
    # a 300 MiB body of which the receiver sends 4 KiB, then nothing: the answer is known from
    # its status line, and nothing more of it is needed
    receiver = AnsweringReceiver(200, 300 * MIB, first=b"ok" * 2048, hang=True)
    try:
        with runsgate_servers([tmp_path / "hooks.log"], **_hooks(receiver)) as [server]:
            async with GraphQLClient.at(server.url) as client:
                await client.data(START, input={"agentId": REFUND, "prompt": "Please refund order 1042"})
            for _ in range(100):
                nodes = await asyncio.to_thread(_deliveries, server.url)
                if nodes and nodes[0]["attempts"] >= 1:
                    break
                await asyncio.sleep(0.1)
    finally:
        receiver.close()

    [delivery] = nodes
    assert (delivery["status"], delivery["attempts"], delivery["lastStatusCode"]) == ("DELIVERED", 1, 200), delivery


async def test_a_receiver_answering_500_with_a_huge_body_is_cut_after_a_short_prefix(tmp_path: Path) -> None:
    receiver = AnsweringReceiver(500, 64 * MIB, first=b"receiver failed at /hooks/T0KEN-in-the-path?key=s3cret: ")
    try:
        with runsgate_servers([tmp_path / "hooks.log"], **_hooks(receiver)) as [server]:
            async with GraphQLClient.at(server.url) as client:
                await client.data(START, input={"agentId": REFUND, "prompt": "Please refund order 1042"})
            for _ in range(300):
                nodes = await asyncio.to_thread(_deliveries, server.url)
                if nodes and nodes[0]["attempts"] >= 1 and receiver.sent:
                    break
                await asyncio.sleep(0.1)
    finally:
        receiver.close()

    [delivery] = nodes
    assert (delivery["status"], delivery["lastStatusCode"]) == ("PENDING", 500), delivery
    # the delivery record keeps a short prefix of the answer, without the URL's secret parts
    assert delivery["lastError"].startswith("answered 500: receiver failed at "), delivery
    assert len(delivery["lastError"].encode()) <= 300, delivery
    assert "T0KEN" not in delivery["lastError"], delivery
    assert "s3cret" not in delivery["lastError"], delivery
    # and the sender stopped reading: far less than the 64 MiB reached it (socket buffers only)
    assert receiver.sent[0] < 32 * MIB, receiver.sent


# -- 4: every client string that is stored or echoed has a limit in bytes --------------------------
E = "é"  # two bytes of UTF-8: the limits count bytes, not characters

S = "mutation S($input: StartRunInput!) { startRun(input: $input) { __typename } }"
A = "mutation A($input: ApproveToolCallInput!) { approveToolCall(input: $input) { __typename } }"
D = "mutation D($input: DeclineToolCallInput!) { declineToolCall(input: $input) { __typename } }"
R = "mutation R($input: ResumeRunInput!) { resumeRun(input: $input) { __typename } }"
T = "mutation T($input: RetryRunInput!) { retryRun(input: $input) { __typename } }"
B = "mutation B($input: DecideToolCallsInput!) { decideToolCalls(input: $input) { results { __typename } } }"
LIST_ARGS = (
    "query L($agentId: ID!, $filter: SuspendedRunFilter, $after: String, $before: String, $last: Int) "
    "{ suspendedRuns(agentId: $agentId, filter: $filter, after: $after, before: $before, last: $last) "
    "{ totalCount } }"
)
RUN_ARGS = "query O($agentId: ID!, $runId: ID!) { suspendedRun(agentId: $agentId, runId: $runId) { runId } }"
EVENTS_ARGS = "query V($agentId: ID!, $runId: ID!) { runEvents(agentId: $agentId, runId: $runId) { id } }"
NODE_ARGS = "query N($id: ID!) { node(id: $id) { id } }"
HOOKS_ARGS = "query H($after: String) { webhookDeliveries(after: $after) { nodes { id } } }"
ENTITIES_ARGS = "query X($reps: [_Any!]!) { _entities(representations: $reps) { ... on SuspendedRun { runId } } }"
STREAM_ARGS = (
    "subscription W($agentId: ID!, $filter: RunEventFilter, $afterEventId: ID) "
    "{ suspendedRunEvents(agentId: $agentId, filter: $filter, afterEventId: $afterEventId) { id } }"
)

RUN = "0" * 32
DECIDE = {"agentId": REFUND, "runId": RUN, "toolCallId": "call-1"}
LONG_CASES = [
    # (document, variables, the argument named in the error)
    (S, {"input": {"agentId": REFUND, "prompt": "hi", "threadId": "t" * 900_000}}, "input.threadId"),
    (S, {"input": {"agentId": REFUND, "prompt": "hi", "threadId": E * 129}}, "input.threadId"),
    (S, {"input": {"agentId": REFUND, "prompt": "hi", "resourceId": "r" * 257}}, "input.resourceId"),
    (S, {"input": {"agentId": "a" * 129, "prompt": "hi"}}, "input.agentId"),
    (S, {"input": {"agentId": REFUND, "prompt": "hi", "idempotencyKey": E * 128}}, "input.idempotencyKey"),
    (A, {"input": {**DECIDE, "runId": "r" * 129}}, "input.runId"),
    (A, {"input": {**DECIDE, "toolCallId": "c" * 257}}, "input.toolCallId"),
    (A, {"input": {**DECIDE, "idempotencyKey": "k" * 256}}, "input.idempotencyKey"),
    (D, {"input": {**DECIDE, "agentId": E * 65}}, "input.agentId"),
    (R, {"input": {**DECIDE, "resumeData": {}, "questionId": "q" * 257}}, "input.questionId"),
    (T, {"input": {"agentId": REFUND, "runId": E * 65}}, "input.runId"),
    (
        B,
        {"input": {"agentId": REFUND, "decisions": [{"runId": RUN, "toolCallId": "c" * 300, "kind": "APPROVED"}]}},
        "input.decisions[0].toolCallId",
    ),
    (LIST_ARGS, {"agentId": "a" * 200}, "agentId"),
    (LIST_ARGS, {"agentId": REFUND, "filter": {"threadId": "t" * 257}}, "filter.threadId"),
    (LIST_ARGS, {"agentId": REFUND, "filter": {"resourceId": E * 200}}, "filter.resourceId"),
    (LIST_ARGS, {"agentId": REFUND, "after": "c" * 513}, "after"),
    (LIST_ARGS, {"agentId": REFUND, "before": "c" * 513, "last": 1}, "before"),
    (RUN_ARGS, {"agentId": REFUND, "runId": "r" * 129}, "runId"),
    (EVENTS_ARGS, {"agentId": REFUND, "runId": "r" * 5000}, "runId"),
    (NODE_ARGS, {"id": "n" * 513}, "id"),
    (HOOKS_ARGS, {"after": "c" * 513}, "after"),
    (ENTITIES_ARGS, {"reps": [{"__typename": "SuspendedRun", "runId": "r" * 129}]}, "representations[0].runId"),
]
ALREADY_LIMITED = [
    (S, {"input": {"agentId": REFUND, "prompt": "p" * 40_000}}, "input.prompt"),
    (D, {"input": {**DECIDE, "reason": E * 3000}}, "input.reason"),
]
"""Strings that had a limit in bytes before (``RUNSGATE_MAX_PROMPT_BYTES``, ``RUNSGATE_MAX_REASON_BYTES``)."""


def _refused_naming(errors: list[dict[str, Any]], argument: str) -> None:
    [error] = errors
    assert error["extensions"]["code"] == "BAD_USER_INPUT", error
    assert error["extensions"]["argument"] == argument, error
    assert "bytes" in error["message"], error
    assert len(error["message"]) < 200, error  # the value is not echoed


@pytest.mark.parametrize(
    ("document", "variables", "argument"),
    [*LONG_CASES, *ALREADY_LIMITED],
    ids=[f"{case[2]}-{i}" for i, case in enumerate([*LONG_CASES, *ALREADY_LIMITED])],
)
def test_a_string_over_its_limit_in_bytes_is_refused_before_anything_is_read_or_written(
    secured: Secured, document: str, variables: dict[str, Any], argument: str
) -> None:
    before = stored_rows(secured.database)

    response = post(secured.url, ADMIN, document, **variables)

    assert response.status_code == 200, response.text
    _refused_naming(response.json()["errors"], argument)
    assert stored_rows(secured.database) == before


@pytest.mark.parametrize(
    ("variables", "argument"),
    [
        ({"agentId": REFUND, "filter": {"threadId": "t" * 257}}, "filter.threadId"),
        ({"agentId": REFUND, "filter": {"runId": "r" * 129}}, "filter.runId"),
        ({"agentId": REFUND, "afterEventId": "e" * 65}, "afterEventId"),
        ({"agentId": "a" * 129}, "agentId"),
    ],
)
def test_a_subscription_argument_over_its_limit_is_refused(
    secured: Secured, variables: dict[str, Any], argument: str
) -> None:
    result = asyncio.run(ws_execute(secured.url, STREAM_ARGS, variables, init_payload=ADMIN.headers))

    _refused_naming(result["errors"], argument)


def test_a_run_stored_with_longer_values_is_still_read(secured: Secured) -> None:
    run = start(secured.url, resourceId="tenant-long")
    long_thread, long_resource = "t" * 5000, "r" * 5000
    with sqlite3.connect(secured.database) as connection:  # as an older runsgate could have stored it
        connection.execute(
            "UPDATE run_snapshots SET thread_id = ?, resource_id = ? WHERE run_id = ?",
            (long_thread, long_resource, run["runId"]),
        )

    read = data(secured.url, ADMIN, ONE, agentId=REFUND, runId=run["runId"])["suspendedRun"]

    assert (read["threadId"], read["resourceId"]) == (long_thread, long_resource)
    listed = data(secured.url, ADMIN, 'query { suspendedRuns(agentId: "refund-agent") { nodes { runId } } }')
    assert run["runId"] in [node["runId"] for node in listed["suspendedRuns"]["nodes"]]


# -- 5: no credential persisted beyond the tab, no page framed ----------------------------------
HTML_PAGES = [("/graphql", {"accept": "text/html"}), ("/inbox", {})]


@pytest.mark.parametrize(("path", "headers"), HTML_PAGES, ids=["graphiql", "inbox"])
def test_no_html_page_of_runsgate_may_be_framed(secured: Secured, path: str, headers: dict[str, str]) -> None:
    response = httpx.get(f"{secured.url}{path}", headers=headers)

    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["x-frame-options"] == "DENY"
    policy = response.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in [part.strip() for part in policy.split(";")], policy


def test_graphiql_persists_no_header_and_takes_none_from_its_url(secured: Secured) -> None:
    response = httpx.get(f"{secured.url}/graphql", headers={"accept": "text/html"})

    page = response.text
    assert "shouldPersistHeaders: false" in page
    assert "shouldPersistHeaders: true" not in page
    assert "parameters.headers" not in page  # ?headers=... in a link would preload a credential
    assert "storage: runsgateStorage," in page  # its history would keep each query's headers


# -- neighbours: a shared budget one client can use up --------------------------------------------
def test_a_client_cannot_write_long_lines_into_the_servers_log(secured: Secured) -> None:
    # graphql-core quotes a literal of the wrong type in its error whole: 600 KB here, in a
    # request well under the body limit; the log (disk, shared by every client) gets a bounded line
    marker = f"marker-{uuid.uuid4().hex}"
    literal = marker + "x" * 600_000

    response = post(
        secured.url, ADMIN, f'query {{ suspendedRuns(agentId: "refund-agent", first: "{literal}") {{ totalCount }} }}'
    )

    assert response.status_code == 200, response.text
    for _ in range(100):  # the line is written after the answer
        text = secured.log.read_text(encoding="utf-8", errors="replace")
        if marker in text:
            break
        time.sleep(0.05)
    lines = [line for line in text.splitlines() if marker in line]
    assert lines, "the refusal was not logged"
    assert max(len(line) for line in lines) <= 10_000, [len(line) for line in lines]
