"""Write tests/data/v5-before-queue-counts with the runsgate before the queue's kept counts.

Pinned: run from a checkout of commit 76625f9 (schema version 5, backfill 3: ``run_counts`` kept,
the queue's ``totalCount`` summed over its runs)::

    git archive 76625f9 | tar -x -C /tmp/v5src && cd /tmp/v5src && ./dev run python PATH/TO/make.py OUT_DIR

It writes ``OUT_DIR/runs.db`` (SQLite) and ``OUT_DIR/queue.json``: for each queue filter, the
pending questions that version counted (``count_review_questions``), which a later runsgate must
count the same (``tests/storage/test_review_counts_upgrade.py``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from storage import QueueFilter, SQLiteSnapshotStore
from storage.documents import SCHEMA_VERSION
from storage.protocol import ClaimWrite, DecisionWrite

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
AGENTS = ("refund-agent", "weather-agent", "mail-agent")
THREADS = (None, "t1", "t2")
RESOURCES = (None, "r1", "r2")

FILTERS: dict[str, dict[str, Any]] = {
    "all": {},
    "refund": {"agent_ids": ["refund-agent"]},
    "refund weather": {"agent_ids": ["refund-agent", "weather-agent"]},
    "t1": {"thread_id": "t1"},
    "r2": {"resource_id": "r2"},
    "t2 r1": {"thread_id": "t2", "resource_id": "r1"},
    "allowed r1 r2": {"resource_ids": ["r1", "r2"]},
    "weather t1 allowed r2": {"agent_ids": ["weather-agent"], "thread_id": "t1", "resource_ids": ["r2"]},
    "r1 allowed r2": {"resource_id": "r1", "resource_ids": ["r2"]},
    "r1 allowed r1": {"resource_id": "r1", "resource_ids": ["r1"]},
    "expires before 1 h": {"expires_before": "2026-12-01T13:00:00+00:00"},
}
"""Name -> ``QueueFilter`` fields (dates as ISO text, sets as lists)."""


def queue_filter(fields: dict[str, Any]) -> QueueFilter:
    """The ``QueueFilter`` of one ``FILTERS`` entry."""
    given = dict(fields)
    for name in ("agent_ids", "resource_ids"):
        if name in given:
            given[name] = frozenset(given[name])
    if "expires_before" in given:
        given["expires_before"] = datetime.fromisoformat(given["expires_before"])
    return QueueFilter(**given)


def snapshot(number: int) -> dict[str, Any]:
    """Run ``run-NN``: every agent, thread and resource combination, 1 to 3 calls, every third
    with deadlines, every seventh a sub-run of ``run-00``."""
    created = T0 + timedelta(minutes=number)
    calls = []
    for index in range(1 + number % 3):
        call: dict[str, Any] = {
            "toolCallId": f"call-{number:02}-{index}",
            "questionId": f"question-{number:02}-{index}",
            "questionNumber": 1,
            "toolName": "issue_refund",
            "args": {"order_id": 1000 + number},
            "requiresApproval": True,
            "suspendPayload": None,
            "resumeSchema": None,
            "decision": None,
        }
        if number % 3 == 0:
            call["expiresAt"] = created + timedelta(minutes=10 + 20 * index)
        calls.append(call)
    doc: dict[str, Any] = {
        "_id": f"run-{number:02}",
        "agentId": AGENTS[number % 3],
        "threadId": THREADS[number // 3 % 3],
        "resourceId": RESOURCES[number // 9 % 3],
        "parentRunId": "run-00" if number % 7 == 6 else None,
        "status": "suspended",
        "createdAt": created,
        "suspendedAt": created,
        "updatedAt": created,
        "toolCalls": calls,
        "pendingCount": len(calls),
        "version": 1,
        "claim": None,
        "lastError": None,
        "schemaVersion": SCHEMA_VERSION,
        "historyId": f"history-{number:02}",
    }
    if number % 3 == 0:
        doc["expiresAt"] = calls[0]["expiresAt"]
    return doc


async def fill(store: SQLiteSnapshotStore) -> dict[str, int]:
    """60 runs (``snapshot``), 40 one by one and 20 in one ``insert_many``; then the first call
    of runs 2, 5, 8, ... decided, and run 3 (its one call decided) claimed (``resuming``).
    Returns the count of every ``FILTERS`` entry."""
    await store.open()
    try:
        for number in range(40):
            await store.insert(snapshot(number), b"[]")  # type: ignore[arg-type]
        await store.insert_many([(snapshot(number), b"[]") for number in range(40, 60)])  # type: ignore[misc]
        decided = {
            "kind": "approved",
            "decidedAt": T0,
            "decidedBy": "alice",
            "reason": None,
            "resumeData": None,
            "idempotencyKey": None,
        }
        for number in [*range(2, 60, 3), 3]:
            recorded = await store.record_decision(
                DecisionWrite(
                    agent_id=AGENTS[number % 3],
                    run_id=f"run-{number:02}",
                    index=0,
                    tool_call_id=f"call-{number:02}-0",
                    question_id=f"question-{number:02}-0",
                    decision=decided,  # type: ignore[arg-type]
                    now=T0,
                )
            )
            assert recorded is not None
        claimed = await store.claim(
            ClaimWrite(agent_id=AGENTS[0], run_id="run-03", by="v5", until=T0 + timedelta(days=36500), now=T0)
        )
        assert claimed is not None
        return {name: await store.count_review_questions(queue_filter(fields)) for name, fields in FILTERS.items()}
    finally:
        await store.close()


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("runs.db", "runs.db-wal", "runs.db-shm"):
        (out / stale).unlink(missing_ok=True)
    answers = asyncio.run(fill(SQLiteSnapshotStore(out / "runs.db")))
    (out / "queue.json").write_text(json.dumps({"filters": FILTERS, "answers": answers}, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
