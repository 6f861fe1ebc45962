"""The MongoDB store (docs/storage.md "Production MongoDB"), one module per part: ``schema``
(collections, indexes, schema version), ``mapping`` (documents as stored and read),
``conditions`` (``storage.rules`` as filters), ``reachability``, ``in_flight`` (its writes and
reads in flight), the store's parts (``runs``, ``transitions``, ``events`` with run updates,
``idempotency``, ``deliveries``) composed in ``store``. Importing it imports PyMongo
(``storage`` imports it on first use).
"""

from .conditions import HAS_VALUE, compiled, no_value
from .mapping import listing_query
from .reachability import UNAVAILABLE_CODES, check_reachable, store_address
from .schema import (
    AGENT_EXPIRING_INDEX,
    EVENT_FEED_INDEX,
    EXPIRY_ORDER,
    LISTING_INDEXES,
    LISTING_ORDER,
    REVERSE_ORDER,
    RUN_UPDATES_INDEX,
)
from .store import MongoSnapshotStore

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
