"""Signed webhooks: messages derived from the event log, sent at least once (docs/webhooks.md).

Each instance runs one ``WebhookDispatcher``, with two loops: **scan** turns the events each
endpoint wants into deliveries (insert-if-absent by id) and moves the endpoint's cursor; **send**
leases due deliveries, POSTs each signed (Standard Webhooks) and records the attempt, retrying
with backoff (``RetryPolicy``) until ``retry_for`` seconds. Nothing is written on the decision
path. Details: docs/webhooks.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta

import httpx2

from storage import (
    EventDocument,
    SnapshotStore,
    StoreUnavailableError,
    WebhookDeliveryDocument,
    pending_delivery,
    utcnow,
)
from storage.protocol import DeliveryLease, EventsAfter, WebhookAttempt

from .._cancel import in_rounds
from ..events.journal import event_id_floor
from .http import post_delivery
from .messages import (
    WEBHOOK_EVENT_TYPES,
    AttemptResult,
    DeliveryOutcome,
    RetryPolicy,
    WebhookEndpoint,
    delivery_body,
)

logger = logging.getLogger(__name__)

INTERNAL_ENDPOINTS = ("runsgate-notices", "runsgate-email")
"""Endpoint ids of the records other parts of runsgate keep among the deliveries (the notices'
timers, ``runtime.notifying``; the email outbox): never sent here as "a receiver removed"."""


class WebhookDispatcher:
    """Derives deliveries from the event log and sends them (module docstring).

    Args:
        store: The shared store (event log, runs for the pending calls, webhook deliveries).
        agent_ids: The registered agents; an endpoint without ``agent_ids`` covers them all.
        endpoints: The configured receivers.
        instance_id: This instance's id in delivery leases.
        public_url: Base URL of the inbox links in payloads.
        poll_interval: Seconds between two scans, and between two looks for due deliveries.
        lookback: Seconds of event ids each scan reads again (``RUNSGATE_SUBSCRIPTION_LOOKBACK``).
        retry: The retry schedule.
        connect_timeout: Seconds to open a connection to a receiver.
        read_timeout: Seconds to wait for each part of its answer.
        max_active: Deliveries this instance sends at once, shared among the receivers (``share``).
        on_attempt: Called after each recorded attempt with its ``AttemptResult`` and the
            ``DeliveryOutcome`` (metrics).
        transport: The httpx2 transport (tests); default: real connections.
    """

    def __init__(
        self,
        store: SnapshotStore,
        *,
        agent_ids: Iterable[str],
        endpoints: Sequence[WebhookEndpoint],
        instance_id: str,
        public_url: str,
        poll_interval: float = 1.0,
        lookback: float = 5.0,
        retry: RetryPolicy | None = None,
        connect_timeout: float = 5.0,
        read_timeout: float = 10.0,
        max_active: int = 16,
        on_attempt: Callable[[AttemptResult, DeliveryOutcome], None] | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        if poll_interval <= 0:
            raise ValueError("poll_interval must be positive (seconds)")
        self._store = store
        self._agent_ids = tuple(agent_ids)
        self._endpoints = {endpoint.id: endpoint for endpoint in endpoints}
        self._instance_id = instance_id
        self._public_url = public_url
        self._poll_interval = poll_interval
        self._lookback = timedelta(seconds=lookback)
        self._retry = retry or RetryPolicy()
        self._timeout = httpx2.Timeout(read_timeout, connect=connect_timeout)
        self._lease = timedelta(seconds=2 * (connect_timeout + 2 * read_timeout) + 10)
        self._attempt_limit = connect_timeout + 2 * read_timeout + 5
        self._max_active = max_active
        self._on_attempt = on_attempt
        self._client = httpx2.AsyncClient(
            follow_redirects=False, timeout=self._timeout, transport=transport, trust_env=False
        )
        self._known: dict[str, str] = {}
        """Delivery id -> its event id, for deliveries this instance added after a cursor (not
        rebuilt while the lookback reads their events again); pruned as cursors advance."""
        self._active: dict[str, asyncio.Task[None]] = {}

    def _covered(self, endpoint: WebhookEndpoint) -> list[str]:
        if endpoint.agent_ids is None:
            return list(self._agent_ids)
        return [agent_id for agent_id in self._agent_ids if agent_id in endpoint.agent_ids]

    # -- scan ------------------------------------------------------------------------------------
    async def scan_once(self, *, page: int = 200) -> int:
        """Read every endpoint's new events once and record their deliveries.

        Returns:
            How many deliveries were new.

        Raises:
            StoreUnavailableError: The store did not answer (nothing is lost: the cursor stays).
        """
        added = 0
        for endpoint in self._endpoints.values():
            for agent_id in self._covered(endpoint):
                added += await self._scan(endpoint, agent_id, page)
        return added

    async def _scan(self, endpoint: WebhookEndpoint, agent_id: str, page: int) -> int:
        cursor_id = f"{endpoint.id}:{agent_id}"
        now = utcnow()
        horizon = event_id_floor(int((now - self._lookback).timestamp() * 1_000_000) * 1000)
        cursor = await self._store.webhook_cursor(cursor_id)
        if cursor is None:  # a new endpoint starts with the events of the last lookback seconds
            cursor = horizon
            await self._store.advance_webhook_cursor(cursor_id, cursor)
        settled = cursor
        """The furthest event id read that is older than the horizon: the next cursor."""
        added = 0
        after = cursor
        while True:
            events = await self._store.list_events_after(
                EventsAfter(agent_id=agent_id, after_event_id=after, limit=page)
            )
            if not events:
                break
            added += await self._record(endpoint, events, now)
            for event in events:
                if event["_id"] < horizon:
                    settled = event["_id"]
            after = events[-1]["_id"]
            if len(events) < page:
                break
        if settled > cursor:
            await self._store.advance_webhook_cursor(cursor_id, settled)
            for delivery_id, event_id in list(self._known.items()):
                if event_id <= settled and delivery_id.endswith(f".{endpoint.id}"):
                    del self._known[delivery_id]
        return added

    async def _record(self, endpoint: WebhookEndpoint, events: list[EventDocument], now: datetime) -> int:
        wanted = [
            (event, WEBHOOK_EVENT_TYPES[event["type"]])
            for event in events
            if WEBHOOK_EVENT_TYPES.get(event["type"]) in endpoint.events
            and f"{event['_id']}.{endpoint.id}" not in self._known
        ]
        if not wanted:
            return 0
        runs = {doc["_id"]: doc for doc in await self._store.get_many([event["runId"] for event, _ in wanted])}
        deliveries: list[WebhookDeliveryDocument] = []
        for event, webhook_type in wanted:
            run = runs.get(event["runId"])
            if run is not None and run["agentId"] != event["agentId"]:
                run = None
            body = delivery_body(event, webhook_type, run, self._public_url)
            deliveries.append(
                pending_delivery(
                    f"{event['_id']}.{endpoint.id}",
                    endpoint.id,
                    event,
                    resource_id=event.get("resourceId", run["resourceId"] if run is not None else None),
                    type=webhook_type,
                    body=body,
                    now=now,
                )
            )
        added = await self._store.add_webhook_deliveries(deliveries)
        for delivery in deliveries:
            self._known[delivery["_id"]] = delivery["eventId"]
        return added

    # -- send ------------------------------------------------------------------------------------
    async def deliver_once(self) -> int:
        """Lease the due deliveries (up to the free places of ``max_active``) and send each one,
        waiting for them (tests, tools).

        Returns:
            How many were attempted.

        Raises:
            StoreUnavailableError: The store did not answer.
        """
        tasks = await self._start_due()
        if tasks:
            await asyncio.wait(tasks)
        return len(tasks)

    @property
    def share(self) -> int:
        """Deliveries to one receiver this instance sends at once: ``max_active`` divided among the
        receivers (rounded up), so one that hangs keeps the others' slots free."""
        return max(1, -(-self._max_active // max(len(self._endpoints), 1)))

    async def _start_due(self) -> list[asyncio.Task[None]]:
        now = utcnow()
        sending = Counter(delivery_id.rpartition(".")[2] for delivery_id in self._active)
        due: list[WebhookDeliveryDocument] = []
        for receiver in self._endpoints:  # each receiver up to its share of the free slots
            free = min(self._max_active - len(self._active) - len(due), self.share - sending[receiver])
            if free > 0:
                lease = DeliveryLease(
                    by=self._instance_id, until=now + self._lease, now=now, limit=free, endpoint_id=receiver
                )
                due += await self._store.claim_webhook_deliveries(lease)
        if len(self._active) + len(due) < self._max_active:  # one of a receiver removed from the settings
            lease = DeliveryLease(
                by=self._instance_id,
                until=now + self._lease,
                now=now,
                limit=1,
                other_than=(*self._endpoints, *INTERNAL_ENDPOINTS),
            )
            due += await self._store.claim_webhook_deliveries(lease)
        tasks = []
        for delivery in due:
            task = asyncio.create_task(self._attempt(delivery), name=f"runsgate-webhook-{delivery['_id']}")
            self._active[delivery["_id"]] = task
            task.add_done_callback(functools.partial(self._done, delivery["_id"]))
            tasks.append(task)
        return tasks

    def _done(self, delivery_id: str, _: asyncio.Task[None]) -> None:
        self._active.pop(delivery_id, None)

    async def _attempt(self, delivery: WebhookDeliveryDocument) -> None:
        endpoint = self._endpoints.get(delivery["endpointId"])
        result: AttemptResult
        status_code: int | None
        error: str | None
        if endpoint is None:
            result, status_code, error = "network_error", None, "the endpoint is no longer configured"
        else:
            try:
                result, status_code, error = await post_delivery(
                    self._client, endpoint, delivery, limit=self._attempt_limit
                )
            except asyncio.CancelledError:
                await self._interrupted(delivery)
                raise
        outcome, attempt = self._retry.attempt(
            delivery,
            by=self._instance_id,
            now=utcnow(),
            delivered=result == "delivered",
            give_up=endpoint is None,
            status_code=status_code,
            error=error,
        )
        try:
            recorded = await self._store.finish_webhook_attempt(attempt)
        except StoreUnavailableError as exc:
            logger.warning("webhook delivery %s: its attempt could not be recorded: %s", delivery["_id"], exc)
            return  # the lease expires and the delivery is sent again (at least once)
        if not recorded:
            logger.warning("webhook delivery %s: the lease was lost before the attempt was recorded", delivery["_id"])
            return
        if self._on_attempt is not None:
            self._on_attempt(result, outcome)
        log = logger.info if outcome != "failed" else logger.warning
        log(
            "webhook delivery %s (%s, run %s) attempt %d: %s%s",
            delivery["_id"],
            delivery["type"],
            delivery["runId"],
            delivery["attempts"] + 1,
            outcome,
            "" if error is None else f" ({error})",
        )

    async def _interrupted(self, delivery: WebhookDeliveryDocument) -> None:
        """The instance is stopping in the middle of an attempt: record it as failed and due now,
        releasing the lease, so another instance sends it at once rather than when the lease
        expires (the receiver may have got it: at least once)."""
        now = utcnow()
        with contextlib.suppress(Exception):
            await self._store.finish_webhook_attempt(
                WebhookAttempt(
                    delivery_id=delivery["_id"],
                    by=self._instance_id,
                    status="pending",
                    at=now,
                    next_attempt_at=now,
                    status_code=None,
                    error="interrupted: the sending instance stopped",
                )
            )

    # -- loops -----------------------------------------------------------------------------------
    async def run_forever(self) -> None:
        """Scan and send every ``poll_interval`` seconds until cancelled; store errors are
        logged, not raised. Cancelling also cancels the attempts in flight: their leases expire
        and an instance sends them again."""
        steps = (self.scan_once, self._start_due)  # a failed scan does not hold up the retries
        try:
            await in_rounds(steps, every=self._poll_interval, name="webhooks", logger=logger)
        finally:
            for task in list(self._active.values()):
                task.cancel()
            if self._active:
                await asyncio.wait(list(self._active.values()))

    async def close(self) -> None:
        """Close the HTTP client (after ``run_forever`` was cancelled)."""
        with contextlib.suppress(Exception):
            await self._client.aclose()


__all__ = ["INTERNAL_ENDPOINTS", "WebhookDispatcher"]
