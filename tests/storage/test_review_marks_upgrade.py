"""A SQLite file written before the queue's candidate marks (``review_marks``, backfill 5) lists
the same candidate runs after the upgrade as the runs it holds call for; and the candidate read
walks ``review_marks`` by key, one range per part.

Two older files: ``tests/data/v5-before-queue-counts`` (commit 76625f9, backfill 3), and one at
backfill 4 made here as that version left it: no ``review_marks`` and no triggers, with a run
written after the table went away.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from storage import QueueFilter, ReviewCandidates, SnapshotDocument, SQLiteSnapshotStore

from ._contract import T0, snapshot, tool_call

DATA = Path(__file__).resolve().parent.parent / "data" / "v5-before-queue-counts"
EVERY = QueueFilter()
PARTS = [
    ReviewCandidates(approver="key:alice"),
    ReviewCandidates(starter="key:alice"),
    ReviewCandidates(unknown_starter=True),
    ReviewCandidates(tool_names=frozenset({"issue_refund"})),
    ReviewCandidates(tool_names=frozenset({"ask_city"})),
]


def _is_candidate(doc: SnapshotDocument, c: ReviewCandidates) -> bool:
    """What ``ReviewCandidates`` says of one counted run, read from its document."""
    pending = [call for call in doc["toolCalls"] if call["decision"] is None]
    return (
        any(call["toolName"] in c.tool_names for call in pending)
        or any(a["decidedBy"] == c.approver for call in pending for a in call.get("approvals") or ())
        or (c.starter is not None and doc.get("startedBy") == c.starter)
        or (c.unknown_starter and "startedBy" not in doc)
    )


async def _agrees(store: SQLiteSnapshotStore) -> int:
    """Checks every part's listing against the runs read; returns the candidates found."""
    counted = [doc for doc in await store.list_review_runs(EVERY, limit=10_000) if doc["parentRunId"] is None]
    found = 0
    for part in PARTS:
        listed = [doc["_id"] for doc in await store.list_review_candidates(EVERY, part, limit=10_000)]
        assert listed == sorted(doc["_id"] for doc in counted if _is_candidate(doc, part)), part
        found += len(listed)
    return found


async def test_a_file_written_before_the_queue_counts_lists_its_candidates(tmp_path: Path) -> None:
    copy = tmp_path / "runs.db"
    shutil.copy(DATA / "runs.db", copy)
    store = SQLiteSnapshotStore(copy)
    await store.open()
    try:
        assert await _agrees(store) > 0
    finally:
        await store.close()


