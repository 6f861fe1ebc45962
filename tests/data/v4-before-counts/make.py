"""Write the stores of tests/data/v4-before-counts with the runsgate before kept counts.

Pinned: run from a checkout of commit 9c0088c (schema version 4, totals counted from the runs,
no ``run_counts``), with a MongoDB-wire server at ``MONGODB_URI``::

    git archive 9c0088c | tar -x -C /tmp/v4src && cd /tmp/v4src && \\
        MONGODB_URI=mongodb://127.0.0.1:27017/v4counts ./dev run python PATH/TO/make.py OUT_DIR

It writes ``OUT_DIR/runs.db`` (SQLite), ``OUT_DIR/mongo.json`` (every collection of the MongoDB
database as MongoDB Extended JSON) and ``OUT_DIR/listings.json``: for each store, agent and
filter, the run ids that version listed (newest first) and the total it counted, which a later
runsgate must answer the same (``tests/storage/test_counts_upgrade.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bson import json_util

from storage import MongoSnapshotStore, RunFilter, SnapshotStore, SQLiteSnapshotStore
from storage.documents import SCHEMA_VERSION
from storage.protocol import ClaimedDeletion, ClaimWrite, DecisionWrite

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
AGENTS = ("refund-agent", "weather-agent")
THREADS = (None, "t1", "t2")
RESOURCES = (None, "r1", "r2")

FILTERS: dict[str, dict[str, Any]] = {
    "all": {},
    "t1": {"thread_id": "t1"},
    "t2": {"thread_id": "t2"},
    "r1": {"resource_id": "r1"},
    "r2": {"resource_id": "r2"},
    "t1 r1": {"thread_id": "t1", "resource_id": "r1"},
    "t2 r2": {"thread_id": "t2", "resource_id": "r2"},
    "allowed r1 r2": {"resource_ids": ["r1", "r2"]},
    "t1 allowed r2": {"thread_id": "t1", "resource_ids": ["r2"]},
    "since 20 min": {"from_date": "2026-12-01T12:20:00+00:00"},
}
"""Name -> ``RunFilter`` fields (dates as ISO text, ``resource_ids`` as a list)."""


def run_filter(fields: dict[str, Any]) -> RunFilter:
    """The ``RunFilter`` of one ``FILTERS`` entry."""
    given = dict(fields)
    if "resource_ids" in given:
        given["resource_ids"] = frozenset(given["resource_ids"])
    if "from_date" in given:
        given["from_date"] = datetime.fromisoformat(given["from_date"])
    return RunFilter(**given)


def snapshot(number: int) -> dict[str, Any]:
    """Run ``run-NN``: agent, thread and resource cycling through every combination (none too)."""
    created = T0 + timedelta(minutes=number)
    return {
        "_id": f"run-{number:02}",
        "agentId": AGENTS[number % 2],
        "threadId": THREADS[number // 2 % 3],
        "resourceId": RESOURCES[number // 6 % 3],
        "parentRunId": None,
        "status": "suspended",
        "createdAt": created,
        "suspendedAt": created,
        "updatedAt": created,
        "toolCalls": [
            {
                "toolCallId": f"call-{number:02}",
                "questionId": f"question-{number:02}",
                "questionNumber": 1,
                "toolName": "issue_refund",
                "args": {"order_id": 1000 + number},
                "requiresApproval": True,
                "suspendPayload": None,
                "resumeSchema": None,
                "decision": None,
            }
        ],
        "pendingCount": 1,
        "version": 1,
        "claim": None,
        "lastError": None,
        "schemaVersion": SCHEMA_VERSION,
        "historyId": f"history-{number:02}",
    }


async def fill(store: SnapshotStore) -> dict[str, dict[str, Any]]:
    """40 runs (``snapshot``): 30 inserted one by one, 10 in one ``insert_many``; then runs 3, 8 and
    13 finished (decided, claimed, deleted) and run 5 claimed (``resuming``, still listed). Returns,
    per agent and ``FILTERS`` name, ``{"runs": [ids newest first], "total": n}``."""
    await store.open()
    try:
        for number in range(30):
            await store.insert(snapshot(number), b"[]")  # type: ignore[arg-type]
        await store.insert_many([(snapshot(number), b"[]") for number in range(30, 40)])  # type: ignore[misc]
        decided = {
            "kind": "approved",
            "decidedAt": T0,
            "decidedBy": "alice",
            "reason": None,
            "resumeData": None,
            "idempotencyKey": None,
        }
        for number in (3, 8, 13, 5):
            run, agent = f"run-{number:02}", AGENTS[number % 2]
            recorded = await store.record_decision(
                DecisionWrite(
                    agent_id=agent,
                    run_id=run,
                    index=0,
                    tool_call_id=f"call-{number:02}",
                    question_id=f"question-{number:02}",
                    decision=decided,
                    now=T0,
                )
            )
            assert recorded is not None
            claimed = await store.claim(
                ClaimWrite(agent_id=agent, run_id=run, by="v4", until=T0 + timedelta(days=36500), now=T0)
            )
            assert claimed is not None
            if number != 5:
                assert await store.delete_claimed(ClaimedDeletion(agent_id=agent, run_id=run, by="v4"))
        answers: dict[str, dict[str, Any]] = {}
        for agent in AGENTS:
            for name, fields in FILTERS.items():
                listed = await store.list_runs(agent, run_filter(fields))
                total = await store.count_runs(agent, run_filter(fields))
                answers[f"{agent} {name}"] = {"runs": [doc["_id"] for doc in listed], "total": total}
        return answers
    finally:
        await store.close()


async def write(out: Path) -> tuple[dict[str, Any], str]:
    listings = {"sqlite": await fill(SQLiteSnapshotStore(out / "runs.db"))}
    mongo = MongoSnapshotStore(os.environ["MONGODB_URI"])
    listings["mongo"] = await fill(mongo)
    await mongo.open()
    dump = {}
    for name in sorted(await mongo.database.list_collection_names()):
        dump[name] = [doc async for doc in mongo.database[name].find({})]
    await mongo.drop_all()
    await mongo.close()
    return listings, json_util.dumps(dump, indent=1, json_options=json_util.CANONICAL_JSON_OPTIONS)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("runs.db", "runs.db-wal", "runs.db-shm"):
        (out / stale).unlink(missing_ok=True)
    listings, dump = asyncio.run(write(out))
    (out / "mongo.json").write_text(dump)
    (out / "listings.json").write_text(json.dumps({"filters": FILTERS, "answers": listings}, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
