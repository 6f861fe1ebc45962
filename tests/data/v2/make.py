"""Write the stores of tests/data/v2 with the runsgate that stored runs at schema version 2.

Pinned: run from a checkout of commit 8e4a4dd (the last one writing schema version 2), with a
MongoDB-wire server (``./dev ferretdb`` there) at ``MONGODB_URI``::

    git worktree add /tmp/v2 8e4a4dd && cd /tmp/v2 && ./dev run python PATH/TO/make.py OUT_DIR

It writes ``OUT_DIR/runs.db`` (SQLite) and ``OUT_DIR/mongo.json`` (every collection of a MongoDB
database as MongoDB Extended JSON), each holding three suspended runs:

- ``refund``: ``refund-agent`` waiting for the approval of a $49.90 refund (order 1042);
- ``trip``: ``trip-agent``'s one call answered once (``Paris``), waiting for its second answer;
- ``supervisor``: ``support-supervisor`` waiting on the refund sub-run it delegated (order 1043).

and ``OUT_DIR/runs.json``, their ids.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from bson import json_util

from runtime import AgentRegistry, RunManager
from storage import MongoSnapshotStore, SnapshotStore, SQLiteSnapshotStore
from tests.runtime.agents import WITH_DEMO_AGENTS


async def fill(store: SnapshotStore) -> dict[str, str]:
    await store.open()
    manager = RunManager(store, AgentRegistry(WITH_DEMO_AGENTS), instance_id="v2")
    refund = await manager.start_run("refund-agent", "Please refund order 1042", thread_id="v2")
    trip = await manager.start_run("trip-agent", "plan", thread_id="v2")
    assert trip.run is not None
    answered = await manager.resume("trip-agent", trip.run_id, None, {"city": "Paris"})
    assert answered.status == "suspended", answered
    supervisor = await manager.start_run("support-supervisor", "Please refund order 1043", thread_id="v2")
    assert {refund.status, supervisor.status} == {"suspended"}, (refund, supervisor)
    await store.close()
    return {"refund": refund.run_id, "trip": trip.run_id, "supervisor": supervisor.run_id}


async def write(out: Path) -> tuple[dict[str, dict[str, str]], str]:
    ids = {"sqlite": await fill(SQLiteSnapshotStore(out / "runs.db"))}
    mongo = MongoSnapshotStore(os.environ["MONGODB_URI"])
    ids["mongo"] = await fill(mongo)
    await mongo.open()
    dump = {}
    for name in sorted(await mongo.database.list_collection_names()):
        dump[name] = [doc async for doc in mongo.database[name].find({})]
    await mongo.drop_all()
    await mongo.close()
    return ids, json_util.dumps(dump, indent=1, json_options=json_util.CANONICAL_JSON_OPTIONS)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "runs.db").unlink(missing_ok=True)
    ids, dump = asyncio.run(write(out))
    (out / "mongo.json").write_text(dump)
    (out / "runs.json").write_text(json.dumps(ids, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
