"""``suspendedRunEvents`` applies the same access rule as every read (SECURITY.md "Authorization").

Over ``graphql-transport-ws`` to a secured server: a principal limited to ``tenant-a`` receives
the events of ``tenant-a`` runs only, an unrestricted reader receives both tenants', and a
principal without ``runs:read`` is refused with ``FORBIDDEN``. The streams resume after a marker
event (``afterEventId``), so each stream is known in full up to its last expected event.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from websockets.asyncio.client import connect

from .._auth import TestKey
from .._graphql import data, ws_execute
from .conftest import ADMIN, ALICE, READER, STARTER, Server

AGENT = "refund-agent"
START = """
mutation Start($input: StartRunInput!) {
  startRun(input: $input) { __typename ... on RunOutcome { runId status } }
}"""
EVENT_IDS = "query Events($a: ID!, $r: ID!) { runEvents(agentId: $a, runId: $r) { id } }"
EVENTS = """
subscription Events($agentId: ID!, $after: ID) {
  suspendedRunEvents(agentId: $agentId, afterEventId: $after) { id type runId resourceId }
}"""


def _start(server: Server, resource: str) -> str:
    started = data(
        server.url, ADMIN, START, input={"agentId": AGENT, "prompt": "Please refund order 1042", "resourceId": resource}
    )["startRun"]
    assert started["status"] == "SUSPENDED", started
    run_id: str = started["runId"]
    return run_id


def _last_event_id(server: Server, run_id: str) -> str:
    events = data(server.url, ADMIN, EVENT_IDS, a=AGENT, r=run_id)["runEvents"]
    event_id: str = events[-1]["id"]
    return event_id


async def _stream_until(server: Server, key: TestKey, after: str, last_run: str) -> list[dict[str, Any]]:
    """Events received by ``key`` after ``after``, up to ``last_run``'s ``suspended`` event."""
    ws_url = server.url.replace("http://", "ws://") + "/graphql"
    async with connect(ws_url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
        await ws.send(json.dumps({"type": "connection_init", "payload": {"Authorization": f"Bearer {key.key}"}}))
        assert json.loads(await ws.recv())["type"] == "connection_ack"
        payload = {"query": EVENTS, "variables": {"agentId": AGENT, "after": after}}
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": payload}))
        received: list[dict[str, Any]] = []
        async with asyncio.timeout(30):
            while True:
                message = json.loads(await ws.recv())
                assert message["type"] == "next", message
                assert "errors" not in message["payload"], message
                event = message["payload"]["data"]["suspendedRunEvents"]
                received.append(event)
                if (event["runId"], event["type"]) == (last_run, "suspended"):
                    return received


async def test_subscribers_receive_only_the_events_of_runs_they_may_see(server: Server) -> None:
    # given a marker, then a run of tenant-b and a run of tenant-a
    marker = _last_event_id(server, _start(server, "tenant-a"))
    other = _start(server, "tenant-b")
    own = _start(server, "tenant-a")

    # when alice (tenant-a) and the reader (every resource) stream the events after the marker
    alice = await _stream_until(server, ALICE, marker, own)
    reader = await _stream_until(server, READER, marker, own)

    # then alice never hears of tenant-b's run; the reader hears of both
    assert [(e["runId"], e["type"]) for e in alice] == [(own, "started"), (own, "suspended")]
    assert {e["resourceId"] for e in alice} == {"tenant-a"}
    assert [(e["runId"], e["type"]) for e in reader] == [
        (other, "started"),
        (other, "suspended"),
        (own, "started"),
        (own, "suspended"),
    ]


async def test_a_subscriber_without_runs_read_is_refused(server: Server) -> None:
    result = await ws_execute(
        server.url,
        EVENTS,
        {"agentId": AGENT},
        init_payload={"Authorization": f"Bearer {STARTER.key}"},
    )

    assert result.get("data") is None, result
    [error] = result["errors"]
    assert error["extensions"]["code"] == "FORBIDDEN", error
