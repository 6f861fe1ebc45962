"""``reviewQueueEvents`` on one runsgate process tells of what another did, both sharing one store
(a SQLite file, then a MongoDB database): the stream reads the stored event log, never the
process's memory (issue 45 §1 "Live"; docs/api.md "The reviewers' queue, live")."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests._servers import runsgate_processes, shared_store_env

from .._graphql import REFUND, REFUND_PROMPT, WEATHER, WEATHER_PROMPT, GraphQLClient, document, ws_connect

QUEUE = document(
    """
    subscription Queue($filter: ReviewQueueFilter, $afterEventId: ID) {
      reviewQueueEvents(filter: $filter, afterEventId: $afterEventId) { change cause runId item { toolName } }
    }
    """
)


@pytest.fixture(scope="module")
def pair(
    request: pytest.FixtureRequest, shared_store_kind: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[str]]:
    workdir = tmp_path_factory.mktemp("queue-two")
    with runsgate_processes(
        [workdir / "a.log", workdir / "b.log"],
        **shared_store_env(request, shared_store_kind, workdir),
        RUNSGATE_SUBSCRIPTION_POLL_INTERVAL="0.1",
        RUNSGATE_GRAPHIQL="false",
    ) as urls:
        yield urls


async def test_a_stream_on_one_instance_tells_what_another_did(pair: list[str]) -> None:
    a, b = pair
    resource = f"two-{uuid.uuid4().hex[:8]}"
    async with GraphQLClient.at(b) as on_b:
        marker = await on_b.suspend(WEATHER, WEATHER_PROMPT, resourceId=resource)
        after = (await on_b.run_events(WEATHER, marker["runId"]))[-1]["id"]
        async with ws_connect(a) as ws:
            await ws.subscribe(QUEUE, {"afterEventId": after, "filter": {"resourceId": resource}})
            # when instance B starts a refund, then approves it
            refund = await on_b.suspend(REFUND, REFUND_PROMPT, resourceId=resource)
            entered = (await ws.receive())["payload"]["data"]["reviewQueueEvents"]
            outcome = await on_b.approve(REFUND, refund["runId"], refund["toolCalls"][0]["toolCallId"])
            left = (await ws.receive())["payload"]["data"]["reviewQueueEvents"]

    # then A's stream told both
    assert outcome["status"] == "COMPLETED", outcome
    assert entered == {
        "change": "ENTERED",
        "cause": "suspended",
        "runId": refund["runId"],
        "item": {"toolName": "issue_refund"},
    }
    assert left == {"change": "LEFT", "cause": "decision", "runId": refund["runId"], "item": None}
