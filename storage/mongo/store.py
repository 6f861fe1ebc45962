"""``MongoSnapshotStore``: suspended runs in MongoDB through PyMongo's async API (docs/storage.md),
composed of one part per protocol part (runs, their state changes, the reviewers' queue, events,
idempotency keys, webhook deliveries, run updates) on ``base.MongoStoreBase``.

One ``AsyncMongoClient`` per store, made by ``open()`` in the running event loop and closed by
``close()``; the database is the URI's path (default ``runsgate``). Collections: docs/storage.md
"Collections and indexes". Every write to a snapshot is a single-document conditional update,
made while holding the run's lease (``_run_lock``) on FerretDB 1.x, whose updates are not atomic.
"""

from __future__ import annotations

from .deliveries import MongoWebhookDeliveries
from .events import MongoEvents, MongoRunUpdates
from .idempotency import MongoIdempotencyKeys
from .reachability import reachable
from .review import MongoReviewQueue
from .runs import MongoRuns
from .schema import COLLECTIONS
from .transitions import MongoRunTransitions


class MongoSnapshotStore(
    MongoRuns,
    MongoRunTransitions,
    MongoReviewQueue,
    MongoEvents,
    MongoIdempotencyKeys,
    MongoWebhookDeliveries,
    MongoRunUpdates,
):
    """``SnapshotStore`` on a MongoDB wire-protocol server (MongoDB 6+, FerretDB 2.5 on DocumentDB or
    FerretDB 1.24; every condition means the same on each, ``conditions``).

    Args:
        uri: A ``mongodb://`` URI; its path names the database (default ``runsgate``).
        server_selection_timeout: Seconds to wait for a reachable server before an operation
            fails with ``StoreUnavailableError``.
        socket_timeout: Seconds a command waits for the server's answer (PyMongo's
            ``socketTimeoutMS``) before it fails with ``StoreUnavailableError``: a server that
            accepts it and never answers; ``open()``'s index builds and backfills have none.
        inline_history_limit: Compressed histories up to this many bytes are stored in one
            document; larger ones go to GridFS.
        write_leases: Whether every write holds a write lease (``_run_lock``); by default
            ``open()`` asks the server (``buildInfo``) and takes them on FerretDB 1.x only.
    """

    async def drop_all(self) -> None:
        """Drop every runsgate collection of the database (tests and ``runsgate seed --reset``)."""
        async with reachable():
            for name in COLLECTIONS:
                await self.database.drop_collection(name)


__all__ = ["MongoSnapshotStore"]