async def test_a_file_at_backfill_4_gets_the_marks_of_every_run(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteSnapshotStore(path)
    await store.open()
    approved = tool_call("c1")
    approved["approvalsRequired"] = 2
    approved["approvals"] = [{"decidedBy": "key:alice", "decidedAt": T0}]
    first = snapshot("before", calls=[approved])
    first["startedBy"] = "key:alice"
    await store.insert(first, b"[]")
    await store.close()
    with sqlite3.connect(path) as db:  # as the version before left the file, then a run it wrote
        for trigger in ("review_marks_inserted", "review_marks_deleted", "review_marks_changed"):
            db.execute(f"DROP TRIGGER {trigger}")
        db.execute("DROP TABLE review_marks")
        db.execute("UPDATE runsgate_meta SET value = '4' WHERE key = 'backfill'")
        columns = [row[1] for row in db.execute("PRAGMA table_info(run_snapshots)")]
        copied = {"run_id": "'copy'", "started_by": "NULL"}
        db.execute(
            f"INSERT INTO run_snapshots ({', '.join(columns)}) "
            f"SELECT {', '.join(copied.get(c, c) for c in columns)} FROM run_snapshots WHERE run_id = 'before'"
        )
    store = SQLiteSnapshotStore(path)
    await store.open()
    try:
        weather = snapshot("after", agent_id="weather-agent", calls=[tool_call("c1", approval=False)])
        await store.insert(weather, b"[]")
        # approver: before, copy; starter: before; unknown: copy, after; issue_refund: before, copy; ask_city: after
        assert await _agrees(store) == 8
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM runsgate_meta WHERE key = 'backfill'").fetchone() == ("6",)


async def test_a_file_at_backfill_5_marks_its_claims_and_escalations(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteSnapshotStore(path)
    await store.open()
    claimed, escalated = tool_call("c1"), tool_call("c1")
    claimed["reviewClaim"] = {"by": "key:x", "at": T0, "until": T0}
    escalated["escalated"] = True
    for doc in (snapshot("claimed", calls=[claimed]), snapshot("escalated", calls=[escalated]), snapshot("other")):
        await store.insert(doc, b"[]")
    await store.close()
    with sqlite3.connect(path) as db:  # as backfill 5 left it: no such marks, triggers that add none
        db.execute("DELETE FROM review_marks WHERE kind IN ('c', 'e')")
        db.execute("DROP TRIGGER review_marks_changed")
        db.execute(
            "CREATE TRIGGER review_marks_changed AFTER UPDATE OF tool_calls ON run_snapshots "
            "BEGIN DELETE FROM review_marks WHERE run_id = OLD.run_id; END"
        )
        db.execute("UPDATE runsgate_meta SET value = '5' WHERE key = 'backfill'")
    store = SQLiteSnapshotStore(path)
    await store.open()
    try:
        claims, escalations = ReviewCandidates(claimed=True), ReviewCandidates(escalated=True)
        assert [doc["_id"] for doc in await store.list_review_candidates(EVERY, claims, limit=10)] == ["claimed"]
        assert [doc["_id"] for doc in await store.list_review_candidates(EVERY, escalations, limit=10)] == ["escalated"]
        with sqlite3.connect(path) as db:  # the renewed trigger marks a claim written now
            db.execute(
                "UPDATE run_snapshots SET tool_calls = (SELECT tool_calls FROM run_snapshots WHERE run_id = 'claimed') "
                "WHERE run_id = 'other'"
            )
        found = await store.list_review_candidates(EVERY, claims, limit=10)
        assert [doc["_id"] for doc in found] == ["claimed", "other"]
    finally:
        await store.close()


async def test_the_candidate_read_walks_each_part_by_key(tmp_path: Path) -> None:
    store = SQLiteSnapshotStore(tmp_path / "runs.db")
    await store.open()
    every = ReviewCandidates(
        approver="key:alice", starter="key:alice", unknown_starter=True, tool_names=frozenset({"ask_city"})
    )
    try:
        filters = [QueueFilter(agent_ids=frozenset({"x"}), resource_ids=frozenset({"r1"}))]
        filters += [QueueFilter(thread_id="t1"), QueueFilter(resource_id="r1")]  # their page indexes unused
        for queue_filter in (EVERY, *filters):
            plan = await store.explain_review_candidates(queue_filter, every)
            walks = [line for line in plan if line.startswith("SEARCH m ")]
            # one range per part, and one of the runs whose calls SQLite cannot read (``x``)
            assert walks == ["SEARCH m USING PRIMARY KEY (kind=? AND value=? AND run_id>?)"] * 5, plan
            assert not any(line.startswith("SCAN run_snapshots") or line.startswith("SCAN r") for line in plan), plan
    finally:
        await store.close()


async def test_a_run_whose_calls_sqlite_cannot_read_is_a_candidate_of_every_part(tmp_path: Path) -> None:
    # given a waiting run whose calls an older runsgate stored with Infinity (not JSON to SQLite)
    path = tmp_path / "runs.db"
    store = SQLiteSnapshotStore(path)
    await store.open()
    try:
        await store.insert(snapshot("run-inf", calls=[tool_call("c1")], created=T0), b"[]")
        with sqlite3.connect(path) as db:
            changed = db.execute(
                "UPDATE run_snapshots SET tool_calls = replace(tool_calls, '25.5', 'Infinity') WHERE run_id = 'run-inf'"
            ).rowcount
        assert changed == 1
        # then the write is kept, and every part's candidates hold the run (a superset the gate checks)
        for part in PARTS:
            listed = [doc["_id"] for doc in await store.list_review_candidates(EVERY, part, limit=10)]
            assert listed == ["run-inf"], part
        # and the queue's total, told of no approval by anyone, still reads the candidates
        assert await store.count_review_questions_seeing(EVERY, "key:nobody") == (1, True)
    finally:
        await store.close()
