"""``SnapshotStore``: the whole store, the five parts plus opening, closing and pinging it."""

from __future__ import annotations

from typing import Protocol

from .deliveries import WebhookDeliveries
from .events import EventLog
from .keys import IdempotencyKeys
from .review import ReviewQueueStore
from .run_updates import RunUpdateLog
from .runs import RunStore


class SnapshotStore(RunStore, ReviewQueueStore, EventLog, IdempotencyKeys, WebhookDeliveries, RunUpdateLog, Protocol):
    """A whole store: runs and histories, the reviewers' queue, the event log, idempotency keys, webhook deliveries and
    run updates, in one place.

    The runtime's components take only the part they use (``Journal`` the ``EventLog``,
    ``IdempotencyGuard`` the ``IdempotencyKeys``, ...); the server opens and closes the whole.
    """

    async def open(self) -> None:
        """Connect and prepare (tables, indexes), then read the stored schema version.

        Raises:
            StoreUnavailableError: The store cannot be reached, opened or written.
            NewerSchemaError: The store holds documents of a ``schemaVersion`` above ``SCHEMA_VERSION``.
        """

    async def close(self) -> None:
        """Release connections."""

    async def ping(self) -> None:
        """Raise ``StoreUnavailableError`` unless the store answers now (``/readyz``)."""


__all__ = ["SnapshotStore"]
