"""A SQLite file written before the queue's kept counts counts the same questions after the upgrade.

``tests/data/v5-before-queue-counts`` holds a SQLite file written by commit 76625f9 (schema version
5, backfill 3) with its ``make.py``, and what that version counted for each queue filter
(``queue.json``). Today's store opens a copy, fills ``review_counts`` once (backfill 4) and must
count the same from it; later writes keep the counts.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

from storage import QueueFilter, SQLiteSnapshotStore
from storage.protocol import ClaimedDeletion, DecisionWrite

from ._contract import T0, decision, snapshot, tool_call

DATA = Path(__file__).resolve().parent.parent / "data" / "v5-before-queue-counts"
QUEUE: dict[str, Any] = json.loads((DATA / "queue.json").read_text())


def queue_filter(fields: dict[str, Any]) -> QueueFilter:
    """The ``QueueFilter`` of one of ``queue.json``'s filters (as ``make.py`` builds it)."""
    given = dict(fields)
    for name in ("agent_ids", "resource_ids"):
        if name in given:
            given[name] = frozenset(given[name])
    if "expires_before" in given:
        given["expires_before"] = datetime.fromisoformat(given["expires_before"])
    return QueueFilter(**given)


async def counted(store: SQLiteSnapshotStore) -> dict[str, int]:
    return {name: await store.count_review_questions(queue_filter(f)) for name, f in QUEUE["filters"].items()}


def kept_total(path: Path) -> tuple[int, int]:
    """(the kept counts' every-agent total, the pending calls of the waiting runs) of the file."""
    with sqlite3.connect(path) as db:
        kept = db.execute("SELECT coalesce(sum(questions), 0) FROM review_counts WHERE scope = 0").fetchone()[0]
        truth = db.execute(
            "SELECT coalesce(sum(pending_count), 0) FROM run_snapshots "
            "WHERE status = 'suspended' AND pending_count > 0 AND parent_run_id IS NULL"
        ).fetchone()[0]
    return int(kept), int(truth)


async def test_a_file_written_before_counts_the_same_questions_after_the_upgrade(tmp_path: Path) -> None:
    copy = tmp_path / "runs.db"
    shutil.copy(DATA / "runs.db", copy)
    store = SQLiteSnapshotStore(copy)
    await store.open()
    try:
        # then every total is what the old version counted, read from the kept counts
        assert await counted(store) == QUEUE["answers"]
        kept, truth = kept_total(copy)
        assert kept == truth == QUEUE["answers"]["all"]

        # and later writes keep them: a new run of 2 calls in t1/r1, a decision, the claimed run-03 finished
        await store.insert(snapshot("new-run", calls=[tool_call("c1"), tool_call("c2")], created=T0), b"[]")
        assert await store.record_decision(
            DecisionWrite(
                agent_id="refund-agent", run_id="new-run", index=0, tool_call_id="c1", decision=decision(), now=T0
            )
        )
        assert await store.delete_claimed(ClaimedDeletion(agent_id="refund-agent", run_id="run-03", by="v5"))
        after = await counted(store)
        assert after["all"] == QUEUE["answers"]["all"] + 1
        assert after["refund"] == QUEUE["answers"]["refund"] + 1
        assert after["r1 allowed r1"] == QUEUE["answers"]["r1 allowed r1"] + 1
        assert after["t1"] == QUEUE["answers"]["t1"] + 1
    finally:
        await store.close()
    kept, truth = kept_total(copy)
    assert kept == truth == QUEUE["answers"]["all"] + 1
    with sqlite3.connect(copy) as db:
        assert db.execute("SELECT value FROM runsgate_meta WHERE key = 'backfill'").fetchone() == ("5",)
