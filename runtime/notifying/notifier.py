"""Reminders and escalations, each recorded once across instances (issue 45 part 3).

``DeadlineNotifier`` runs on every instance, with two steps. **scan** reads the event log after a
cursor, as the webhook dispatcher does, and for each question that starts to wait (``suspended``)
adds one timer per notice its rules set to ``webhook_deliveries`` (endpoint ``NOTICES``,
insert-if-absent by id, due ``remindAfter`` / ``escalateAfter`` seconds later). **fire** leases the
due timers and records each notice by one conditional write (``RunStore.record_notice``, with its
``reminded`` or ``escalated`` event): a question decided meanwhile, or noticed by another
instance, is left as it is. The webhook dispatcher turns those events into ``call.reminded`` and
``call.escalated``; ``on_event`` lets the email outbox see every event scanned.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from storage import (
    EventDocument,
    NoticeKind,
    SnapshotDocument,
    SnapshotStore,
    WebhookDeliveryDocument,
    pending_delivery,
    utcnow,
)
from storage.protocol import DeliveryLease, EventsAfter, NoticeWrite, WebhookAttempt

from .._cancel import in_rounds
from .._json import rfc3339
from ..access import ToolApprovalRule
from ..deciding.rules import covering, owner
from ..events.journal import Journal, event_id_floor, question_data, stored_run
from .schedule import notices_for

logger = logging.getLogger(__name__)

NOTICES = "runsgate-notices"
"""The endpoint id of the notices' timers in ``webhook_deliveries`` (never a receiver's: those
are 16 hex digits)."""

DEADLINE_BY = "deadline"
"""``by`` of a ``reminded`` or ``escalated`` event."""

EventHook = Callable[[EventDocument, SnapshotDocument | None], Awaitable[None]]


def timer_id(event_id: str, index: int, notice: NoticeKind) -> str:
    """``{eventId}.{index}-{notice}.{NOTICES}``: one timer per question and notice."""
    return f"{event_id}.{index}-{notice}.{NOTICES}"


class DeadlineNotifier:
    """Schedules and records the notices of waiting questions (module docstring).

    Args:
        store: The shared store.
        rules: The tool rules (``RUNSGATE_TOOL_RULES``).
        agent_ids: The registered agents.
        instance_id: This instance's id in timer leases.
        poll_interval: Seconds between two rounds (scan, then fire).
        lookback: Seconds of event ids each scan reads again (``RUNSGATE_SUBSCRIPTION_LOOKBACK``).
        on_event: Called with each ``suspended``, ``reminded`` and ``escalated`` event scanned and
            its run (``None`` when gone), before the cursor moves past it (the email outbox).
        clock: Aware UTC now.
    """

    def __init__(
        self,
        store: SnapshotStore,
        *,
        rules: Sequence[ToolApprovalRule],
        agent_ids: Sequence[str],
        instance_id: str,
        poll_interval: float = 1.0,
        lookback: float = 5.0,
        on_event: EventHook | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        if poll_interval <= 0:
            raise ValueError("poll_interval must be positive (seconds)")
        self._store = store
        self._rules = tuple(rules)
        self._agent_ids = tuple(agent_ids)
        self._instance_id = instance_id
        self._poll_interval = poll_interval
        self._lookback = timedelta(seconds=lookback)
        self._on_event = on_event
        self._now = clock
        self._journal = Journal(store, clock)
        self._lease = timedelta(seconds=60)

    # -- scan ------------------------------------------------------------------------------------
    async def scan_once(self, *, page: int = 200) -> int:
        """Read every agent's new events once and add the timers of the questions that started to
        wait. Returns how many timers were new. Raises ``StoreUnavailableError`` (the cursor stays)."""
        added = 0
        for agent_id in self._agent_ids:
            added += await self._scan(agent_id, page)
        return added

    async def _scan(self, agent_id: str, page: int) -> int:
        cursor_id = f"{NOTICES}:{agent_id}"
        now = self._now()
        horizon = event_id_floor(int((now - self._lookback).timestamp() * 1_000_000) * 1000)
        cursor = await self._store.webhook_cursor(cursor_id)
        if cursor is None:  # a new instance set starts with the events of the last lookback seconds
            cursor = horizon
            await self._store.advance_webhook_cursor(cursor_id, cursor)
        settled, after, added = cursor, cursor, 0
        while True:
            events = await self._store.list_events_after(
                EventsAfter(agent_id=agent_id, after_event_id=after, limit=page)
            )
            if not events:
                break
            added += await self._record(events, now)
            settled = max([settled, *(e["_id"] for e in events if e["_id"] < horizon)])
            after = events[-1]["_id"]
            if len(events) < page:
                break
        if settled > cursor:
            await self._store.advance_webhook_cursor(cursor_id, settled)
        return added

    async def _record(self, events: list[EventDocument], now: datetime) -> int:
        wanted = [e for e in events if e["type"] in ("suspended", "reminded", "escalated")]
        if not wanted:
            return 0
        runs = {doc["_id"]: doc for doc in await self._store.get_many([e["runId"] for e in wanted])}
        timers: list[WebhookDeliveryDocument] = []
        for event in wanted:
            run = runs.get(event["runId"])
            if run is not None and (run["agentId"] != event["agentId"] or run.get("parentRunId") is not None):
                run = None  # another agent's run of that id; or a sub-run, decided on its supervisor's run
            if self._on_event is not None:
                await self._on_event(event, run)
            if event["type"] == "suspended" and run is not None:
                timers += self._timers(event, run, now)
        return await self._store.add_webhook_deliveries(timers) if timers else 0

    def _timers(self, event: EventDocument, run: SnapshotDocument, now: datetime) -> list[WebhookDeliveryDocument]:
        started = set(event["data"].get("toolCallIds") or ())
        timers: list[WebhookDeliveryDocument] = []
        for index, call in enumerate(run["toolCalls"]):
            if call["decision"] is not None or call["toolCallId"] not in started:
                continue
            rules = covering(self._rules, owner(run["agentId"], call))
            for notice, after in notices_for(rules, call["toolName"], call["args"]).after.items():
                body = {"notice": notice, "index": index, "toolCallId": call["toolCallId"]}
                timers.append(
                    pending_delivery(
                        timer_id(event["_id"], index, notice),
                        NOTICES,
                        event,
                        resource_id=run["resourceId"],
                        type=f"notice.{notice}",
                        body=json.dumps({**body, "questionId": call.get("questionId")}),
                        now=now,
                        due=event["at"] + after,
                    )
                )
        return timers

    # -- fire ------------------------------------------------------------------------------------
    async def fire_once(self, *, limit: int = 50) -> int:
        """Lease the due timers, read their runs in one ``get_many``, and record their notices.
        Returns how many notices this call recorded (a timer whose question was decided or already
        noticed records none). Raises ``StoreUnavailableError``; a timer leased but not finished is
        fired again once its lease ends."""
        now = self._now()
        due = await self._store.claim_webhook_deliveries(
            DeliveryLease(by=self._instance_id, until=now + self._lease, now=now, limit=limit, endpoint_id=NOTICES)
        )
        if not due:
            return 0
        runs = {doc["_id"]: doc for doc in await self._store.get_many([timer["runId"] for timer in due])}
        recorded = 0
        for timer in due:
            run = runs.get(timer["runId"])
            if await self._fire(timer, None if run is None or run["agentId"] != timer["agentId"] else run):
                recorded += 1
            await self._store.finish_webhook_attempt(
                WebhookAttempt(
                    delivery_id=timer["_id"],
                    by=self._instance_id,
                    status="delivered",
                    at=self._now(),
                    next_attempt_at=self._now(),
                    status_code=None,
                    error=None,
                )
            )
        return recorded

    async def _fire(self, timer: WebhookDeliveryDocument, run: SnapshotDocument | None) -> bool:
        """Record ``timer``'s notice on ``run`` (its run as read before the fire, ``None`` when
        gone) if the question still waits; the write's condition decides (``NoticeWrite``)."""
        body: dict[str, Any] = json.loads(timer["body"])
        notice: NoticeKind = body["notice"]
        index: int = body["index"]
        if run is None or index >= len(run["toolCalls"]):
            return False
        call = run["toolCalls"][index]
        if call["toolCallId"] != body["toolCallId"] or call.get("questionId") != body["questionId"]:
            return False
        now = self._now()
        data = {**question_data(call), "dueAt": rfc3339(timer["nextAttemptAt"])}
        event = self._journal.new_event(stored_run(run), notice, by=DEADLINE_BY, at=now, data=data)
        written = await self._store.record_notice(
            NoticeWrite(
                agent_id=run["agentId"],
                run_id=run["_id"],
                index=index,
                tool_call_id=call["toolCallId"],
                question_id=body["questionId"],
                notice=notice,
                now=now,
                event=event,
            )
        )
        if written is not None:
            logger.info("run %s call %s: %s", run["_id"], call["toolCallId"], notice)
        return written is not None

    # -- loop ------------------------------------------------------------------------------------
    async def run_forever(self) -> None:
        """Scan, then fire, every ``poll_interval`` seconds until cancelled; store errors are
        logged, not raised."""
        await in_rounds((self.scan_once, self.fire_once), every=self._poll_interval, name="notices", logger=logger)


__all__ = ["DEADLINE_BY", "NOTICES", "DeadlineNotifier", "timer_id"]
