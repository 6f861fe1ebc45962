"""A declined call in ``runUpdates``, over HTTP and a real WebSocket to a runsgate process, on the
memory, SQLite and MongoDB stores (issue 41 part 4; docs/api.md "Run updates").

A declined call's tool never runs: the stream says ``TOOL_CALL_DECLINED`` with its reason and
decider, and never ``TOOL_CALL_STARTED`` or ``TOOL_CALL_ENDED`` for it, whether a person declined
it or its deadline did (``decidedBy: "expiry"``). The rest of the continuation streams as before,
complete and in order; a subscriber that comes after the run ended reads the same updates from
the store.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests._servers import runsgate_process, store_variables

from .._graphql import REFUND, WAIT, GraphQLClient, GraphQLWebSocket, document, ws_connect
from ..conftest import STORE_KINDS

RUN_UPDATES = document(
    """
    subscription RunUpdates($agentId: ID!, $runId: ID!) {
      runUpdates(agentId: $agentId, runId: $runId) {
        id kind continuationId text toolCallId toolName args result error reason decidedBy output
      }
    }
    """
)

DECIDE = document(
    """
    mutation Decide($input: DecideToolCallsInput!) {
      decideToolCalls(input: $input) { results { __typename ... on RunOutcome { runId status output } } }
    }
    """
)

EXPIRING_ORDER = 1045
"""The demo's $640 order: the only refund the rule below gives a deadline."""
RULES = json.dumps([{"tool": "issue_refund", "argument": "amount", "above": 500, "expiresAfter": 1}])
"""A refund over $500 waits 1 s for its approval, then is declined by ``expiry``."""


