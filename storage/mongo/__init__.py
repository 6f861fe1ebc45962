"""The MongoDB store (docs/storage.md "Production MongoDB"), one module per part: ``schema``
(collections, indexes, schema version), ``mapping`` (documents as stored and read),
``conditions`` (``storage.rules`` as filters), ``reachability``, ``in_flight`` (its writes and
reads in flight), the store's parts (``runs``, ``transitions``, ``review``, ``events`` with run
updates, ``idempotency``, ``deliveries``), composed here into ``MongoSnapshotStore`` on
``base.MongoStoreBase``: one ``AsyncMongoClient`` per store, made by ``open()``, closed by
``close()``. Each write to a run is one single-document conditional update (under a write lease
on FerretDB 1.x). Importing it imports PyMongo (``storage`` imports it on first use).
"""

from __future__ import annotations

from .conditions import HAS_VALUE, compiled, no_value
from .deliveries import MongoWebhookDeliveries
from .events import MongoEvents, MongoRunUpdates
from .idempotency import MongoIdempotencyKeys
from .mapping import listing_query
from .reachability import UNAVAILABLE_CODES, check_reachable, reachable, store_address
from .review import MongoReviewQueue
from .runs import MongoRuns
from .schema import (
    AGENT_EXPIRING_INDEX,
    COLLECTIONS,
    EVENT_FEED_INDEX,
    EXPIRY_ORDER,
    LISTING_INDEXES,
    LISTING_ORDER,
    REVERSE_ORDER,
    RUN_UPDATES_INDEX,
)
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


__all__ = [
    "AGENT_EXPIRING_INDEX",
    "EVENT_FEED_INDEX",
    "EXPIRY_ORDER",
    "HAS_VALUE",
    "LISTING_INDEXES",
    "LISTING_ORDER",
    "REVERSE_ORDER",
    "RUN_UPDATES_INDEX",
    "UNAVAILABLE_CODES",
    "MongoSnapshotStore",
    "check_reachable",
    "compiled",
    "listing_query",
    "no_value",
    "store_address",
]
