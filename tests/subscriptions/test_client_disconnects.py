"""A client that closes its WebSocket while a subscription replays the event log is no server
fault: nothing is logged at ERROR and no traceback, for ``reviewQueueEvents`` and
``suspendedRunEvents`` resumed from the log's beginning (a replay of many messages), against a
real runsgate process.

Each client reads the first message, so the replay is under way, then closes without reading on;
the server's next sends find the socket closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .._graphql import REFUND, TWO_REFUNDS_PROMPT, GraphQLClient, ws_connect
from .._servers import runsgate_process

QUEUE_START = "00000000000000000000-000000000000:0"
"""A ``reviewQueueEvents`` ``afterEventId`` before every event: the stream replays the whole log first."""
RUNS = 40
"""Runs started before the streams: each adds its events (and queue entries) to the replay."""
CLIENTS = 4
"""Clients that close mid-replay, per subscription."""

SUBSCRIPTIONS = {
    "reviewQueueEvents": "subscription($after: ID) { reviewQueueEvents(afterEventId: $after) { id runId change } }",
    "suspendedRunEvents": (
        f'subscription($after: ID) {{ suspendedRunEvents(agentId: "{REFUND}", afterEventId: $after) '
        "{ id type runId data } }"
    ),
}


@dataclass(frozen=True)
class Server:
    url: str
    log: Path
    after: dict[str, str]
    """Each subscription's ``afterEventId`` early in the log: its replay holds every run."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A runsgate process logging at INFO (so a DEBUG line would not show, an ERROR would), with
    ``RUNS`` suspended runs of two refunds each."""
    log = tmp_path_factory.mktemp("ws-disconnects") / "runsgate.log"
    with runsgate_process(log, RUNSGATE_LOG_LEVEL="INFO", RUNSGATE_LOG_FORMAT="text") as url:

        async def start() -> str:
            async with GraphQLClient.at(url) as gql:
                runs = [await gql.suspend(REFUND, TWO_REFUNDS_PROMPT) for _ in range(RUNS)]
                return str((await gql.run_events(REFUND, runs[0]["runId"]))[0]["id"])

        first_event = asyncio.run(start())
        yield Server(url, log, {"reviewQueueEvents": QUEUE_START, "suspendedRunEvents": first_event})


@pytest.mark.parametrize("fields", [[field] for field in SUBSCRIPTIONS] + [list(SUBSCRIPTIONS)], ids=str)
async def test_a_client_closing_during_a_replay_logs_no_error(server: Server, fields: list[str]) -> None:
    url, log = server.url, server.log
    written_before = len(log.read_text())

    # when clients open replaying subscriptions (one, or both on one socket), read a first
    # message, and close at once
    for _ in range(CLIENTS):
        async with ws_connect(url) as ws:
            operations = [await ws.subscribe(SUBSCRIPTIONS[f], {"after": server.after[f]}) for f in fields]
            first = await ws.receive()
            assert (first["id"] in operations, first["type"]) == (True, "next"), first
            assert "errors" not in first["payload"], first

    # then the server still serves, and its log has no error and no traceback
    async with ws_connect(url) as ws:
        await ws.subscribe(SUBSCRIPTIONS[fields[0]], {"after": server.after[fields[0]]})
        assert (await ws.receive())["type"] == "next"
    await asyncio.sleep(0.5)  # the lines of the closed sockets reach the file
    written = log.read_text()[written_before:]
    assert "Traceback" not in written, written
    assert " ERROR " not in written, written
