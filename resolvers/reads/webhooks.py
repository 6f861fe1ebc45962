"""``webhookDeliveries``: the webhook messages runsgate sent or is sending (docs/webhooks.md).

Needs the scope ``webhooks:read`` (``CanReadWebhooks``); a principal limited to some resources
sees only deliveries about runs of those resources (inside the store query, so pages stay full).
Relay cursor paging forward (``first``/``after``) over one order: newest event first.
"""

from __future__ import annotations

import base64
import binascii
import enum
import re
from datetime import datetime
from urllib.parse import urlsplit

import strawberry

from storage import WebhookDeliveryDocument
from storage.protocol import DeliveryListing

from ..context import Info
from ..errors import QueryArgumentError
from ..types import PageInfo

INTERNAL_LABELS = {"runsgate-notices": "(deadline notices)", "runsgate-email": "(email)"}
"""``endpoint`` of the records runsgate keeps among the deliveries: the timers of reminders and
escalations (``runtime.notifying``) and the email outbox."""


@strawberry.enum(description="Where a webhook delivery stands.")
class WebhookDeliveryStatus(enum.Enum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


@strawberry.type(description="One webhook message for one receiver, about one event of a run.")
class WebhookDelivery:
    id: strawberry.ID = strawberry.field(
        description="The `webhook-id` header: the same on every attempt, for receivers to dedupe by."
    )
    event_type: str = strawberry.field(
        description="run.suspended, run.decided, call.expired, run.completed or run.failed."
    )
    event_id: strawberry.ID = strawberry.field(description="The audit-log event it reports (`RunEvent.id`).")
    agent_id: strawberry.ID
    run_id: strawberry.ID
    resource_id: str | None
    endpoint: str = strawberry.field(
        description="The receiver's scheme, host and port, then `/…` when its URL has a path or query string "
        "(they may carry its token, and are not shown)."
    )
    status: WebhookDeliveryStatus
    attempts: int = strawberry.field(description="Attempts made so far.")
    created_at: datetime = strawberry.field(description="UTC; when the delivery was recorded.")
    next_attempt_at: datetime | None = strawberry.field(description="UTC; the next attempt (pending only).")
    last_attempt_at: datetime | None = strawberry.field(description="UTC.")
    last_status_code: int | None = strawberry.field(description="HTTP status of the last answer, if any.")
    last_error: str | None = strawberry.field(description="Why the last attempt failed.")
    finished_at: datetime | None = strawberry.field(description="UTC; when it was delivered or given up.")

    @classmethod
    def from_document(cls, doc: WebhookDeliveryDocument, urls: dict[str, str]) -> WebhookDelivery:
        status = WebhookDeliveryStatus(doc["status"])
        return cls(
            id=strawberry.ID(doc["_id"]),
            event_type=doc["type"],
            event_id=strawberry.ID(doc["eventId"]),
            agent_id=strawberry.ID(doc["agentId"]),
            run_id=strawberry.ID(doc["runId"]),
            resource_id=doc["resourceId"],
            endpoint=urls.get(doc["endpointId"], f"(removed endpoint {doc['endpointId']})"),
            status=status,
            attempts=doc["attempts"],
            created_at=doc["createdAt"],
            next_attempt_at=doc["nextAttemptAt"] if status is WebhookDeliveryStatus.PENDING else None,
            last_attempt_at=doc["lastAttemptAt"],
            last_status_code=doc["lastStatusCode"],
            last_error=doc["lastError"],
            finished_at=doc["finishedAt"],
        )


@strawberry.type(description="A webhook delivery and its opaque cursor.")
class WebhookDeliveryEdge:
    cursor: str
    node: WebhookDelivery


@strawberry.type(description="A page of webhook deliveries, newest event first.")
class WebhookDeliveryConnection:
    edges: list[WebhookDeliveryEdge]
    page_info: PageInfo

    @strawberry.field(description="The deliveries of this page (same as `edges.node`).")
    def nodes(self) -> list[WebhookDelivery]:
        return [edge.node for edge in self.edges]


def _encode(delivery_id: str) -> str:
    return base64.urlsafe_b64encode(delivery_id.encode()).decode().rstrip("=")


_DELIVERY_ID = re.compile(r"[0-9]+-[0-9a-f]+\.[0-9a-f]+")
"""``{eventId}.{endpointId}``: what a cursor decodes to."""


def _decode(cursor: str) -> str:
    try:
        delivery_id = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True).decode()
    except (binascii.Error, ValueError, UnicodeDecodeError):
        delivery_id = ""
    if not _DELIVERY_ID.fullmatch(delivery_id):
        raise QueryArgumentError("`after` is not a valid cursor; use a cursor returned by this API", argument="after")
    return delivery_id


def public_endpoint(url: str) -> str:
    """``url`` as principals with ``webhooks:read`` see it: its scheme, host and port, then ``/…``
    when it has a path or a query string, which may carry the receiver's token (a Slack or
    Discord webhook's path is one); never user information."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    port = f":{parts.port}" if parts.port is not None else ""
    rest = "/…" if parts.path.strip("/") or parts.query else ""
    return f"{parts.scheme}://{host}{port}{rest}"


async def webhook_deliveries_connection(
    info: Info, *, first: int | None, after: str | None, status: WebhookDeliveryStatus | None
) -> WebhookDeliveryConnection:
    """One page of deliveries the principal may see (module docstring).

    Raises:
        QueryArgumentError: ``first`` outside ``0..max`` or a cursor not made here (``BAD_USER_INPUT``).
    """
    context = info.context
    limit = context.limits.page_size(first)
    docs = await context.store.list_webhook_deliveries(
        DeliveryListing(
            status=None if status is None else status.value,
            resource_ids=context.principal.resources,
            limit=limit + 1,
            after=None if after is None else _decode(after),
        )
    )
    more = len(docs) > limit
    docs = docs[:limit]
    urls = {endpoint_id: public_endpoint(url) for endpoint_id, url in context.webhook_endpoints.items()}
    urls.update(INTERNAL_LABELS)
    edges = [WebhookDeliveryEdge(cursor=_encode(d["_id"]), node=WebhookDelivery.from_document(d, urls)) for d in docs]
    return WebhookDeliveryConnection(
        edges=edges,
        page_info=PageInfo.forward(
            edges[0].cursor if edges else None, edges[-1].cursor if edges else None, more=more, after=after
        ),
    )


__all__ = [
    "WebhookDelivery",
    "WebhookDeliveryConnection",
    "WebhookDeliveryEdge",
    "WebhookDeliveryStatus",
    "webhook_deliveries_connection",
]
