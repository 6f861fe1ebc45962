"""Read a test server's MongoDB database directly: what the runs' collections hold."""

from __future__ import annotations

import hashlib

import bson
from pymongo import MongoClient

RUN_COLLECTIONS = ("run_snapshots", "run_histories", "run_histories_large.files", "run_events", "idempotency_keys")
"""Everything a request could write (``run_write_locks`` holds only leases, removed after each write)."""


def store_state(uri: str, collections: tuple[str, ...] = RUN_COLLECTIONS) -> dict[str, list[str]]:
    """Per collection, the sorted SHA-256 of each document's BSON: equal states hold equal documents."""
    with MongoClient(uri, tz_aware=True, serverSelectionTimeoutMS=10_000) as client:
        database = client.get_default_database()
        return {
            name: sorted(hashlib.sha256(bson.encode(doc)).hexdigest() for doc in database[name].find())
            for name in collections
        }
