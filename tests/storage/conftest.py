"""The storage suites run on FerretDB 1.24 too (``STORAGE_STORE_KINDS``): each conditional write
of the MongoDB store must mean the same on both MongoDB test servers (docs/storage.md "MongoDB
test servers"), and no condition any storage test sends compares a field with null
(``_null_conditions``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from storage import SnapshotStore

from ..conftest import STORAGE_STORE_KINDS, open_store, open_two_clients
from ._null_conditions import WATCH


@pytest.fixture(params=STORAGE_STORE_KINDS)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[SnapshotStore]:
    """Each store in turn: memory, SQLite, MongoDB (DocumentDB, or ``MONGODB_URI``), FerretDB 1.24."""
    async with open_store(request, request.param) as opened:
        yield opened


@pytest.fixture(params=STORAGE_STORE_KINDS[1:])
async def two_clients(request: pytest.FixtureRequest) -> AsyncIterator[tuple[SnapshotStore, SnapshotStore]]:
    """Two stores on one database (``tests/conftest.py``), on each store kind but memory."""
    async with open_two_clients(request, request.param) as pair:
        yield pair


@pytest.fixture(autouse=True)
def _no_comparison_with_null() -> Iterator[None]:
    """Fails the test (at teardown) when any MongoDB client sent a condition comparing a field with
    null during it: DocumentDB answers those differently (``storage/mongo/conditions.py``)."""
    with WATCH.recording() as found:
        yield
    assert found == [], f"conditions comparing with null (use storage.mongo.conditions.no_value): {found}"
