"""``runUpdates`` and ``waitFor`` over HTTP and a real WebSocket to a runsgate process (docs/api.md
"Run updates" and "Decisions that do not wait").

A ``waitFor: RECORDED`` approval answers ``RESUMING`` at once; the subscriber sees the
continuation: ``RESUMED``, the model's text deltas, the approved call starting and ending under
its identity, and ``COMPLETED`` with the output, then the stream completes. A late subscriber gets
the same updates; ``after`` resumes after one. Rejected arguments and unknown runs are errors
with a code, as ``suspendedRunEvents``'s.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests._servers import runsgate_process

from .._graphql import REFUND, REFUND_PROMPT, GraphQLClient, GraphQLWebSocket, document, ws_connect

RUN_UPDATES = document(
    """
    subscription RunUpdates($agentId: ID!, $runId: ID!, $after: ID) {
      runUpdates(agentId: $agentId, runId: $runId, after: $after) {
        id kind at continuationId text toolCallId toolName args result error output truncated
        run { runId status }
      }
    }
    """
)

DECIDE = document(
    """
    mutation Decide($input: DecideToolCallsInput!) {
      decideToolCalls(input: $input) {
        results { __typename ... on RunOutcome { runId status output } }
      }
    }
    """
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One runsgate process (memory store)."""
    log = tmp_path_factory.mktemp("run-updates") / "server.log"
    with runsgate_process(log, RUNSGATE_SUBSCRIPTION_POLL_INTERVAL="0.1", RUNSGATE_GRAPHIQL="false") as url:
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


async def _suspended(server: str) -> tuple[str, str]:
    async with GraphQLClient.at(server) as client:
        run = await client.suspend(REFUND, REFUND_PROMPT, resourceId=f"r-{uuid.uuid4().hex[:8]}")
    return run["runId"], run["toolCalls"][0]["toolCallId"]


async def test_a_recorded_approval_answers_resuming_and_the_subscriber_sees_the_continuation(server: str) -> None:
    run_id, call_id = await _suspended(server)
    async with ws_connect(server) as ws, GraphQLClient.at(server) as client:
        operation = await ws.subscribe(RUN_UPDATES, {"agentId": REFUND, "runId": run_id})

        answered = await client.approve(REFUND, run_id, call_id, waitFor="RECORDED")
        updates = await _updates(ws, operation)
        events = await client.run_events(REFUND, run_id)

    assert (answered["__typename"], answered["status"], answered["output"]) == ("RunOutcome", "RESUMING", None)
    kinds = [u["kind"] for u in updates]
    assert (kinds[0], kinds[-1]) == ("RESUMED", "COMPLETED"), kinds
    assert "TEXT" in kinds, kinds
    started = [u for u in updates if u["kind"] == "TOOL_CALL_STARTED"]
    ended = [u for u in updates if u["kind"] == "TOOL_CALL_ENDED"]
    assert [(u["toolCallId"], u["toolName"]) for u in started] == [(call_id, "issue_refund")]
    assert [u["toolCallId"] for u in ended] == [call_id]
    assert ended[0]["result"] is not None
    assert kinds.index("TOOL_CALL_STARTED") < kinds.index("TOOL_CALL_ENDED")
    ids = [u["id"] for u in updates]
    assert ids == sorted(set(ids))
    assert {u["continuationId"] for u in updates} == {e["id"] for e in events if e["type"] == "resumed"}
    assert updates[-1]["output"] == events[-1]["data"]["output"]
    assert "".join(u["text"] for u in updates if u["kind"] == "TEXT") == updates[-1]["output"]


async def test_a_late_subscriber_gets_the_continuation_and_after_resumes_after_an_update(server: str) -> None:
    run_id, call_id = await _suspended(server)
    async with GraphQLClient.at(server) as client:
        done = await client.approve(REFUND, run_id, call_id)
    assert done["status"] == "COMPLETED", done

    async with ws_connect(server) as ws:
        everything = await _updates(ws, await ws.subscribe(RUN_UPDATES, {"agentId": REFUND, "runId": run_id}))
        rest = await _updates(
            ws, await ws.subscribe(RUN_UPDATES, {"agentId": REFUND, "runId": run_id, "after": everything[1]["id"]})
        )

    assert [u["kind"] for u in everything][:: len(everything) - 1] == ["RESUMED", "COMPLETED"]
    assert [u["id"] for u in rest] == [u["id"] for u in everything[2:]]


@pytest.mark.parametrize(
    ("variables", "code"),
    [
        pytest.param({"agentId": "no-such-agent", "runId": "r"}, "AGENT_NOT_FOUND", id="unknown-agent"),
        pytest.param({"agentId": REFUND, "runId": "no-such-run"}, "RUN_NOT_FOUND", id="unknown-run"),
        pytest.param({"agentId": REFUND, "runId": "r", "after": "not-an-update-id"}, "BAD_USER_INPUT", id="bad-after"),
    ],
)
async def test_a_refused_subscription_is_one_error_with_its_code(
    server: str, variables: dict[str, Any], code: str
) -> None:
    async with ws_connect(server) as ws:
        operation = await ws.subscribe(RUN_UPDATES, variables)
        error = await ws.receive()
        complete = await ws.receive()

    assert (error["id"], error["type"]) == (operation, "next"), error
    [problem] = error["payload"]["errors"]
    assert problem["extensions"]["code"] == code, problem
    assert complete == {"id": operation, "type": "complete"}


async def test_a_recorded_batch_answers_resuming_and_its_replay_answers_the_same(server: str) -> None:
    runs = [await _suspended(server) for _ in range(2)]
    key = uuid.uuid4().hex
    decisions = [{"runId": run_id, "toolCallId": call_id, "kind": "APPROVED"} for run_id, call_id in runs]
    async with GraphQLClient.at(server) as client:
        first = await client.data(
            DECIDE, input={"agentId": REFUND, "decisions": decisions, "idempotencyKey": key, "waitFor": "RECORDED"}
        )
        replayed = await client.data(DECIDE, input={"agentId": REFUND, "decisions": decisions, "idempotencyKey": key})

    results = first["decideToolCalls"]["results"]
    assert [(r["__typename"], r["status"]) for r in results] == [("RunOutcome", "RESUMING")] * 2
    assert replayed == first
