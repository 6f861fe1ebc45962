"""A WebSocket refused at ``connection_init`` (4403) says what it lacks, over a real socket.

graphql-transport-ws closes an unauthorized socket with 4403; the close reason (at most 123
bytes, RFC 6455) names what the server wants: ``{"Authorization": "Bearer <token>"}`` in the
``connection_init`` payload, or why the token sent was refused. It never repeats the token.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from .._graphql import WsClosed, ws_execute
from .conftest import ADMIN, Server

AGENTS = "query Agents { agents { id } }"

REFUSALS: list[tuple[str, dict[str, Any] | None, str | None, tuple[str, ...]]] = [
    # (case, connection_init payload, upgrade header, parts of the close reason)
    ("no-payload", None, None, ('{"Authorization": "Bearer <token>"}', "connection_init")),
    ("empty-payload", {}, None, ('{"Authorization": "Bearer <token>"}', "connection_init")),
    ("not-a-string", {"Authorization": 42}, None, ('{"Authorization": "Bearer <token>"}', "connection_init")),
    ("unknown-key", {"Authorization": "Bearer rg_not_a_key"}, None, ("invalid token", "unknown API key")),
    ("basic-scheme", {"Authorization": f"Basic {ADMIN.key}"}, None, ("Bearer",)),
    ("bad-header", None, "Bearer rg_not_a_key", ("unknown API key",)),
]


@pytest.mark.parametrize(
    ("init_payload", "header", "says"), [case[1:] for case in REFUSALS], ids=[case[0] for case in REFUSALS]
)
def test_a_refused_websocket_is_told_what_it_lacks(
    server: Server, init_payload: dict[str, Any] | None, header: str | None, says: tuple[str, ...]
) -> None:
    with pytest.raises(WsClosed) as closed:
        asyncio.run(ws_execute(server.url, AGENTS, init_payload=init_payload, header=header))

    assert closed.value.code == 4403
    reason = closed.value.reason
    assert reason.startswith("Forbidden: "), reason
    for part in says:
        assert part in reason, reason
    assert len(reason.encode()) <= 123, reason
    assert "rg_not_a_key" not in reason, reason
    assert ADMIN.key not in reason, reason
