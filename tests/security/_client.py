"""GraphQL over HTTP and over WebSocket (``graphql-transport-ws``) for the security tests."""

from __future__ import annotations

import json
from typing import Any

import httpx
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from .._auth import TestKey

_CLIENT = httpx.Client(timeout=30)
"""One keep-alive client for every request of the session (a new connection per call is slow)."""


def post(url: str, key: TestKey | None, document: str, **variables: Any) -> httpx.Response:
    """POST one GraphQL document to ``{url}/graphql`` as ``key`` (no header when ``None``)."""
    headers = {} if key is None else key.headers
    return _CLIENT.post(f"{url}/graphql", json={"query": document, "variables": variables}, headers=headers)


def body(url: str, key: TestKey | None, document: str, **variables: Any) -> dict[str, Any]:
    """The JSON body of a request answered with 200."""
    response = post(url, key, document, **variables)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def data(url: str, key: TestKey | None, document: str, **variables: Any) -> dict[str, Any]:
    """``data`` of a response without errors."""
    result = body(url, key, document, **variables)
    assert "errors" not in result, result
    payload: dict[str, Any] = result["data"]
    return payload


class WsClosed(Exception):
    """The server closed the WebSocket; ``code`` and ``reason`` as sent."""

    def __init__(self, code: int | None, reason: str) -> None:
        super().__init__(f"{code} {reason}")
        self.code = code
        self.reason = reason


async def ws_execute(
    url: str,
    document: str,
    variables: dict[str, Any] | None = None,
    *,
    init_payload: dict[str, Any] | None = None,
    header: str | None = None,
    send_init: bool = True,
) -> dict[str, Any]:
    """Run one operation over ``graphql-transport-ws``; the ``next`` payload (or ``{"errors": ...}``).

    Raises:
        WsClosed: The server closed the connection (e.g. 4403 on bad credentials).
    """
    headers = {} if header is None else {"Authorization": header}
    ws_url = url.replace("http://", "ws://") + "/graphql"
    async with connect(ws_url, subprotocols=["graphql-transport-ws"], additional_headers=headers) as ws:  # type: ignore[list-item]
        try:
            if send_init:
                init: dict[str, Any] = {"type": "connection_init"}
                if init_payload is not None:
                    init["payload"] = init_payload
                await ws.send(json.dumps(init))
                ack = json.loads(await ws.recv())
                assert ack["type"] == "connection_ack", ack
            message = {"id": "1", "type": "subscribe", "payload": {"query": document, "variables": variables or {}}}
            await ws.send(json.dumps(message))
            result: dict[str, Any] = {}
            while True:
                reply = json.loads(await ws.recv())
                if reply["type"] == "next":
                    result = reply["payload"]
                elif reply["type"] == "error":
                    return {"errors": reply["payload"]}
                elif reply["type"] == "complete":
                    return result
        except ConnectionClosed as closed:
            rcvd = closed.rcvd
            raise WsClosed(None if rcvd is None else rcvd.code, "" if rcvd is None else rcvd.reason) from None
