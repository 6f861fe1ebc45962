"""What one principal may hold open over WebSocket, against a real server (issue 42, instance 3;
SECURITY.md "Bounds on what a client or a receiver controls").

One server with small bounds: each principal may have 2 WebSockets and 3 operations in flight
over all of them, its subscriptions may hold 1 MiB of replay pages and 1 MiB of live events
waiting to be sent, and are sent 100 events a second together. One more socket is closed with
1013 (Try Again Later), one more operation is the protocol's ``error`` message with
``TOO_MANY_OPERATIONS``; another principal is never refused for it. What is held is read from
``/metrics``: within the bounds at every moment, and given back once the sockets close. (Whether
the replays stall on their client depends on how much the kernel's socket buffers take, tens of
MB on loopback here: ``tests/runtime/test_event_feed.py`` shows what a replay that is not read
holds, and ``bench.replay_attacks`` the server's memory.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket as pysocket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from .._auth import ALL, TestKey, api_keys_json
from .._graphql import WAIT, GraphQLClient, GraphQLWebSocket, WsClosed, ws_connect
from .._processes import scaled
from .._servers import runsgate_process
from ..server._process import sample, scrape

ALICE = TestKey("alice", "rg_bounds_alice_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", ALL)
BOB = TestKey("bob", "rg_bounds_bob_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", ALL)
CAROL = TestKey("carol", "rg_bounds_carol_cccccccccccccccccccccccccccccccccc", ALL)
DAN = TestKey("dan", "rg_bounds_dan_ddddddddddddddddddddddddddddddddddddd", ALL)
SOCKETS, OPERATIONS, REPLAYED, QUEUED, RATE = 2, 3, 1 << 20, 1 << 20, 100
AGENT = "refund-agent"
LIVE = 'subscription Live { suspendedRunEvents(agentId: "refund-agent") { id } }'
REPLAY = 'subscription Replay($after: ID) { suspendedRunEvents(agentId: "refund-agent", afterEventId: $after) { id } }'
HEAVY_REPLAY = REPLAY.replace("{ id }", "{ id data }")
"""A replay whose messages carry each event's data (the prompt): more than the sockets' buffers take."""
RUNS = 150
"""Runs of 32 KiB prompts seeded for the replays: about 10 MB of events."""
BEFORE_ALL = "0" * 20 + "-" + "0" * 12
HELD_BYTES = "runsgate_subscription_held_bytes"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("principal-bounds") / "runsgate.log"
    with runsgate_process(
        log,
        RUNSGATE_AUTH="on",
        RUNSGATE_API_KEYS=api_keys_json(ALICE, BOB, CAROL, DAN),
        RUNSGATE_GRAPHIQL="false",
        RUNSGATE_SUBSCRIPTION_POLL_INTERVAL="0.1",
        RUNSGATE_MAX_WS_CONNECTIONS_PER_PRINCIPAL=str(SOCKETS),
        RUNSGATE_MAX_WS_OPERATIONS_PER_PRINCIPAL=str(OPERATIONS),
        RUNSGATE_MAX_REPLAY_BYTES_PER_PRINCIPAL=str(REPLAYED),
        RUNSGATE_MAX_QUEUED_BYTES_PER_PRINCIPAL=str(QUEUED),
        RUNSGATE_MAX_SUBSCRIPTION_RATE_PER_PRINCIPAL=str(RATE),
    ) as url:
        yield url


def socket_of(url: str, key: TestKey) -> contextlib.AbstractAsyncContextManager[GraphQLWebSocket]:
    return ws_connect(url, init_payload={"Authorization": f"Bearer {key.key}"})


async def _until(check: Any, what: str) -> None:
    for _ in range(int(scaled(30) / 0.05)):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not within {scaled(30):g} s: {what}")


async def test_a_principal_opens_at_most_its_sockets_and_others_are_not_refused(server: str) -> None:
    async with socket_of(server, ALICE), socket_of(server, ALICE):
        # when alice opens one more socket than she may
        with pytest.raises(WsClosed) as refused:
            async with socket_of(server, ALICE):
                pass
        # then it is closed with 1013 (Try Again Later), saying which bound
        assert refused.value.code == 1013, refused.value
        assert "RUNSGATE_MAX_WS_CONNECTIONS_PER_PRINCIPAL" in refused.value.reason
        # and bob, another principal, opens his
        async with socket_of(server, BOB) as bob:
            assert await _agents(bob)

    # and once hers closed, alice opens sockets again
    async def opens() -> bool:
        try:
            async with socket_of(server, ALICE) as again:
                return bool(await _agents(again))
        except WsClosed:
            return False

    await _until(opens, "alice's socket accepted again after hers closed")


async def _agents(ws: GraphQLWebSocket) -> list[dict[str, Any]]:
    operation = await ws.subscribe("query A { agents { id } }", {})
    reply = await ws.receive()
    assert (reply["id"], reply["type"]) == (operation, "next"), reply
    assert (await ws.receive())["type"] == "complete"
    agents: list[dict[str, Any]] = reply["payload"]["data"]["agents"]
    return agents


async def test_a_principal_runs_at_most_its_operations_over_all_its_sockets(server: str) -> None:
    async with socket_of(server, ALICE) as first, socket_of(server, ALICE) as second:
        # given alice's three subscriptions in flight, over two sockets
        live = [await first.subscribe(LIVE, {}), await first.subscribe(LIVE, {}), await second.subscribe(LIVE, {})]
        await asyncio.sleep(0.5)  # registered (the protocol does not acknowledge a subscribe)

        # when she sends one more, on either socket
        extra = await second.subscribe(LIVE, {})
        refused = await second.receive()

        # then it is the protocol's error message, with its code and bound; her socket goes on
        assert (refused["id"], refused["type"]) == (extra, "error"), refused
        [error] = refused["payload"]
        assert error["extensions"] == {"code": "TOO_MANY_OPERATIONS", "limit": OPERATIONS}, error
        assert "RUNSGATE_MAX_WS_OPERATIONS_PER_PRINCIPAL" in error["message"]
        # and bob runs his meanwhile
        async with socket_of(server, BOB) as bob:
            assert await _agents(bob)
        # and once she completes one, her next operation runs
        await first.complete(live[0])

        async def runs() -> bool:
            operation = await second.subscribe("query A { agents { id } }", {})
            reply = await second.receive()
            assert reply["id"] == operation, reply
            if reply["type"] == "error":
                return False
            assert (await second.receive())["type"] == "complete"
            return True

        await _until(runs, "an operation of alice's accepted once one of hers completed")


async def _seed(url: str, runs: int) -> None:
    prompt = "Please refund order 1042. " + "x" * (32 * 1024 - 26)
    async with GraphQLClient.at(url, headers=BOB.headers) as client:
        for number in range(runs):
            await client.suspend(AGENT, prompt, resourceId=f"bounds-{number}")


@asynccontextmanager
async def _unread_replays(url: str, key: TestKey, count: int) -> AsyncIterator[None]:
    """``count`` replays of the whole log, with each event's data, on one socket of ``key`` whose
    client reads nothing (its receive queue holds one message, and its kernel 64 KiB: then TCP's
    window closes)."""
    raw = pysocket.socket(pysocket.AF_INET, pysocket.SOCK_STREAM)
    raw.setsockopt(pysocket.SOL_SOCKET, pysocket.SO_RCVBUF, 64 * 1024)  # the kernel may take 32 MB unread
    raw.connect(("127.0.0.1", int(url.rsplit(":", 1)[1])))
    socket = await connect(
        url.replace("http", "ws", 1) + "/graphql",
        subprotocols=["graphql-transport-ws"],  # type: ignore[list-item]
        max_queue=1,
        max_size=None,
        sock=raw,
    )
    try:
        await socket.send(json.dumps({"type": "connection_init", "payload": {"Authorization": f"Bearer {key.key}"}}))
        assert json.loads(await asyncio.wait_for(socket.recv(), WAIT))["type"] == "connection_ack"
        for number in range(count):
            payload = {"query": HEAVY_REPLAY, "variables": {"after": BEFORE_ALL}}
            await socket.send(json.dumps({"id": str(number), "type": "subscribe", "payload": payload}))
        yield
    finally:
        with contextlib.suppress(ConnectionClosed, OSError):
            socket.transport.abort()  # a client that goes away


async def test_what_one_principals_replays_hold_is_bounded_and_given_back_when_its_sockets_close(server: str) -> None:
    # given runs of 32 KiB prompts, 10 MB of events
    await _seed(server, RUNS)
    one_event = 32 * 1024 + 1024

    # when carol replays the whole log three times, with the events' data, on a socket she never reads
    async with _unread_replays(server, CAROL, OPERATIONS):
        for _ in range(40):
            await asyncio.sleep(0.05)
            held = scrape(server)[sample(HELD_BYTES)]
            # then what the server holds for her is at every moment within her bound (and an event each)
            assert held <= REPLAYED + QUEUED + OPERATIONS * one_event, held
        # and bob replays the whole log meanwhile, to its end
        async with socket_of(server, BOB) as bob:
            operation = await bob.subscribe(REPLAY, {"after": BEFORE_ALL})
            received = 0
            while received < 2 * RUNS:  # each run's started and suspended events
                message = await bob.receive()
                assert (message["id"], message["type"]) == (operation, "next"), message
                received += 1

    # and once her socket is gone, nothing is held for her
    async def given_back() -> bool:
        return scrape(server)[sample(HELD_BYTES)] == 0

    await _until(given_back, "the bytes held for carol's replays given back")


async def test_a_principals_subscriptions_share_its_rate_however_many(server: str) -> None:
    # given a log of at least 80 events (another test's runs, or these)
    await _seed(server, 40)
    async with socket_of(server, DAN) as ws:
        # when dan replays it three times at once and reads as fast as the server sends
        for _ in range(OPERATIONS):
            await ws.subscribe(REPLAY, {"after": BEFORE_ALL})
        loop = asyncio.get_running_loop()
        started, received = loop.time(), 0
        while loop.time() - started < 2.0:
            message = await ws.receive()
            assert message["type"] == "next", message
            received += 1
            # then his three subscriptions together were sent at most his rate (and a burst of a
            # tenth of a second's worth), however the machine runs: a slower one only sends fewer
            assert received <= RATE / 10 + RATE * (loop.time() - started) + 1, received
