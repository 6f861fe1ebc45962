"""A minimal graphql-transport-ws client over ``websockets``, and GraphQL over HTTP, for the
Python subscription tests (the Node tests use the ``graphql-ws`` package itself)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

WAIT = 30.0
"""Seconds to wait for an expected message before failing: a liveness bound, not a speed check."""

EVENTS = """
subscription Events($agentId: ID!, $filter: RunEventFilter, $afterEventId: ID) {
  suspendedRunEvents(agentId: $agentId, filter: $filter, afterEventId: $afterEventId) {
    id type runId threadId resourceId at by data
  }
}
"""


class Subscriptions:
    """One graphql-transport-ws connection, acknowledged."""

    def __init__(self, socket: ClientConnection) -> None:
        self._socket = socket
        self._next_id = 0

    async def subscribe(self, query: str, variables: dict[str, Any]) -> str:
        self._next_id += 1
        operation = str(self._next_id)
        message = {"id": operation, "type": "subscribe", "payload": {"query": query, "variables": variables}}
        await self._socket.send(json.dumps(message))
        return operation

    async def receive(self) -> dict[str, Any]:
        """The next message (``next``, ``error`` or ``complete``), pings answered."""
        while True:
            message: dict[str, Any] = json.loads(await asyncio.wait_for(self._socket.recv(), WAIT))
            if message["type"] == "ping":
                await self._socket.send(json.dumps({"type": "pong"}))
                continue
            return message

    async def events_until(self, operation: str, last: tuple[str, str]) -> list[dict[str, Any]]:
        """Events of ``operation`` up to and including the one of run ``last[0]`` with type ``last[1]``."""
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
async def subscriptions(base_url: str) -> AsyncIterator[Subscriptions]:
    """Connect to ``base_url``'s ``/graphql`` with graphql-transport-ws and wait for the ack."""
    url = base_url.replace("http", "ws", 1) + "/graphql"
    async with connect(url, subprotocols=["graphql-transport-ws"]) as socket:  # type: ignore[list-item]
        await socket.send(json.dumps({"type": "connection_init"}))
        ack = json.loads(await asyncio.wait_for(socket.recv(), WAIT))
        assert ack["type"] == "connection_ack", ack
        yield Subscriptions(socket)


START_RUN = """
mutation Start($input: StartRunInput!) {
  startRun(input: $input) {
    __typename
    ... on RunOutcome { runId status run { toolCalls { toolCallId } } }
    ... on UserError { code message }
  }
}
"""

RUN_EVENTS = "query Events($agentId: ID!, $runId: ID!) { runEvents(agentId: $agentId, runId: $runId) { id type } }"


async def graphql(base_url: str, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=base_url, timeout=WAIT) as client:
        response = await client.post("/graphql", json={"query": query, "variables": variables})
    body: dict[str, Any] = response.json()
    assert "errors" not in body, body
    data: dict[str, Any] = body["data"]
    return data


async def start_refund_run(base_url: str, *, resource_id: str | None, thread_id: str | None) -> str:
    """Start a ``refund-agent`` run that suspends; returns its runId."""
    data = await graphql(
        base_url,
        START_RUN,
        {
            "input": {
                "agentId": "refund-agent",
                "prompt": "Please refund order 1042",
                "resourceId": resource_id,
                "threadId": thread_id,
            }
        },
    )
    outcome = data["startRun"]
    assert outcome["__typename"] == "RunOutcome", outcome
    assert outcome["status"] == "SUSPENDED", outcome
    run_id: str = outcome["runId"]
    return run_id


async def run_event_ids(base_url: str, run_id: str) -> list[str]:
    data = await graphql(base_url, RUN_EVENTS, {"agentId": "refund-agent", "runId": run_id})
    return [e["id"] for e in data["runEvents"]]
