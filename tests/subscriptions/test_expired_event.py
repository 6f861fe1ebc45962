"""The ``expired`` event reaches a ``suspendedRunEvents`` subscriber over a real WebSocket,
before the expiry's ``decision`` (issue 18 part 2; docs/api.md "Subscriptions")."""

from __future__ import annotations

import json
from pathlib import Path

from tests._servers import runsgate_process

from .._graphql import EVENTS, run_event_ids, start_refund_run, ws_connect

AGENT = "refund-agent"


async def test_a_subscriber_sees_the_expired_event_then_the_expirys_decision(tmp_path: Path) -> None:
    # given a runsgate process whose refunds expire after 1 s, the sweeper looking every 0.1 s
    rules = json.dumps([{"tool": "issue_refund", "expiresAfter": 1}])
    with runsgate_process(
        tmp_path / "server.log",
        RUNSGATE_TOOL_RULES=rules,
        RUNSGATE_SWEEP_INTERVAL="0.1",
        RUNSGATE_SUBSCRIPTION_POLL_INTERVAL="0.1",
        RUNSGATE_GRAPHIQL="false",
    ) as server:
        # when a refund run suspends and a subscriber follows it from its last event
        run_id = await start_refund_run(server, resource_id="r-expiry", thread_id=None)
        after = (await run_event_ids(server, run_id))[-1]
        async with ws_connect(server) as ws:
            operation = await ws.subscribe(
                EVENTS, {"agentId": AGENT, "afterEventId": after, "filter": {"runId": run_id}}
            )
            events = await ws.events_until(operation, (run_id, "completed"))

    # then it streams the expiry: expired, then the decision by "expiry", then the continuation
    assert [e["type"] for e in events] == ["expired", "decision", "resumed", "completed"]
    assert [e["by"] for e in events[:2]] == ["expiry", "expiry"]
    assert events[0]["data"]["onExpiry"] == "decline"
    assert events[1]["data"]["kind"] == "declined"
