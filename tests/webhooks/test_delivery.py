"""Webhooks end to end (docs/webhooks.md): real ``runsgate serve`` processes on a SQLite file,
real loopback receivers verifying every request with the ``standardwebhooks`` package.

- each event arrives once per receiver across a crash and restart between suspension and delivery;
- a receiver answering 500 twice then 200 gets the event three times, same id, freshly signed;
- a receiver that never answers is given up on after ``RUNSGATE_WEBHOOK_RETRY_FOR``;
- two instances on one store (a SQLite file, a MongoDB database) deliver each event once.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests._graphql import REFUND, REFUND_PROMPT, GraphQLClient, data
from tests._receiver import HANG, always, fail_first, new_secret, receiving
from tests._servers import runsgate_servers, shared_store_env

from ._setup import ALL_EVENTS, DELIVERIES, metric, wait_until, webhooks_env


def _sqlite(tmp_path: Path) -> dict[str, str]:
    return {"RUNSGATE_STORE": f"sqlite:///{tmp_path / 'runsgate.db'}"}


async def test_each_event_arrives_once_per_receiver_across_a_crash_between_suspension_and_delivery(
    tmp_path: Path,
) -> None:
    with receiving(new_secret()) as first, receiving(new_secret()) as second:
        hooks = ((first, ALL_EVENTS), (second, ["run.suspended", "run.completed"]))
        # given an instance that reads the log only at its start, then crashes after a suspension
        idle = webhooks_env(*hooks, RUNSGATE_WEBHOOK_POLL_INTERVAL="3600", **_sqlite(tmp_path))
        with runsgate_servers([tmp_path / "a.log"], **idle) as [server]:
            await asyncio.sleep(1.0)  # its first scan stored the cursors
            async with GraphQLClient.at(server.url) as client:
                run = await client.suspend(REFUND, REFUND_PROMPT, resourceId="tenant-a")
            server.process.kill()
            server.process.wait()
        assert first.received == []
        assert second.received == []

        # when another instance starts on the same file, and the run is approved there
        with runsgate_servers([tmp_path / "b.log"], **webhooks_env(*hooks, **_sqlite(tmp_path))) as [server]:
            first.wait_for(lambda r: len(r.ids()) == 1)
            second.wait_for(lambda r: len(r.ids()) == 1)
            async with GraphQLClient.at(server.url) as client:
                outcome = await client.approve(REFUND, run["runId"], run["toolCalls"][0]["toolCallId"])
            assert outcome["status"] == "COMPLETED", outcome
            first.wait_for(lambda r: len(r.ids()) == 3)
            second.wait_for(lambda r: len(r.ids()) == 2)
            await asyncio.sleep(2.5)  # more than the lookback: nothing is sent again

    # then each receiver got each event it asked for exactly once, verified
    for receiver, types in (
        (first, ["run.completed", "run.decided", "run.suspended"]),
        (second, ["run.completed", "run.suspended"]),
    ):
        assert all(r.verified for r in receiver.received)
        assert set(receiver.ids().values()) == {1}
        assert all(r.payload["data"]["runId"] == run["runId"] for r in receiver.received)
        assert sorted(r.payload["type"] for r in receiver.received) == types
    [suspended] = first.of_type("run.suspended")
    data_ = suspended.payload["data"]
    assert [c["toolCallId"] for c in data_["pendingCalls"]] == [run["toolCalls"][0]["toolCallId"]]
    assert data_["inboxUrl"] == f"https://runs.example.com/inbox?agentId={REFUND}&runId={run['runId']}"
    assert data_["resourceId"] == "tenant-a"


async def test_a_receiver_failing_twice_gets_the_event_three_times_with_one_id_signed_afresh(tmp_path: Path) -> None:
    with receiving(new_secret(), fail_first(2)) as receiver:
        env = webhooks_env((receiver, ["run.suspended"]), RUNSGATE_WEBHOOK_BACKOFF="1.2", **_sqlite(tmp_path))
        with runsgate_servers([tmp_path / "a.log"], **env) as [server]:
            async with GraphQLClient.at(server.url) as client:
                run = await client.suspend(REFUND, REFUND_PROMPT)
            receiver.wait_for(lambda r: len(r.received) == 3)

            deliveries = wait_until(
                lambda: data(server.url, None, DELIVERIES, status="DELIVERED")["webhookDeliveries"]["edges"],
                what="the delivery recorded as delivered",
            )
            delivered_total = metric(server.url, "runsgate_webhook_deliveries_total", 'outcome="delivered"')
            retrying_total = metric(server.url, "runsgate_webhook_deliveries_total", 'outcome="retrying"')
            http_errors = metric(server.url, "runsgate_webhook_attempts_total", 'result="http_error"')
            await asyncio.sleep(1.5)
        assert len(receiver.received) == 3

    one, two, three = receiver.received
    assert [r.answered for r in receiver.received] == [500, 500, 200]
    assert one.webhook_id == two.webhook_id == three.webhook_id
    assert all(r.verified for r in receiver.received)
    for attempt in receiver.received:  # each signed when sent, not when first recorded
        assert abs(attempt.received_at - attempt.timestamp) < 2
    assert three.timestamp > one.timestamp
    assert three.signature != one.signature
    assert one.body == two.body == three.body
    [edge] = deliveries
    node = edge["node"]
    assert node["id"] == one.webhook_id
    assert (node["runId"], node["eventType"], node["status"]) == (run["runId"], "run.suspended", "DELIVERED")
    assert (node["attempts"], node["lastStatusCode"], node["lastError"]) == (3, 200, None)
    shown = urlsplit(receiver.url)
    assert node["endpoint"] == f"{shown.scheme}://{shown.netloc}/…"  # its path may carry a token (SECURITY.md)
    assert (delivered_total, retrying_total, http_errors) == (1, 2, 2)


async def test_a_receiver_that_never_answers_is_given_up_after_the_retry_time(tmp_path: Path) -> None:
    with receiving(new_secret(), always(HANG)) as receiver:
        env = webhooks_env(
            (receiver, ["run.suspended"]),
            RUNSGATE_WEBHOOK_READ_TIMEOUT="0.5",
            RUNSGATE_WEBHOOK_RETRY_FOR="3",
            **_sqlite(tmp_path),
        )
        with runsgate_servers([tmp_path / "a.log"], **env) as [server]:
            async with GraphQLClient.at(server.url) as client:
                await client.suspend(REFUND, REFUND_PROMPT)
            [edge] = wait_until(
                lambda: data(server.url, None, DELIVERIES, status="FAILED")["webhookDeliveries"]["edges"],
                timeout=30,
                what="the delivery given up",
            )
            failed_total = metric(server.url, "runsgate_webhook_deliveries_total", 'outcome="failed"')
            timeouts = metric(server.url, "runsgate_webhook_attempts_total", 'result="timeout"')
            arrived = len(receiver.received)
            await asyncio.sleep(1.5)
            assert len(receiver.received) == arrived  # nothing more after it failed

    node = edge["node"]
    assert node["status"] == "FAILED"
    assert node["attempts"] == arrived >= 2
    assert node["lastStatusCode"] is None
    assert "no answer" in node["lastError"]
    assert node["nextAttemptAt"] is None
    created = datetime.fromisoformat(node["createdAt"])
    finished = datetime.fromisoformat(node["finishedAt"])
    assert 3 <= (finished - created).total_seconds() < 3 + 0.5 + 1 + 3  # the last attempt: its timeout, a poll
    assert failed_total == 1
    assert timeouts == arrived


async def test_two_instances_on_one_store_deliver_each_event_once(
    request: pytest.FixtureRequest, shared_store_kind: str, tmp_path: Path
) -> None:
    """On one SQLite file, then on one MongoDB database (FerretDB)."""
    with receiving(new_secret()) as receiver:
        env = webhooks_env((receiver, ALL_EVENTS), **shared_store_env(request, shared_store_kind, tmp_path))
        with runsgate_servers([tmp_path / "a.log", tmp_path / "b.log"], **env) as servers:
            runs = []
            for n in range(6):
                async with GraphQLClient.at(servers[n % 2].url) as client:
                    runs.append(await client.suspend(REFUND, REFUND_PROMPT, threadId=f"t-{n}"))
            for n, run in enumerate(runs):
                async with GraphQLClient.at(servers[(n + 1) % 2].url) as client:
                    await client.approve(REFUND, run["runId"], run["toolCalls"][0]["toolCallId"])
            receiver.wait_for(lambda r: len(r.ids()) == 18, timeout=60)
            await asyncio.sleep(2.5)  # more than the lookback and several scans of both instances

    assert set(receiver.ids().values()) == {1}
    assert len(receiver.received) == 18
    assert all(r.verified for r in receiver.received)
    by_run = {run["runId"]: [] for run in runs}
    for r in receiver.received:
        by_run[r.payload["data"]["runId"]].append(r.payload["type"])
    assert all(sorted(types) == ["run.completed", "run.decided", "run.suspended"] for types in by_run.values())
