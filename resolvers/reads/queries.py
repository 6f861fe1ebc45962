"""Query fields: ``suspendedRuns``, ``reviewQueue``, ``suspendedRun``, ``agents``, ``runEvents``,
``webhookDeliveries`` (and ``node`` from Relay)."""

from __future__ import annotations

from typing import Annotated

import strawberry
from strawberry import relay
from strawberry.relay import GlobalIDValueError

from ..access import CanDecide, CanRead, CanReadWebhooks, visible
from ..agents import Agent, FilterArg, require_agent
from ..context import Info
from ..errors import QueryArgumentError
from ..inputs import PageInput
from ..types import RunEvent, SuspendedRun, SuspendedRunConnection
from .pagination import suspended_runs_connection
from .review_queue import ReviewQueueConnection, ReviewQueueFilter, review_queue_connection
from .webhooks import WebhookDeliveryConnection, WebhookDeliveryStatus, webhook_deliveries_connection


@strawberry.type
class Query:
    @strawberry.field(description="A suspended run by its Relay global `id`, or null.", permission_classes=[CanRead])
    async def node(self, info: Info, id: strawberry.ID) -> relay.Node | None:
        try:
            global_id = relay.GlobalID.from_id(id)
        except GlobalIDValueError:
            raise QueryArgumentError("`id` is not a global id returned by this API", argument="id") from None
        if global_id.type_name != "SuspendedRun":
            return None
        found = await SuspendedRun.resolve_nodes(info=info, node_ids=[global_id.node_id])
        return found[0]

    @strawberry.field(
        description="An agent's suspended runs, newest first (Mastra's `listSuspendedRuns()`). "
        "Paginate with `page` (offset pages) or `first/after/last/before` (Relay cursors), not both.",
        permission_classes=[CanRead],
    )
    async def suspended_runs(
        self,
        info: Info,
        agent_id: strawberry.ID,
        run_filter: FilterArg = None,
        page: PageInput | None = None,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
    ) -> SuspendedRunConnection:
        require_agent(info, str(agent_id))
        return await suspended_runs_connection(
            info,
            agent_id=str(agent_id),
            run_filter=run_filter,
            page=page,
            first=first,
            after=after,
            last=last,
            before=before,
        )

    @strawberry.field(
        description="The reviewers' queue: the pending questions the caller may decide (its resources, and the scopes "
        "and separation of duties the tool rules require), across every agent; earliest deadline first, then the "
        'oldest, then those without a deadline, oldest first (docs/api.md "The reviewers\' queue").',
        permission_classes=[CanRead, CanDecide],
    )
    async def review_queue(
        self,
        info: Info,
        queue_filter: Annotated[ReviewQueueFilter | None, strawberry.argument(name="filter")] = None,
        first: int | None = None,
        after: str | None = None,
    ) -> ReviewQueueConnection:
        return await review_queue_connection(info, queue_filter=queue_filter, first=first, after=after)

    @strawberry.field(
        description="One suspended run of an agent, or null (also for another agent's run).",
        permission_classes=[CanRead],
    )
    async def suspended_run(self, info: Info, agent_id: strawberry.ID, run_id: strawberry.ID) -> SuspendedRun | None:
        require_agent(info, str(agent_id))
        doc = visible(info, await info.context.store.get(str(agent_id), str(run_id)))
        return None if doc is None else SuspendedRun.from_document(doc, info.context.agents.tool_schemas())

    # No permission class: the agents are the same for every caller with a valid token.
    @strawberry.field(description="The registered agents, by id.")
    def agents(self, info: Info) -> list[Agent]:
        found = (Agent.from_registry(info, agent_id) for agent_id in info.context.agents.ids())
        return [agent for agent in found if agent is not None]

    @strawberry.field(
        description="A run's audit trail, oldest first; kept after the run finished.", permission_classes=[CanRead]
    )
    async def run_events(self, info: Info, agent_id: strawberry.ID, run_id: strawberry.ID) -> list[RunEvent]:
        require_agent(info, str(agent_id))
        docs = await info.context.loaders.events_by_run.load((str(agent_id), str(run_id)))
        return [RunEvent.from_document(d) for d in docs]

    @strawberry.field(
        description="Webhook deliveries about runs the caller may see, newest event first (docs/webhooks.md).",
        permission_classes=[CanReadWebhooks],
    )
    async def webhook_deliveries(
        self,
        info: Info,
        first: int | None = None,
        after: str | None = None,
        status: WebhookDeliveryStatus | None = None,
    ) -> WebhookDeliveryConnection:
        return await webhook_deliveries_connection(info, first=first, after=after, status=status)
