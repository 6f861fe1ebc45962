"""DataLoaders, one per "X by Y" lookup, created once per request (Strawberry DataLoader)."""

from __future__ import annotations

from collections.abc import Sequence

from strawberry.dataloader import DataLoader

from storage import SnapshotDocument, SnapshotStore


class Loaders:
    """The request's loaders.

    Attributes:
        run_by_id: runId -> stored run (any agent) or ``None``; one ``get_many`` query for all
            the ids asked in the same tick (``_entities``, ``node``).
    """

    def __init__(self, store: SnapshotStore) -> None:
        async def load_runs(run_ids: Sequence[str]) -> list[SnapshotDocument | None]:
            found = {doc["_id"]: doc for doc in await store.get_many(run_ids)}
            return [found.get(run_id) for run_id in run_ids]

        self.run_by_id: DataLoader[str, SnapshotDocument | None] = DataLoader(load_fn=load_runs)
