"""Responses are encoded by orjson, and what orjson refuses still answers (``GraphQLView.encode_json``)."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx

from server.app import create_app
from server.settings import DEMO_AGENTS, Settings
from storage import SCHEMA_VERSION, SnapshotDocument

RUN = """
query Run($runId: ID!) {
  suspendedRun(agentId: "refund-agent", runId: $runId) { runId toolCalls { args } }
}
"""


def snapshot(run_id: str, args: object) -> SnapshotDocument:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return {
        "_id": run_id,
        "agentId": "refund-agent",
        "threadId": None,
        "resourceId": None,
        "parentRunId": None,
        "status": "suspended",
        "createdAt": at,
        "suspendedAt": at,
        "updatedAt": at,
        "toolCalls": [
            {
                "toolCallId": "c1",
                "toolName": "issue_refund",
                "args": args,
                "requiresApproval": True,
                "suspendPayload": None,
                "resumeSchema": None,
                "decision": None,
            }
        ],
        "pendingCount": 1,
        "version": 1,
        "claim": None,
        "lastError": None,
        "schemaVersion": SCHEMA_VERSION,
        "historyId": f"h-{run_id}",
    }


async def test_args_orjson_cannot_encode_are_still_answered() -> None:
    # given (memory store: BSON has no integers beyond 64 bits) runs whose args orjson handles or refuses
    app = create_app(Settings(agents=DEMO_AGENTS, mongodb_uri=None, auth=False))  # loopback: auth may be off
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as http,
    ):
        await app.state.store.insert(snapshot("plain", {"order_id": 1042, "note": "café"}), b"[]")
        await app.state.store.insert(snapshot("huge", {"order_id": 2**70}), b"[]")

        # when both are read over HTTP
        plain = await http.post("/graphql", json={"query": RUN, "variables": {"runId": "plain"}})
        huge = await http.post("/graphql", json={"query": RUN, "variables": {"runId": "huge"}})

    # then orjson's compact UTF-8 encoding answers the first, json.dumps the second
    assert plain.status_code == huge.status_code == 200
    assert plain.content.startswith(b'{"data":{"suspendedRun":{"runId":"plain"')
    assert "café".encode() in plain.content
    assert huge.json()["data"]["suspendedRun"]["toolCalls"][0]["args"] == {"order_id": 2**70}
