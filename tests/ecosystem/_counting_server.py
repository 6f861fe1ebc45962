"""runsgate for the federation test: the real app, with a store that records its batched reads.

    python -m tests.ecosystem._counting_server --port PORT

The same ``create_app`` as ``python -m server serve`` on the memory store, except that the store
is a ``MemorySnapshotStore`` subclass recording each ``get_many`` call (the one read that
``_entities`` and ``node`` make through the run loader), as ``tests/resolvers/test_loaders.py``
counts event reads. The calls are served at ``GET /test/get-many-calls`` as a JSON list of the
run-id lists asked, so a test can count the store queries behind requests made over HTTP.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from server import app as server_app
from server.config import Settings, load_settings
from storage import MemorySnapshotStore, SnapshotDocument, SnapshotStore


class CountingStore(MemorySnapshotStore):
    """The memory store, recording the ids asked of each ``get_many`` call."""

    def __init__(self) -> None:
        super().__init__()
        self.get_many_calls: list[list[str]] = []

    async def get_many(self, run_ids: Sequence[str]) -> list[SnapshotDocument]:
        self.get_many_calls.append(list(run_ids))
        return await super().get_many(run_ids)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    store = CountingStore()

    def make_store(settings: Settings) -> SnapshotStore:
        return store

    server_app.make_store = make_store  # the lifespan opens this store instead of a new one
    app = server_app.create_app(load_settings())

    async def get_many_calls(request: Request) -> JSONResponse:
        return JSONResponse(store.get_many_calls)

    app.router.routes.append(Route("/test/get-many-calls", get_many_calls))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
