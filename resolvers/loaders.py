"""DataLoaders, one per "X by Y" lookup, created once per request (Strawberry DataLoader)."""

from __future__ import annotations

from collections.abc import Sequence

from strawberry.dataloader import DataLoader

from storage import EventDocument, SnapshotDocument, SnapshotStore

RunKey = tuple[str, str]
"""``(agentId, runId)``."""


class Loaders:
    """The request's loaders.

    Args:
        store: The snapshot store.
        resource_ids: The principal's resources (``runtime.Principal.resources``): a run or an
            event of another resource loads as missing; ``None`` for no restriction.

    Attributes:
        run_by_id: runId -> stored run (any agent) or ``None``; one ``get_many`` query for all
            the ids asked in the same tick (``_entities``, ``node``).
        events_by_run: (agentId, runId) -> the run's events, oldest first; one query per agent
            for all the runs of a page (``SuspendedRun.events``, ``runEvents``).
    """

    def __init__(self, store: SnapshotStore, *, resource_ids: frozenset[str] | None = None) -> None:
        def allowed(doc: SnapshotDocument) -> bool:
            return resource_ids is None or doc["resourceId"] in resource_ids

        async def load_runs(run_ids: Sequence[str]) -> list[SnapshotDocument | None]:
            found = {doc["_id"]: doc for doc in await store.get_many(run_ids) if allowed(doc)}
            return [found.get(run_id) for run_id in run_ids]

        self.run_by_id: DataLoader[str, SnapshotDocument | None] = DataLoader(load_fn=load_runs)

        async def load_events(keys: Sequence[RunKey]) -> list[list[EventDocument]]:
            by_run: dict[RunKey, list[EventDocument]] = {key: [] for key in keys}
            for agent_id in dict.fromkeys(agent for agent, _ in keys):
                run_ids = [run_id for agent, run_id in keys if agent == agent_id]
                for event in await store.list_events_of_runs(agent_id, run_ids, resource_ids=resource_ids):
                    by_run[(agent_id, event["runId"])].append(event)
            return [by_run[key] for key in keys]

        self.events_by_run: DataLoader[RunKey, list[EventDocument]] = DataLoader(load_fn=load_events)
