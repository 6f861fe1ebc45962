"""What a webhook is: its receivers, its retry schedule and its message (docs/webhooks.md).

The parts of ``runtime.webhooks.dispatcher`` that hold no state: the event types, a receiver
(``WebhookEndpoint``), the retry schedule (``RetryPolicy``) and the payload of a delivery
(``payload``); the dispatcher and the server import them from here.
"""

from __future__ import annotations

import functools
import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from urllib.parse import urlencode

from standardwebhooks import Webhook

from storage import EventDocument, SnapshotDocument, WebhookDeliveryDocument, WebhookDeliveryStatus, strict_json
from storage.protocol import WebhookAttempt

WEBHOOK_EVENT_TYPES: dict[str, str] = {
    "suspended": "run.suspended",
    "decision": "run.decided",
    "expired": "call.expired",
    "reminded": "call.reminded",
    "escalated": "call.escalated",
    "reviewClaimed": "call.review_claimed",
    "reviewReleased": "call.review_released",
    "completed": "run.completed",
    "failed": "run.failed",
}
"""Audit-log event type -> webhook event type; other log events (``started``, ``resumed``,
``takeover`` ...) send nothing."""

WEBHOOK_EVENTS = frozenset(WEBHOOK_EVENT_TYPES.values())
"""The event types an endpoint may ask for."""

AttemptResult = Literal["delivered", "http_error", "redirect", "timeout", "network_error"]
"""How one attempt ended (the ``result`` label of ``runsgate_webhook_attempts``)."""

DeliveryOutcome = Literal["delivered", "retrying", "failed"]
"""What became of the delivery after an attempt (the ``outcome`` label of ``runsgate_webhook_deliveries``)."""


def endpoint_id(url: str) -> str:
    """The stable id of an endpoint: the first 16 hex digits of the SHA-256 of its URL."""
    return hashlib.sha256(url.encode()).hexdigest()[:16]


