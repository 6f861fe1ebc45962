"""``reviewQueue``: the pending questions the caller may decide, across every agent, due first
(``runtime.reviewing.queue``; docs/api.md "The reviewers' queue"). Cursors are opaque (base64url
of a question's queue position), so pages are keyset walks."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
from collections.abc import Awaitable, Callable
from datetime import datetime

import strawberry

from runtime import AgentNotFoundError, AgentRegistry
from runtime.reviewing.queue import QueueItem, QueuePosition, QueueQuery
from storage import QueueKey

from ..context import Info
from ..errors import QueryArgumentError
from ..scalars import parse_datetime, serialize_datetime
from ..types import PageInfo, ReviewClaim, SuspendedRun, SuspendedToolCall, ToolSchemas
from .pagination import with_total

MAX_FILTER_ITEMS = 100
"""Most ``agentIds`` or ``toolNames`` a filter names."""


@strawberry.input(description="Which questions the reviewers' queue lists (every filter given must hold).")
class ReviewQueueFilter:
    agent_ids: list[strawberry.ID] | None = strawberry.field(
        default=None, description="Only these agents' runs (not empty)."
    )
    tool_names: list[str] | None = strawberry.field(default=None, description="Only calls of these tools (not empty).")
    thread_id: str | None = None
    resource_id: str | None = None
    claimed_by_me: bool | None = strawberry.field(
        default=None, description="true: only questions the caller's review claim holds; false: the others."
    )
    unclaimed: bool | None = strawberry.field(
        default=None, description="true: only questions no live review claim holds; false: the claimed ones."
    )
    expires_before: datetime | None = strawberry.field(
        default=None, description="Only questions whose deadline is before it (none without a deadline)."
    )
    escalated: bool | None = strawberry.field(
        default=None, description="true: only questions whose wait was escalated; false: the others."
    )


@strawberry.type(description="A pending question of the reviewers' queue.")
class ReviewQueueItem:
    agent_id: strawberry.ID
    run_id: strawberry.ID
    tool_call_id: strawberry.ID
    question_id: strawberry.ID = strawberry.field(description="Name it in the decision (and in `claimReview`).")
    tool_name: str
    run: SuspendedRun = strawberry.field(description="The run, as `suspendedRun` shows it.")
    tool_call: SuspendedToolCall = strawberry.field(description="The question's call, as the run lists it.")
    waited_seconds: float = strawberry.field(description="Seconds since the question was asked (`suspendedAt`).")
    expires_at: datetime | None = strawberry.field(description="UTC deadline of the question; null without one.")
    review_claim: ReviewClaim | None = strawberry.field(description="Who is reviewing it now; null: nobody.")
    escalated: bool = strawberry.field(description="Whether its wait was escalated (a rule's `escalateAfter`).")


@strawberry.type
class ReviewQueueEdge:
    cursor: str
    node: ReviewQueueItem


@strawberry.type(
    description="A page of the reviewers' queue: earliest deadline first, then the oldest; questions without a "
    "deadline after, oldest first."
)
class ReviewQueueConnection:
    edges: list[ReviewQueueEdge]
    page_info: PageInfo
    count: strawberry.Private[Callable[[], Awaitable[int]]]

    @strawberry.field(description="The questions of this page (same as `edges.node`).")
    def nodes(self) -> list[ReviewQueueItem]:
        return [edge.node for edge in self.edges]

    @strawberry.field(description="Questions the queue holds for the caller before pagination; counted when selected.")
    async def total_count(self) -> int:
        return await self.count()


def encode_cursor(position: QueuePosition) -> str:
    """Opaque cursor of a question's queue position."""
    key, (undated, at, index) = position.run, position.within
    expires = None if key.expires_at is None else serialize_datetime(key.expires_at)
    raw = [expires, serialize_datetime(key.suspended_at), key.run_id, undated, serialize_datetime(at), index]
    return base64.urlsafe_b64encode(json.dumps(raw, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> QueuePosition:
    """Inverse of ``encode_cursor``.

    Raises:
        QueryArgumentError: ``cursor`` was not made by ``encode_cursor``.
    """
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        expires, suspended, run_id, undated, at, index = raw
        if not isinstance(run_id, str) or not isinstance(undated, bool) or type(index) is not int:
            raise TypeError
        key = QueueKey(None if expires is None else parse_datetime(expires), parse_datetime(suspended), run_id)
        return QueuePosition(key, (undated, parse_datetime(at), index))
    except (binascii.Error, ValueError, TypeError, OverflowError, UnicodeDecodeError):
        raise QueryArgumentError(
            "`after` is not a valid cursor; use a cursor returned by this API", argument="after"
        ) from None


def queue_query(queue_filter: ReviewQueueFilter | None, registry: AgentRegistry) -> QueueQuery:
    """The queue's filters as ``queue_filter`` gives them, its agents those of ``registry``: each
    field of ``QueueQuery`` is the filter's of the same name, its lists as sets.

    Raises:
        QueryArgumentError: An empty list, or one of over ``MAX_FILTER_ITEMS`` items (``BAD_USER_INPUT``); an
            agent id ``registry`` does not hold (``AGENT_NOT_FOUND``, argument ``filter.agentIds``,
            the first in the list; the message lists the known agents, as ``suspendedRuns``').
    """
    if queue_filter is None:
        return QueueQuery()
    for name, values in (("agentIds", queue_filter.agent_ids), ("toolNames", queue_filter.tool_names)):
        if values is not None and len(values) > MAX_FILTER_ITEMS:
            raise QueryArgumentError(
                f"`filter.{name}` names at most {MAX_FILTER_ITEMS} items", argument=f"filter.{name}"
            )
        if values is not None and not values:
            raise QueryArgumentError(
                f"`filter.{name}` is empty, so it would match nothing: leave it out to list them all",
                argument=f"filter.{name}",
            )
    unknown = next((str(a) for a in queue_filter.agent_ids or () if str(a) not in registry), None)
    if unknown is not None:
        message = AgentNotFoundError(unknown, registry.ids()).message
        raise QueryArgumentError(message, argument="filter.agentIds", code="AGENT_NOT_FOUND")
    agents = None if queue_filter.agent_ids is None else frozenset(str(a) for a in queue_filter.agent_ids)
    tools = None if queue_filter.tool_names is None else frozenset(queue_filter.tool_names)
    given = {field.name: getattr(queue_filter, field.name) for field in dataclasses.fields(QueueQuery)}
    return QueueQuery(**{**given, "agent_ids": agents, "tool_names": tools})


async def review_queue_connection(
    info: Info, *, queue_filter: ReviewQueueFilter | None, first: int | None, after: str | None
) -> ReviewQueueConnection:
    """One page of the caller's queue (the field's permission classes checked ``runs:read`` and
    ``runs:decide``); when the document selects ``totalCount``, it is counted while the page is read.

    Raises:
        QueryArgumentError: Bad arguments (``BAD_USER_INPUT``).
    """
    context = info.context
    limit = context.limits.page_size(first)
    position = None if after is None else decode_cursor(after)
    query, principal, queue = queue_query(queue_filter, context.agents), context.principal, context.runs.review_queue
    (items, more, end), count = await with_total(
        info, lambda: queue.count(principal, query), queue.page(principal, query, first=limit, after=position)
    )
    schemas, now = context.agents.tool_schemas(), context.runs.now()
    edges = [
        ReviewQueueEdge(cursor=encode_cursor(item.position), node=queue_item(item, schemas, now)) for item in items
    ]

    return ReviewQueueConnection(
        edges=edges,
        page_info=PageInfo.forward(
            edges[0].cursor if edges else None, None if end is None else encode_cursor(end), more=more, after=after
        ),
        count=count,
    )


def queue_item(item: QueueItem, schemas: ToolSchemas, now: datetime) -> ReviewQueueItem:
    """``item`` as the queue shows it at ``now`` (UTC)."""
    doc, call = item.run, item.run["toolCalls"][item.index]
    run = SuspendedRun.from_document(doc, schemas)
    shown = run.tool_calls[item.index]
    return ReviewQueueItem(
        agent_id=strawberry.ID(doc["agentId"]),
        run_id=strawberry.ID(doc["_id"]),
        tool_call_id=strawberry.ID(call["toolCallId"]),
        question_id=shown.question_id,
        tool_name=call["toolName"],
        run=run,
        tool_call=shown,
        waited_seconds=max(0.0, (now - doc["suspendedAt"]).total_seconds()),
        expires_at=call.get("expiresAt"),
        review_claim=None if item.claim is None else ReviewClaim.from_document(item.claim),
        escalated=call.get("escalated") is True,
    )


__all__ = [
    "ReviewQueueConnection",
    "ReviewQueueFilter",
    "ReviewQueueItem",
    "queue_item",
    "queue_query",
    "review_queue_connection",
]
