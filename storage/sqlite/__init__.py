"""``SQLiteSnapshotStore``: suspended runs in one SQLite file, through ``aiosqlite``.

Several processes of one host may share the file: every conditional write is one ``BEGIN
IMMEDIATE`` transaction, and writes that queue share a commit (``connection``). WAL journal,
``synchronous=FULL`` by default; ``busy_timeout`` (seconds) bounds each wait for the lock, after
which a write fails with ``StoreUnavailableError``. By part: ``schema`` (tables, opening),
``rows`` (mapping), ``conditions`` (``storage.rules`` as SQL), one module per protocol part, and
``store``. Tables, indexes, durability, the bound on ``busy_timeout``: docs/storage.md "SQLite".
"""

from .connection import DEFAULT_BUSY_TIMEOUT, LARGE_HISTORY_BYTES
from .file.schema import LISTING_INDEXES
from .runs import listing_where
from .store import SQLiteSnapshotStore

__all__ = ["DEFAULT_BUSY_TIMEOUT", "LARGE_HISTORY_BYTES", "LISTING_INDEXES", "SQLiteSnapshotStore", "listing_where"]
