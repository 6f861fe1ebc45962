"""``MemorySnapshotStore``: the memory store's five parts in one class, with its lifecycle."""

from __future__ import annotations

from ..documents import SCHEMA_VERSION
from ..protocol import NewerSchemaError
from .deliveries import MemoryWebhookDeliveries
from .keys import MemoryIdempotencyKeys
from .run_updates import MemoryRunUpdateLog
from .runs import MemoryRunStore


class MemorySnapshotStore(MemoryRunStore, MemoryIdempotencyKeys, MemoryWebhookDeliveries, MemoryRunUpdateLog):
    """In-process ``SnapshotStore``; documents are deep-copied in and out. Each call makes a new,
    empty store."""

    async def open(self) -> None:
        """Nothing to connect; refuses snapshots of a newer schema (``NewerSchemaError``)."""
        newest = max((doc["schemaVersion"] for doc in self._runs.values()), default=SCHEMA_VERSION)
        if newest > SCHEMA_VERSION:
            raise NewerSchemaError(newest, SCHEMA_VERSION)

    async def close(self) -> None:
        """Nothing to release."""

    async def ping(self) -> None:
        """Always reachable."""


__all__ = ["MemorySnapshotStore"]