@dataclass(frozen=True, kw_only=True)
class WebhookEndpoint:
    """One receiver of ``RUNSGATE_WEBHOOKS``.

    Attributes:
        url: Where deliveries are POSTed (http or https).
        secret: ``whsec_`` + base64 of the signing key (checked at start; never logged).
        events: Webhook event types it receives (``WEBHOOK_EVENTS``).
        agent_ids: Only events of these agents; ``None`` for every registered agent.
    """

    url: str
    secret: str = field(repr=False)
    events: frozenset[str]
    agent_ids: frozenset[str] | None = None

    @property
    def id(self) -> str:
        """``endpoint_id(url)``."""
        return endpoint_id(self.url)

    @functools.cached_property
    def signer(self) -> Webhook:
        """The Standard Webhooks signer of ``secret``."""
        return Webhook(self.secret)


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """When failed attempts are retried (docs/webhooks.md "Retries").

    Attributes:
        retry_for: Seconds after a delivery was recorded during which it is retried; an attempt
            that fails after that marks it ``failed``. The last retry is scheduled at that moment.
        initial_delay: Seconds before the first retry (before jitter).
        max_delay: Cap on the delay between two attempts, seconds (before jitter).
    """

    retry_for: float = 86_400.0
    initial_delay: float = 5.0
    max_delay: float = 3_600.0

    def delay(self, attempts: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait after the ``attempts``-th failed attempt: ``d = min(max_delay,
        initial_delay * 2 ** (attempts - 1))``, then ``d / 2 + rand() * d / 2`` (equal jitter)."""
        base = min(self.max_delay, self.initial_delay * 2.0 ** max(attempts - 1, 0))
        return float(base / 2 + rand() * base / 2)

    def after_attempt(
        self, created_at: datetime, attempts: int, now: datetime, *, delivered: bool, give_up: bool = False
    ) -> tuple[DeliveryOutcome, datetime]:
        """What follows the attempt made ``now`` of a delivery created at ``created_at`` that had
        ``attempts`` before it: ``delivered``; ``failed`` when ``give_up`` or ``retry_for`` has
        passed; else ``retrying`` after ``delay``, at the latest at the end of ``retry_for``. UTC."""
        deadline = created_at + timedelta(seconds=self.retry_for)
        if delivered:
            return "delivered", now
        if give_up or now >= deadline:
            return "failed", now
        return "retrying", min(now + timedelta(seconds=self.delay(attempts + 1)), deadline)

    def attempt(
        self,
        delivery: WebhookDeliveryDocument,
        *,
        by: str,
        now: datetime,
        delivered: bool,
        give_up: bool = False,
        status_code: int | None = None,
        error: str | None = None,
    ) -> tuple[DeliveryOutcome, WebhookAttempt]:
        """The attempt made ``now`` (UTC) by ``by``, the lease holder, of ``delivery``: what
        follows it (``after_attempt``) and the write recording it (``finish_webhook_attempt``),
        whose status is ``pending`` again while ``retrying``."""
        outcome, next_at = self.after_attempt(
            delivery["createdAt"], delivery["attempts"], now, delivered=delivered, give_up=give_up
        )
        status: WebhookDeliveryStatus = "pending" if outcome == "retrying" else outcome
        return outcome, WebhookAttempt(
            delivery_id=delivery["_id"],
            by=by,
            status=status,
            at=now,
            next_attempt_at=next_at,
            status_code=status_code,
            error=error,
        )


def inbox_url(public_url: str, agent_id: str, run_id: str) -> str:
    """``{public_url}/inbox?agentId=...&runId=...``: the run in the reviewer inbox."""
    return f"{public_url.rstrip('/')}/inbox?{urlencode({'agentId': agent_id, 'runId': run_id})}"


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return _iso(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def pending_calls(doc: SnapshotDocument | None) -> list[dict[str, Any]]:
    """The run's undecided calls, with the fields ``suspendedRun { toolCalls }`` lists."""
    if doc is None:
        return []
    return [
        {
            "toolCallId": call["toolCallId"],
            "toolName": call["toolName"],
            "args": call["args"],
            "requiresApproval": call["requiresApproval"],
            "suspendPayload": call["suspendPayload"],
            "resumeSchema": call["resumeSchema"],
            "questionId": call.get("questionId", call["toolCallId"]),
            "approvalMetadata": call.get("approvalMetadata"),
        }
        for call in doc["toolCalls"]
        if call["decision"] is None
    ]


def payload(event: EventDocument, webhook_type: str, run: SnapshotDocument | None, public_url: str) -> dict[str, Any]:
    """The JSON body of a delivery: ``{type, timestamp, data}`` as the Standard Webhooks
    specification recommends (docs/webhooks.md "Payload")."""
    thread_id = event.get("threadId", run["threadId"] if run is not None else None)
    resource_id = event.get("resourceId", run["resourceId"] if run is not None else None)
    return {
        "type": webhook_type,
        "timestamp": _iso(event["at"]),
        "data": {
            "eventId": event["_id"],
            "agentId": event["agentId"],
            "runId": event["runId"],
            "threadId": thread_id,
            "resourceId": resource_id,
            "event": {"type": event["type"], "at": _iso(event["at"]), "by": event["by"], "data": event["data"]},
            "pendingCalls": pending_calls(run),
            "inboxUrl": inbox_url(public_url, event["agentId"], event["runId"]),
        },
    }


def delivery_body(event: EventDocument, webhook_type: str, run: SnapshotDocument | None, public_url: str) -> str:
    """``payload`` as the JSON text every attempt of the delivery sends: RFC 8259 JSON, a float
    that is not finite (only a document an older runsgate stored holds one) written ``null``."""
    return strict_json.dumps_shown(payload(event, webhook_type, run, public_url), default=_json_default)


__all__ = [
    "WEBHOOK_EVENTS",
    "WEBHOOK_EVENT_TYPES",
    "AttemptResult",
    "DeliveryOutcome",
    "RetryPolicy",
    "WebhookEndpoint",
    "delivery_body",
    "endpoint_id",
    "inbox_url",
    "payload",
    "pending_calls",
]
