"""Per-run write leases for ``MongoSnapshotStore`` on FerretDB 1.x: one writer per run, across processes.

A lease is a document ``{_id: runId, token, until}`` in ``run_write_locks``, inserted to acquire
and deleted to release; a process queues its own writers on an ``asyncio.Lock`` first, and a
lease whose holder died expires after ``lease`` seconds. ``needs_write_leases`` tells from
``buildInfo`` which servers need them. Why (FerretDB 1.24's conditional updates are not atomic),
which engines and the known limit: docs/storage.md "Write leases".
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import DuplicateKeyError

from ._query import utcnow
from .protocol import StoreUnavailableError


def needs_write_leases(build_info: Mapping[str, Any]) -> bool:
    """Whether the server answering ``buildInfo`` with ``build_info`` needs write leases: FerretDB
    before 2.0, which reports ``ferretdbVersion`` (``"v1.24.2"``) and runs a conditional update as
    a query followed by a write of the whole document. FerretDB 2 reports ``ferretdb.version``
    (``"v2.5.0"``) and hands each write to DocumentDB, which locks the row it updates (``SELECT
    ... FOR UPDATE``); MongoDB reports neither. A FerretDB version that cannot be read needs them."""
    version = build_info.get("ferretdbVersion")
    nested = build_info.get("ferretdb")
    if version is None and isinstance(nested, Mapping):
        version = nested.get("version")
    if version is None:
        return False
    major = re.match(r"v?(\d+)\.", str(version))
    return major is None or int(major.group(1)) < 2


class RunWriteLocks:
    """Leases on runs, kept in one collection.

    Args:
        collection: Returns the lease collection (``run_write_locks``).
        lease: Seconds a lease lasts before another process may remove it.
        wait: Seconds to wait for a lease before giving up with ``StoreUnavailableError``.
    """

    def __init__(
        self,
        collection: Callable[[], AsyncCollection[dict[str, Any]]],
        *,
        lease: float = 10.0,
        wait: float = 30.0,
    ) -> None:
        self._collection = collection
        self._lease = timedelta(seconds=lease)
        self._wait = wait
        self._local: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    @asynccontextmanager
    async def hold(self, run_id: str) -> AsyncIterator[None]:
        """Hold the run's lease for the body.

        Raises:
            StoreUnavailableError: The lease stayed taken for ``wait`` seconds.
        """
        local = self._local.get(run_id)
        if local is None:
            local = self._local[run_id] = asyncio.Lock()
        async with local:
            token = uuid.uuid4().hex
            await self._acquire(run_id, token)
            try:
                yield
            finally:
                await self._collection().delete_one({"_id": run_id, "token": token})

    async def _acquire(self, run_id: str, token: str) -> None:
        collection = self._collection()
        deadline = time.monotonic() + self._wait
        delay = 0.002
        while True:
            now = utcnow()
            try:
                await collection.insert_one({"_id": run_id, "token": token, "until": now + self._lease})
                return
            except DuplicateKeyError:
                # Held elsewhere; a lease whose holder died is removed once it expired.
                await collection.delete_one({"_id": run_id, "until": {"$lt": now}})
            if time.monotonic() > deadline:
                raise StoreUnavailableError(f"run {run_id!r} stayed locked by another instance for {self._wait} s")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)
