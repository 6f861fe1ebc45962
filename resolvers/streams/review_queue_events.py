"""``reviewQueueEvents``: the reviewers' queue kept current (docs/api.md "The reviewers' queue, live").

Every agent's run events come from the event log through the process's ``runtime.EventFeed`` (one
poller for all of them, shared by every such subscriber); ``runtime.reviewing.live`` turns each
into the changes of the subscriber's queue, its run read once per event for every subscriber.
A message's ``id`` resumes the stream after it (``afterEventId``); a run event's id resumes after
that event.
"""

from __future__ import annotations

import enum
import re
from collections.abc import AsyncGenerator
from datetime import datetime

import strawberry

from runtime.reviewing.live import QueueChange

from ..context import Info, fresh_loaders
from ..errors import QueryArgumentError, SubscriptionEndedError, stream_endings
from ..reads.review_queue import ReviewQueueFilter, ReviewQueueItem, queue_item, queue_query

MESSAGE_ID = re.compile(r"^(\d{20}-[0-9a-f]{12})(?::(\d{1,6}))?$")
"""A message's id (``{eventId}:{n}``: the ``n``th change its run event made), or a run event's id."""


@strawberry.enum(description="What a `ReviewQueueEvent` says of its question.")
class ReviewQueueChange(enum.Enum):
    ENTERED = strawberry.enum_value(
        "entered", description="It is in the caller's queue (it started to wait, or now passes the filter): `item`."
    )
    CHANGED = strawberry.enum_value(
        "changed", description="It is still in the caller's queue, changed (claimed, released, reminded, ...): `item`."
    )
    LEFT = strawberry.enum_value(
        "left",
        description="It is no longer in the caller's queue (decided, expired, its run went on or ended, or it no "
        "longer passes the filter): remove it.",
    )


@strawberry.type(
    description="One change of the caller's reviewers' queue (docs/api.md \"The reviewers' queue, live\")."
)
class ReviewQueueEvent:
    id: strawberry.ID = strawberry.field(
        description="Pass it as `afterEventId` to resume the stream after this message."
    )
    event_id: strawberry.ID = strawberry.field(description="The run event that made the change (as in `runEvents`).")
    cause: str = strawberry.field(
        description="That run event's `type`: `suspended`, `decision`, `approval`, `expired`, `reminded`, "
        "`escalated`, `reviewClaimed`, `reviewReleased`, `resumed`, `completed` or `failed`."
    )
    change: ReviewQueueChange
    at: datetime = strawberry.field(description="UTC time of the run event.")
    by: str | None = strawberry.field(
        description="Who caused the run event: a principal (`key:alice`, `jwt:<sub>`), `expiry`, `policy:<rule>` "
        "or an instance id (as its `by` in `runEvents`)."
    )
    agent_id: strawberry.ID
    run_id: strawberry.ID
    tool_call_id: strawberry.ID
    question_id: strawberry.ID = strawberry.field(description="With `runId`, the question's identity in the queue.")
    tool_name: str
    item: ReviewQueueItem | None = strawberry.field(
        description="ENTERED and CHANGED: the question as `reviewQueue` lists it now; LEFT: null."
    )


def _message(change: QueueChange, info: Info, now: datetime) -> ReviewQueueEvent:
    event, schemas = change.event, info.context.agents.tool_schemas()
    return ReviewQueueEvent(
        id=strawberry.ID(f"{event['_id']}:{change.number}"),
        event_id=strawberry.ID(event["_id"]),
        cause=event["type"],
        change=ReviewQueueChange(change.kind),
        at=event["at"],
        by=event["by"],
        agent_id=strawberry.ID(change.agent_id),
        run_id=strawberry.ID(change.run_id),
        tool_call_id=strawberry.ID(change.tool_call_id),
        question_id=strawberry.ID(change.question_id),
        tool_name=change.tool_name,
        item=None if change.item is None else queue_item(change.item, schemas, now),
    )


REVIEW_QUEUE_EVENTS_DESCRIPTION = (
    "The caller's reviewers' queue kept current, across every agent, on any instance: a message each time a question "
    "the caller may decide (as `reviewQueue` lists it, with the same filter) enters it, changes or leaves it. "
    "Starts now, or after `afterEventId` (a message's `id`) to resume a stream."
)


async def review_queue_events(
    info: Info, queue_filter: ReviewQueueFilter | None, after_event_id: strawberry.ID | None
) -> AsyncGenerator[ReviewQueueEvent, None]:
    """``Subscription.reviewQueueEvents`` (module docstring; the field's permission classes
    checked ``runs:read`` and ``runs:decide``).

    Raises:
        QueryArgumentError: ``afterEventId`` is neither a message's nor a run event's id, a
            filter is empty or too long, or names an unknown agent (``queue_query``).
        SubscriptionEndedError: ``SHUTTING_DOWN``, ``STORE_UNAVAILABLE``, ``SUBSCRIPTIONS_UNAVAILABLE``,
            ``SUBSCRIPTION_OVERFLOW`` (as ``suspendedRunEvents``).
    """
    resume = None if after_event_id is None else MESSAGE_ID.match(str(after_event_id))
    if after_event_id is not None and resume is None:
        raise QueryArgumentError(
            "`afterEventId` is not the id of a queue message or run event", argument="afterEventId"
        )
    context = info.context
    query = queue_query(queue_filter, context.agents)
    feed = context.events
    if feed is None:
        raise SubscriptionEndedError("subscriptions are not served here", code="SUBSCRIPTIONS_UNAVAILABLE")
    watch = context.runs.live_queue.watch(context.principal, query)
    after, skip_to = None, None
    if resume is not None:
        after = resume.group(1)
        if resume.group(2) is not None:  # that event again, from its next change
            after, skip_to = after[:20], (resume.group(1), int(resume.group(2)))
    stream = feed.subscribe(
        None,
        after_event_id=after,
        accept=watch.accepts,
        resource_ids=context.principal.resources,
        owner=context.principal.identity,
    )
    try:
        with stream_endings():
            async for event in stream:
                if skip_to is not None and event["_id"] < skip_to[0]:
                    continue
                for change in await watch.changes(event):
                    if skip_to is not None and event["_id"] == skip_to[0] and change.number <= skip_to[1]:
                        continue
                    fresh_loaders()
                    yield _message(change, info, context.runs.now())
    finally:
        await stream.aclose()


__all__ = ["REVIEW_QUEUE_EVENTS_DESCRIPTION", "ReviewQueueChange", "ReviewQueueEvent", "review_queue_events"]
