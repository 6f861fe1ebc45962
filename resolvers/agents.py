"""The ``Agent`` type: a registered pydantic-ai agent and its suspended runs."""

from __future__ import annotations

from typing import Annotated

import strawberry

from runtime import AgentNotFoundError

from .access import CanRead
from .context import Info
from .errors import QueryArgumentError
from .inputs import PageInput, SuspendedRunFilter
from .reads.pagination import suspended_runs_connection
from .types import SuspendedRunConnection

FilterArg = Annotated[SuspendedRunFilter | None, strawberry.argument(name="filter")]


def require_agent(info: Info, agent_id: str) -> None:
    """Check a root field's ``agentId`` argument against the registered agents.

    Raises:
        QueryArgumentError: No agent ``agent_id`` (``AGENT_NOT_FOUND``, argument ``agentId``);
            the message lists the agent ids the caller may use.
    """
    agents = info.context.agents
    if agent_id not in agents:
        message = AgentNotFoundError(agent_id, agents.ids()).message  # the mutations' wording
        raise QueryArgumentError(message, argument="agentId", code="AGENT_NOT_FOUND")


@strawberry.federation.type(keys=["id"], description="A registered agent.")
class Agent:
    id: strawberry.ID
    name: str | None
    description: str | None

    @strawberry.field(
        description="This agent's suspended runs (Mastra's `agent.listSuspendedRuns()`).", permission_classes=[CanRead]
    )
    async def suspended_runs(
        self,
        info: Info,
        run_filter: FilterArg = None,
        page: PageInput | None = None,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
    ) -> SuspendedRunConnection:
        return await suspended_runs_connection(
            info,
            agent_id=str(self.id),
            run_filter=run_filter,
            page=page,
            first=first,
            after=after,
            last=last,
            before=before,
        )

    @classmethod
    def from_registry(cls, info: Info, agent_id: str) -> Agent | None:
        agents = info.context.agents
        if agent_id not in agents:
            return None
        return cls(id=strawberry.ID(agent_id), name=agents.name(agent_id), description=agents.description(agent_id))

    @classmethod
    def resolve_reference(cls, info: Info, id: strawberry.ID) -> Agent | None:
        """Federation ``_entities`` for ``Agent`` (from the in-process registry, no query)."""
        return cls.from_registry(info, str(id))
