"""Subscription fields: ``suspendedRunEvents`` streams an agent's run events as they happen;
``runUpdates`` one run's progress (``resolvers.streams.run_updates``); ``reviewQueueEvents`` the
caller's reviewers' queue (``resolvers.streams.review_queue_events``).

Served over WebSocket with the ``graphql-transport-ws`` protocol (docs/api.md "Subscriptions"). The events come
from the event log through the process's ``runtime.EventFeed`` (one poller per agent, shared by
all subscribers), so a subscriber on any instance sees the events caused by every instance.
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import AsyncGenerator
from typing import Annotated

import strawberry

from storage import EventDocument

from ..access import CanDecideEvents, CanReadEvents
from ..agents import require_agent
from ..context import Info, fresh_loaders
from ..errors import QueryArgumentError, SubscriptionEndedError, stream_endings
from ..reads.review_queue import ReviewQueueFilter
from ..types import RunEvent
from .review_queue_events import REVIEW_QUEUE_EVENTS_DESCRIPTION, ReviewQueueEvent, review_queue_events
from .run_updates import RUN_UPDATES_DESCRIPTION, RunUpdate, run_updates
from .visibility import can_see_event

logger = logging.getLogger("runsgate.graphql")

EVENT_ID = re.compile(r"^\d{20}-[0-9a-f]{12}$")
"""Shape of the event ids runsgate writes (``runtime.events.journal.event_id``)."""


@strawberry.enum(description="Kinds of run events (the `type` of a `RunEvent`).")
class RunEventKind(enum.Enum):
    STARTED = "started"
    SUSPENDED = "suspended"
    DECISION = "decision"
    RESUMED = "resumed"
    COMPLETED = "completed"
    FAILED = "failed"
    TAKEOVER = "takeover"
    EXPIRED = "expired"
    REMINDED = "reminded"
    ESCALATED = "escalated"


@strawberry.input(description="Which run events to stream; every given field must match.")
class RunEventFilter:
    thread_id: str | None = strawberry.field(default=None, description="Only events of runs in this thread.")
    resource_id: str | None = strawberry.field(default=None, description="Only events of runs of this resource.")
    run_id: strawberry.ID | None = strawberry.field(default=None, description="Only events of this run.")
    kinds: list[RunEventKind] | None = strawberry.field(
        default=None, description="Only events of these kinds (not empty); all kinds when omitted."
    )

    def matches(self, event: EventDocument) -> bool:
        """Whether ``event`` passes every field given."""
        return (
            (self.thread_id is None or event.get("threadId") == self.thread_id)
            and (self.resource_id is None or event.get("resourceId") == self.resource_id)
            and (self.run_id is None or event["runId"] == str(self.run_id))
            and (self.kinds is None or event["type"] in {k.value for k in self.kinds})
        )


EventFilterArg = Annotated[RunEventFilter | None, strawberry.argument(name="filter")]


def _checked(run_filter: RunEventFilter | None, after_event_id: strawberry.ID | None) -> RunEventFilter:
    if after_event_id is not None and not EVENT_ID.match(str(after_event_id)):
        raise QueryArgumentError("`afterEventId` is not the id of a run event", argument="afterEventId")
    if run_filter is not None and run_filter.kinds is not None and not run_filter.kinds:
        raise QueryArgumentError(
            "`filter.kinds` must not be empty; omit it to receive every kind", argument="filter.kinds"
        )
    return run_filter or RunEventFilter()


@strawberry.type
class Subscription:
    @strawberry.subscription(
        description="An agent's run events (suspended, decision, resumed, completed, failed, ...) as they "
        "happen on any instance, oldest first. Starts now, or after `afterEventId` to resume a stream.",
        permission_classes=[CanReadEvents],
    )
    async def suspended_run_events(
        self,
        info: Info,
        agent_id: strawberry.ID,
        run_filter: EventFilterArg = None,
        after_event_id: strawberry.ID | None = None,
    ) -> AsyncGenerator[RunEvent, None]:
        require_agent(info, str(agent_id))
        wanted = _checked(run_filter, after_event_id)
        feed = info.context.events
        if feed is None:
            raise SubscriptionEndedError("subscriptions are not served here", code="SUBSCRIPTIONS_UNAVAILABLE")
        context = info.context
        stream = feed.subscribe(
            str(agent_id),
            after_event_id=None if after_event_id is None else str(after_event_id),
            accept=lambda event: wanted.matches(event) and can_see_event(context, event),
            resource_ids=context.principal.resources,  # a replay reads only what it may see
            owner=context.principal.identity,  # its principal's subscriptions share one budget and rate
        )
        try:
            with stream_endings():
                async for event in stream:
                    fresh_loaders()  # each event's fields read the store as it is now
                    yield RunEvent.from_document(event)
        finally:
            await stream.aclose()

    @strawberry.subscription(description=RUN_UPDATES_DESCRIPTION, permission_classes=[CanReadEvents])
    async def run_updates(
        self, info: Info, agent_id: strawberry.ID, run_id: strawberry.ID, after: strawberry.ID | None = None
    ) -> AsyncGenerator[RunUpdate, None]:
        stream = run_updates(info, agent_id, run_id, after)
        try:
            async for update in stream:
                yield update
        finally:
            await stream.aclose()  # at once, when the client stops the subscription

    @strawberry.subscription(
        description=REVIEW_QUEUE_EVENTS_DESCRIPTION, permission_classes=[CanReadEvents, CanDecideEvents]
    )
    async def review_queue_events(
        self,
        info: Info,
        queue_filter: Annotated[ReviewQueueFilter | None, strawberry.argument(name="filter")] = None,
        after_event_id: strawberry.ID | None = None,
    ) -> AsyncGenerator[ReviewQueueEvent, None]:
        stream = review_queue_events(info, queue_filter, after_event_id)
        try:
            async for message in stream:
                yield message
        finally:
            await stream.aclose()  # at once, when the client stops the subscription