@pytest.fixture(scope="module", params=STORE_KINDS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One runsgate process on the memory store, a SQLite file, then a fresh MongoDB database."""
    folder = tmp_path_factory.mktemp(f"declined-{request.param}")
    store = store_variables(request, folder)
    with runsgate_process(
        folder / "server.log",
        RUNSGATE_TOOL_RULES=RULES,
        RUNSGATE_SWEEP_INTERVAL="0.1",
        RUNSGATE_SUBSCRIPTION_POLL_INTERVAL="0.1",
        RUNSGATE_GRAPHIQL="false",
        **store,
    ) as url:
        yield url


async def _updates(ws: GraphQLWebSocket, operation: str) -> list[dict[str, Any]]:
    """Every update of ``operation`` up to its ``complete``."""
    received: list[dict[str, Any]] = []
    while True:
        message = await ws.receive()
        assert message["id"] == operation, message
        if message["type"] == "complete":
            return received
        assert message["type"] == "next", message
        assert "errors" not in message["payload"], message
        received.append(message["payload"]["data"]["runUpdates"])


async def _stream(server: str, run_id: str) -> list[dict[str, Any]]:
    """The run's updates, from a subscription opened now, up to its outcome."""
    async with ws_connect(server) as ws:
        return await _updates(ws, await ws.subscribe(RUN_UPDATES, {"agentId": REFUND, "runId": run_id}))


def _of(updates: list[dict[str, Any]], call_id: str) -> list[str]:
    return [u["kind"] for u in updates if u["toolCallId"] == call_id]


def _in_order_and_whole(updates: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
    """One continuation, from RESUMED to COMPLETED, its ids sorted and unique, the model's answer
    after every tool call, and its text deltas adding up to the output."""
    kinds = [u["kind"] for u in updates]
    assert (kinds[0], kinds[-1]) == ("RESUMED", "COMPLETED"), kinds
    assert kinds.count("RESUMED") == kinds.count("COMPLETED") == 1, kinds
    ids = [u["id"] for u in updates]
    assert ids == sorted(set(ids)), ids
    assert {u["continuationId"] for u in updates} == {e["id"] for e in events if e["type"] == "resumed"}
    last_tool = max(i for i, kind in enumerate(kinds) if kind.startswith("TOOL_CALL_"))
    assert last_tool < kinds.index("TEXT"), kinds
    assert "".join(u["text"] for u in updates if u["kind"] == "TEXT") == updates[-1]["output"]
    assert updates[-1]["output"] == events[-1]["data"]["output"]


async def test_a_call_declined_by_a_person_is_streamed_as_declined_with_its_reason_and_never_started(
    server: str,
) -> None:
    # given a run of two refunds, and a subscriber
    async with GraphQLClient.at(server) as client:
        run = await client.suspend(REFUND, "Please refund orders 1042 and 1043")
        run_id = run["runId"]
        approved, declined = (call["toolCallId"] for call in run["toolCalls"])
        async with ws_connect(server) as ws:
            operation = await ws.subscribe(RUN_UPDATES, {"agentId": REFUND, "runId": run_id})

            # when the first is approved and the second declined with a reason, in one request
            decisions = [
                {"runId": run_id, "toolCallId": approved, "kind": "APPROVED"},
                {"runId": run_id, "toolCallId": declined, "kind": "DECLINED", "reason": "Refunded by phone"},
            ]
            answered = await client.data(DECIDE, input={"agentId": REFUND, "decisions": decisions})
            live = await _updates(ws, operation)
        events = await client.run_events(REFUND, run_id)
    late = await _stream(server, run_id)

    # then the approved call started and ended, the declined one was declined, with its reason
    assert [r["status"] for r in answered["decideToolCalls"]["results"]] == ["SUSPENDED", "COMPLETED"]
    assert _of(live, approved) == ["TOOL_CALL_STARTED", "TOOL_CALL_ENDED"], live
    assert _of(live, declined) == ["TOOL_CALL_DECLINED"], live
    (update,) = [u for u in live if u["toolCallId"] == declined]
    (decision,) = [e for e in events if e["type"] == "decision" and e["data"]["toolCallId"] == declined]
    assert (update["toolName"], update["reason"], update["decidedBy"]) == (
        "issue_refund",
        "Refunded by phone",
        decision["by"],
    )
    assert (update["args"], update["result"], update["error"]) == (None, None, None)
    # and the rest is whole and in order, the same from the store once the run ended
    _in_order_and_whole(live, events)
    assert "The refund for order 1043 was not issued" in live[-1]["output"]
    assert late == live


async def test_a_call_declined_without_a_reason_has_none(server: str) -> None:
    async with GraphQLClient.at(server) as client:
        run = await client.suspend(REFUND, "Please refund order 1043")
        run_id, call_id = run["runId"], run["toolCalls"][0]["toolCallId"]
        async with ws_connect(server) as ws:
            operation = await ws.subscribe(RUN_UPDATES, {"agentId": REFUND, "runId": run_id})
            answered = await client.decline(REFUND, run_id, call_id)
            live = await _updates(ws, operation)
        events = await client.run_events(REFUND, run_id)

    assert answered["status"] == "COMPLETED", answered
    assert [u["kind"] for u in live if u["kind"].startswith("TOOL_CALL_")] == ["TOOL_CALL_DECLINED"], live
    (update,) = [u for u in live if u["toolCallId"] == call_id]
    assert (update["toolName"], update["reason"]) == ("issue_refund", None)
    _in_order_and_whole(live, events)


async def test_a_call_declined_by_its_deadline_is_streamed_as_declined_by_expiry(server: str) -> None:
    # given a refund over $500, which waits 1 s for its approval, followed from its suspension
    async with GraphQLClient.at(server) as client:
        run = await client.suspend(REFUND, f"Please refund order {EXPIRING_ORDER}")
        run_id, call_id = run["runId"], run["toolCalls"][0]["toolCallId"]
        assert run["toolCalls"][0]["args"]["amount"] > 500
        # when nobody decides it: the sweeper declines it once its deadline passed, and the run continues
        live = await _stream(server, run_id)
        async with asyncio.timeout(WAIT):
            while (events := await client.run_events(REFUND, run_id))[-1]["type"] != "completed":  # noqa: ASYNC110
                await asyncio.sleep(0.1)
    late = await _stream(server, run_id)

    # then the stream says it was declined by expiry, with the reason the model was given
    assert [u["kind"] for u in live if u["kind"].startswith("TOOL_CALL_")] == ["TOOL_CALL_DECLINED"], live
    (update,) = [u for u in live if u["toolCallId"] == call_id]
    (decision,) = [e for e in events if e["type"] == "decision"]
    assert (decision["by"], decision["data"]["kind"]) == ("expiry", "declined")
    assert (update["toolName"], update["decidedBy"], update["reason"]) == (
        "issue_refund",
        "expiry",
        decision["data"]["reason"],
    )
    assert update["reason"].startswith("The approval request for this call expired at "), update
    _in_order_and_whole(live, events)
    assert late == live


def test_the_rule_gives_a_deadline_to_the_expiring_order_only() -> None:
    from runtime.demo import ORDERS

    assert [order for order, row in ORDERS.items() if row["amount"] > 500] == [EXPIRING_ORDER]
