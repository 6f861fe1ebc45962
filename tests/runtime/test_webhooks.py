"""The webhook dispatcher in one process (``runtime/webhooks/dispatcher.py``), against a real loopback
receiver that verifies each request with the ``standardwebhooks`` package: what is sent, how it
is signed, that the lookback finds an event that became visible late, that a redirect is a
failure and never followed, and the retry schedule."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest

from runtime import WEBHOOK_EVENTS, RetryPolicy, RunManager, WebhookDispatcher, WebhookEndpoint
from runtime.events.journal import event_id
from storage import EventDocument, MemorySnapshotStore, utcnow
from storage.protocol import DeliveryListing
from tests._receiver import HANG, always, fail_first, new_secret, receiving

AGENT = "refund-agent"


def _dispatcher(
    store: MemorySnapshotStore, url: str, secret: str, events: set[str] | None = None, **options: object
) -> WebhookDispatcher:
    endpoint = WebhookEndpoint(
        url=url,
        secret=secret,
        events=frozenset(events or {"run.suspended", "run.decided", "run.completed", "run.failed"}),
    )
    return WebhookDispatcher(
        store,
        agent_ids=[AGENT, "weather-agent"],
        endpoints=[endpoint],
        instance_id="instance-a",
        public_url="https://runs.example.com/",
        lookback=5.0,
        **options,  # type: ignore[arg-type]
    )


async def test_a_suspension_is_sent_signed_with_the_pending_calls_and_the_inbox_link(
    manager: RunManager, memory_store: MemorySnapshotStore
) -> None:
    secret = new_secret()
    with receiving(secret) as receiver:
        dispatcher = _dispatcher(memory_store, receiver.url, secret)
        await dispatcher.scan_once()  # a new endpoint starts at the lookback horizon
        started = await manager.start_run(AGENT, "Please refund order 1042", thread_id="t-1", resource_id="tenant-a")

        assert await dispatcher.scan_once() == 1
        assert await dispatcher.deliver_once() == 1
        await dispatcher.close()

    [got] = receiver.received
    assert got.verified
    payload = got.payload
    assert payload["type"] == "run.suspended"
    data = payload["data"]
    assert (data["agentId"], data["runId"], data["threadId"], data["resourceId"]) == (
        AGENT,
        started.run_id,
        "t-1",
        "tenant-a",
    )
    assert data["event"]["type"] == "suspended"
    [call] = data["pendingCalls"]
    assert call["toolName"] == "issue_refund"
    assert call["args"] == {"order_id": 1042, "amount": 49.9}
    assert call["requiresApproval"] is True
    assert data["inboxUrl"] == f"https://runs.example.com/inbox?agentId={AGENT}&runId={started.run_id}"
    assert (
        got.webhook_id == f"{data['eventId']}.{WebhookEndpoint(url=receiver.url, secret=secret, events=frozenset()).id}"
    )
    [stored] = await memory_store.list_webhook_deliveries(DeliveryListing(status=None, resource_ids=None, limit=5))
    assert (stored["status"], stored["attempts"], stored["lastStatusCode"]) == ("delivered", 1, 200)


async def test_each_event_the_endpoint_wants_is_sent_once_and_others_never(
    manager: RunManager, memory_store: MemorySnapshotStore
) -> None:
    secret = new_secret()
    with receiving(secret) as receiver:
        dispatcher = _dispatcher(memory_store, receiver.url, secret, events={"run.decided", "run.completed"})
        await dispatcher.scan_once()
        started = await manager.start_run(AGENT, "Please refund order 1043", resource_id="tenant-a")
        assert started.run is not None
        await manager.approve(AGENT, started.run_id, started.run["toolCalls"][0]["toolCallId"], principal="alice")

        for _ in range(3):  # the lookback reads the same events again: added once
            await dispatcher.scan_once()
            await dispatcher.deliver_once()
        await dispatcher.close()

    assert sorted(r.payload["type"] for r in receiver.received) == ["run.completed", "run.decided"]
    assert all(r.verified for r in receiver.received)
    decided = next(r.payload for r in receiver.received if r.payload["type"] == "run.decided")
    assert decided["data"]["event"]["by"] == "alice"


async def test_an_event_visible_late_within_the_lookback_is_still_sent(memory_store: MemorySnapshotStore) -> None:
    secret = new_secret()
    with receiving(secret) as receiver:
        dispatcher = _dispatcher(memory_store, receiver.url, secret)
        await dispatcher.scan_once()
        late_id = event_id()  # made now, written after a later event was read
        await memory_store.append_event(_event(event_id(), "run-2"))
        await dispatcher.scan_once()
        await memory_store.append_event(_event(late_id, "run-1"))

        await dispatcher.scan_once()
        await dispatcher.deliver_once()
        await dispatcher.close()

    assert sorted(r.payload["data"]["runId"] for r in receiver.received) == ["run-1", "run-2"]
    assert sorted(receiver.ids().values()) == [1, 1]


async def test_a_redirect_is_a_failure_and_is_not_followed(memory_store: MemorySnapshotStore) -> None:
    secret = new_secret()
    with receiving(secret, always(307)) as receiver:
        dispatcher = _dispatcher(memory_store, receiver.url, secret, retry=RetryPolicy(retry_for=60, initial_delay=30))
        await dispatcher.scan_once()
        await memory_store.append_event(_event(event_id(), "run-1"))
        await dispatcher.scan_once()
        await dispatcher.deliver_once()
        await dispatcher.close()

    assert len(receiver.received) == 1  # the Location (port 9) was never asked
    [stored] = await memory_store.list_webhook_deliveries(DeliveryListing(status="pending", resource_ids=None, limit=5))
    assert stored["lastStatusCode"] == 307
    assert stored["lastError"] is not None
    assert "redirect" in stored["lastError"]
    assert stored["nextAttemptAt"] >= utcnow() + timedelta(seconds=10)


async def test_retries_keep_the_id_and_give_up_after_the_retry_time(memory_store: MemorySnapshotStore) -> None:
    secret = new_secret()
    with receiving(secret, fail_first(100)) as receiver:
        dispatcher = _dispatcher(
            memory_store, receiver.url, secret, retry=RetryPolicy(retry_for=1.0, initial_delay=0.1, max_delay=0.2)
        )
        await dispatcher.scan_once()
        await memory_store.append_event(_event(event_id(), "run-1"))
        await dispatcher.scan_once()
        for _ in range(40):
            await dispatcher.deliver_once()
            if await memory_store.list_webhook_deliveries(DeliveryListing(status="failed", resource_ids=None, limit=1)):
                break
            await asyncio.sleep(0.05)
        await dispatcher.close()

    [failed] = await memory_store.list_webhook_deliveries(DeliveryListing(status="failed", resource_ids=None, limit=5))
    assert failed["attempts"] == len(receiver.received) >= 3
    assert len(receiver.ids()) == 1
    assert all(r.verified for r in receiver.received)
    assert failed["finishedAt"] is not None
    assert failed["finishedAt"] >= failed["createdAt"] + timedelta(seconds=1)


async def test_log_event_types_map_to_webhook_types_and_the_secret_is_never_logged(
    memory_store: MemorySnapshotStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = new_secret()
    with receiving(secret, fail_first(1)) as receiver:
        dispatcher = _dispatcher(
            memory_store,
            receiver.url,
            secret,
            events=set(WEBHOOK_EVENTS),
            retry=RetryPolicy(retry_for=30, initial_delay=0.05, max_delay=0.05),
        )
        await dispatcher.scan_once()
        for log_type in ("started", "suspended", "decision", "approval", "expired", "resumed", "completed", "failed"):
            await memory_store.append_event({**_event(event_id(), f"run-{log_type}"), "type": log_type})  # type: ignore[typeddict-item]
        await dispatcher.scan_once()
        for _ in range(3):
            await dispatcher.deliver_once()
            await asyncio.sleep(0.1)
        await dispatcher.close()

    sent = {r.payload["data"]["runId"]: r.payload["type"] for r in receiver.received}
    assert sent == {
        "run-suspended": "run.suspended",
        "run-decision": "run.decided",
        "run-expired": "call.expired",
        "run-completed": "run.completed",
        "run-failed": "run.failed",
    }
    assert "answered 500" in caplog.text  # the failed first attempts were logged
    assert secret.removeprefix("whsec_") not in caplog.text


async def test_an_attempt_interrupted_by_a_shutdown_releases_its_lease_and_is_due_at_once(
    memory_store: MemorySnapshotStore,
) -> None:
    secret = new_secret()
    with receiving(secret, always(HANG)) as receiver:
        dispatcher = _dispatcher(memory_store, receiver.url, secret, poll_interval=0.05)
        await dispatcher.scan_once()
        await memory_store.append_event(_event(event_id(), "run-1"))
        running = asyncio.create_task(dispatcher.run_forever())
        # the attempt is in flight, unanswered
        await asyncio.to_thread(receiver.wait_for, lambda r: len(r.received) == 1, 10)

        running.cancel()  # as the server's lifespan does when it stops
        with pytest.raises(asyncio.CancelledError):
            await running
        await dispatcher.close()

    [stored] = await memory_store.list_webhook_deliveries(DeliveryListing(status="pending", resource_ids=None, limit=5))
    assert stored["lease"] is None
    assert stored["attempts"] == 1
    assert stored["lastError"] == "interrupted: the sending instance stopped"
    assert stored["nextAttemptAt"] <= utcnow()


async def test_a_receiver_that_hangs_takes_at_most_its_share_of_the_sending_slots(
    memory_store: MemorySnapshotStore,
) -> None:
    # given a hanging receiver with six deliveries due before one of another receiver's
    secret = new_secret()
    with receiving(secret, always(HANG)) as stuck, receiving(secret) as healthy:
        endpoints = [
            WebhookEndpoint(url=stuck.url, secret=secret, events=WEBHOOK_EVENTS, agent_ids=frozenset({AGENT})),
            WebhookEndpoint(
                url=healthy.url, secret=secret, events=WEBHOOK_EVENTS, agent_ids=frozenset({"weather-agent"})
            ),
        ]
        dispatcher = WebhookDispatcher(
            memory_store,
            agent_ids=[AGENT, "weather-agent"],
            endpoints=endpoints,
            instance_id="instance-a",
            public_url="https://runs.example.com/",
            poll_interval=0.05,
            read_timeout=30.0,
            max_active=4,
        )
        await dispatcher.scan_once()
        for number in range(6):
            await memory_store.append_event(_event(event_id(), f"run-{number}"))
        await memory_store.append_event(_event(event_id(), "weather-run", agent_id="weather-agent"))
        await dispatcher.scan_once()

        # when the dispatcher sends what is due
        running = asyncio.create_task(dispatcher.run_forever())
        try:
            # then the other receiver is not kept waiting behind the one that hangs
            await asyncio.to_thread(healthy.wait_for, lambda r: len(r.received) == 1, 10)
            assert len(stuck.received) <= 2  # its share of the four slots
        finally:
            running.cancel()
            with pytest.raises(asyncio.CancelledError):
                await running
            await dispatcher.close()


@pytest.mark.parametrize("attempts", [1, 2, 3, 10, 30])
def test_the_backoff_doubles_with_equal_jitter_up_to_the_cap(attempts: int) -> None:
    policy = RetryPolicy(initial_delay=5, max_delay=3600)
    base = min(3600, 5 * 2 ** (attempts - 1))

    assert policy.delay(attempts, rand=lambda: 0.0) == base / 2
    assert policy.delay(attempts, rand=lambda: 1.0) == base


def _event(event_id_: str, run_id: str, agent_id: str = AGENT) -> EventDocument:
    return {
        "_id": event_id_,
        "runId": run_id,
        "agentId": agent_id,
        "threadId": None,
        "resourceId": "tenant-a",
        "type": "suspended",
        "at": utcnow(),
        "by": "system",
        "data": {},
    }
