"""DataLoaders, one per "X by Y" lookup, created once per request (Strawberry DataLoader)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from strawberry.dataloader import DataLoader

from runtime.conversation import Conversation, messages_of, within
from storage import EventDocument, SnapshotDocument, SnapshotStore

RunKey = tuple[str, str]
"""``(agentId, runId)``."""

ConversationKey = tuple[str, str, int]
"""``(agentId, runId, maxBytes)``."""

HISTORY_READS = 4
"""Histories one batch reads and parses at the same time (each can be many megabytes)."""

THREAD_ABOVE = 256 * 1024
"""A history larger than this (bytes) is parsed in a worker thread, not on the event loop."""


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
        conversations: (agentId, runId, maxBytes) -> the run's conversation within ``maxBytes``
            (``runtime.conversation``), or ``None`` when its history is gone; each run's history
            read once for all the limits asked (``SuspendedRun.conversation``), ``HISTORY_READS``
            at a time; only the cuts are kept. It does not check resources: the caller does.
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

        async def load_conversations(keys: Sequence[ConversationKey]) -> list[Conversation | None]:
            limits: dict[RunKey, set[int]] = {}
            for agent_id, run_id, max_bytes in keys:
                limits.setdefault((agent_id, run_id), set()).add(max_bytes)
            gate = asyncio.Semaphore(HISTORY_READS)
            found: dict[ConversationKey, Conversation] = {}

            async def read(run: RunKey) -> None:
                async with gate:
                    history = await store.load_history(*run)
                    if history is None:
                        return
                    big = len(history) > THREAD_ABOVE
                    messages = await asyncio.to_thread(messages_of, history) if big else messages_of(history)
                for max_bytes in limits[run]:
                    found[(*run, max_bytes)] = within(messages, max_bytes)

            await asyncio.gather(*(read(run) for run in limits))
            return [found.get(key) for key in keys]

        self.conversations: DataLoader[ConversationKey, Conversation | None] = DataLoader(load_fn=load_conversations)
