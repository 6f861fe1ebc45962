"""runsgate for the federation and live-queue tests: the real app, its store recording its reads.

    python -m tests.ecosystem._counting_server --port PORT

The same ``create_app`` as ``python -m server serve`` (memory store, a SQLite file when
``RUNSGATE_STORE`` names one, or MongoDB when ``MONGODB_URI`` is set), except that the store
records each ``get_many`` call (the run loader's read, the live queue's read of an event's run).
On MongoDB, PyMongo's command monitoring also records every ``find`` sent to ``run_snapshots``.
``GET /test/store-reads`` answers ``{"getMany": [[runId...]...], "snapshotFinds": [filter...]}``,
so a test can count the store queries behind requests made over HTTP.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

import uvicorn
from bson import json_util
from pymongo import monitoring
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from server.app import create_app
from server.settings import Settings, load_settings
from storage import MemorySnapshotStore, MongoSnapshotStore, SnapshotDocument, SnapshotStore, SQLiteSnapshotStore

GET_MANY_CALLS: list[list[str]] = []
SNAPSHOT_FINDS: list[Any] = []


class CountingMemoryStore(MemorySnapshotStore):
    async def get_many(self, run_ids: Sequence[str]) -> list[SnapshotDocument]:
        GET_MANY_CALLS.append(list(run_ids))
        return await super().get_many(run_ids)


class CountingMongoStore(MongoSnapshotStore):
    async def get_many(self, run_ids: Sequence[str]) -> list[SnapshotDocument]:
        GET_MANY_CALLS.append(list(run_ids))
        return await super().get_many(run_ids)


class CountingSQLiteStore(SQLiteSnapshotStore):
    async def get_many(self, run_ids: Sequence[str]) -> list[SnapshotDocument]:
        GET_MANY_CALLS.append(list(run_ids))
        return await super().get_many(run_ids)


class SnapshotFinds(monitoring.CommandListener):
    """Records the filter of every ``find`` command on ``run_snapshots``."""

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name == "find" and event.command.get("find") == "run_snapshots":
            SNAPSHOT_FINDS.append(event.command.get("filter"))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


def make_store(settings: Settings) -> SnapshotStore:
    if settings.mongodb_uri:
        return CountingMongoStore(settings.mongodb_uri, server_selection_timeout=settings.mongodb_timeout)
    if settings.sqlite_path is not None:
        return CountingSQLiteStore(settings.sqlite_path, busy_timeout=settings.sqlite_busy_timeout)
    return CountingMemoryStore()


async def store_reads(request: Request) -> JSONResponse:
    """The recorded reads; filters in MongoDB Extended JSON (they may hold dates)."""
    finds = json.loads(json_util.dumps(SNAPSHOT_FINDS))
    return JSONResponse({"getMany": GET_MANY_CALLS, "snapshotFinds": finds})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    monitoring.register(SnapshotFinds())  # every client created from now on reports its commands
    settings = load_settings()
    app = create_app(settings, store=make_store(settings))  # the lifespan opens a counting store
    app.router.routes.append(Route("/test/store-reads", store_reads))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
