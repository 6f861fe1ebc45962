"""Write the stores of tests/data/v3 with the runsgate that stores runs at schema version 3.

Pinned: run from a checkout of commit aee9d3c (schema version 3, before the stores were split
into packages), with a MongoDB-wire server (``./dev ferretdb`` there) at ``MONGODB_URI``::

    git worktree add /tmp/v3src aee9d3c && cd /tmp/v3src && ./dev run python PATH/TO/make.py OUT_DIR

It writes ``OUT_DIR/runs.db`` (SQLite), ``OUT_DIR/mongo.json`` (every collection of a MongoDB
database as MongoDB Extended JSON) and ``OUT_DIR/runs.json`` (the ids), each store holding the
suspended runs of ``fill``'s docstring.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from bson import json_util

from runtime import AgentRegistry, RunManager
from runtime.access import ToolApprovalRule
from storage import MongoSnapshotStore, SnapshotStore, SQLiteSnapshotStore
from tests.runtime.agents import WITH_DEMO_AGENTS

CENTURY = 100 * 365 * 86400.0
"""Seconds: the deadline of the refunds above $100, far enough that it never lapses in a test."""

RULES = (
    ToolApprovalRule(tool="issue_refund", argument="amount", above=500, approvals=2),
    ToolApprovalRule(tool="issue_refund", agent_id="refund-agent", argument="amount", above=100, expires_after=CENTURY),
)


async def fill(store: SnapshotStore) -> dict[str, str]:
    """Five suspended runs, under ``RULES``:

    - ``refund``: ``refund-agent`` waiting for the approval of a $49.90 refund (order 1042);
    - ``trip``: ``trip-agent``'s one call answered once (``Paris``), waiting for its second answer;
    - ``supervisor``: ``support-supervisor`` waiting on the refund sub-run it delegated (order 1043);
    - ``deadline``: ``refund-agent`` waiting on two refunds, 1042 (no deadline) and 1043 ($120,
      a deadline a century after it was written);
    - ``two_person``: ``refund-agent``'s $640 refund (order 1045, needing two approvers, with a
      deadline) approved once, by ``key:alice``.
    """
    await store.open()
    manager = RunManager(store, AgentRegistry(WITH_DEMO_AGENTS), instance_id="v3", tool_rules=RULES)
    refund = await manager.start_run("refund-agent", "Please refund order 1042", thread_id="v3")
    trip = await manager.start_run("trip-agent", "plan", thread_id="v3")
    assert trip.run is not None
    answered = await manager.resume("trip-agent", trip.run_id, None, {"city": "Paris"})
    assert answered.status == "suspended", answered
    supervisor = await manager.start_run("support-supervisor", "Please refund order 1043", thread_id="v3")
    deadline = await manager.start_run("refund-agent", "Please refund orders 1042 and 1043", thread_id="v3")
    two_person = await manager.start_run("refund-agent", "Please refund order 1045", thread_id="v3")
    assert two_person.run is not None
    [call] = two_person.run["toolCalls"]
    once = await manager.approve("refund-agent", two_person.run_id, call["toolCallId"], principal="key:alice")
    assert once.status == "suspended", once
    assert all(o.status == "suspended" for o in (refund, supervisor, deadline)), (refund, supervisor, deadline)
    await store.close()
    return {
        "refund": refund.run_id,
        "trip": trip.run_id,
        "supervisor": supervisor.run_id,
        "deadline": deadline.run_id,
        "two_person": two_person.run_id,
    }


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
