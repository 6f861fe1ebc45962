"""SQLite's reviewers' queue filtered by thread or resource (issue 45, docs/storage.md "SQLite"):
a page, first or from a cursor, is one read whose parts (runs with a deadline, then without) and
the count with ``expiresBefore`` search an index leading with the thread or the resource, merged
in queue order (no sort step), so a thread holding 1% of the waiting runs costs what an
unfiltered page does; a file written before those indexes gets them at open; and every filter's
keyset walk lists what the memory store does.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from storage import MemorySnapshotStore, QueueFilter, QueueKey, SnapshotStore, SQLiteSnapshotStore, queue_key

from ._contract import T0, snapshot, tool_call

THREAD, RESOURCE = "runs_review_queue_thread", "runs_review_queue_resource"
INDEXES = {
    QueueFilter(thread_id="t1"): (THREAD, "thread_id=? AND "),
    QueueFilter(thread_id="t1", resource_id="r1"): (THREAD, "thread_id=? AND "),
    QueueFilter(thread_id="t1", agent_ids=frozenset({"refund-agent"}), resource_ids=frozenset({"r1", "r2"})): (
        THREAD,
        "thread_id=? AND ",
    ),
    QueueFilter(resource_id="r1"): (RESOURCE, "resource_id=? AND "),
    QueueFilter(resource_id="r1", agent_ids=frozenset({"refund-agent", "mail-agent"})): (
        RESOURCE,
        "resource_id=? AND ",
    ),
    QueueFilter(resource_ids=frozenset({"r1"})): (RESOURCE, "resource_id=? AND "),  # a principal of one resource
    QueueFilter(): ("runs_review_queue", ""),
    QueueFilter(agent_ids=frozenset({"refund-agent"}), resource_ids=frozenset({"r1", "r2"})): ("runs_review_queue", ""),
}
"""A filter -> the index its page and ``expiresBefore`` count search, and the search's first terms."""
CURSORS = [None, QueueKey(T0, T0, "m05"), QueueKey(None, T0, "m05")]
"""A first page, a cursor among the runs with a deadline, one among those without."""


async def _open(path: Path) -> SQLiteSnapshotStore:
    store = SQLiteSnapshotStore(path)
    await store.open()
    return store


async def test_a_thread_or_resource_page_searches_an_index_leading_with_it(sqlite_path: Path) -> None:
    store = await _open(sqlite_path)
    try:
        for f, (index, first) in INDEXES.items():
            for after in CURSORS:
                for due in (None, T0):
                    plan = await store.explain_review_queue(replace(f, expires_before=due), 20, after=after)
                    # a part of the runs with a deadline unless past them, one of those without unless ``due``
                    parts = (after is None or after.expires_at is not None) + (due is None)
                    searches = [step for step in plan if step.startswith("SEARCH ")]
                    assert len(searches) == parts, (f, after, due, plan)
                    for step in searches:  # the filter's column by equality, then a range of the deadlines
                        head = f"SEARCH run_snapshots USING INDEX {index} ({first}"
                        assert step.startswith(head), plan
                        assert step[len(head) :].lstrip("(").startswith("expires_at"), plan
                    # one read, the parts merged in queue order: no temporary B-tree, no scan
                    assert set(plan) - set(searches) <= {"MERGE (UNION ALL)", "LEFT", "RIGHT"}, plan
            count = await store.explain_review_count(replace(f, expires_before=T0))
            assert count == [f"SEARCH run_snapshots USING INDEX {index} ({first}expires_at<?)"], (f, count)
    finally:
        await store.close()


async def test_a_file_written_before_the_filter_indexes_gets_them_at_open(sqlite_path: Path) -> None:
    store = await _open(sqlite_path)
    await store.insert(snapshot("old"), b"[]")
    await store.close()
    with sqlite3.connect(sqlite_path) as db:
        for index in (THREAD, RESOURCE):
            db.execute(f"DROP INDEX IF EXISTS {index}")
    store = await _open(sqlite_path)
    try:
        with sqlite3.connect(sqlite_path) as db:
            found = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {THREAD, RESOURCE} <= found, found
        assert [doc["_id"] for doc in await store.list_review_runs(QueueFilter(thread_id="t1"), limit=5)] == ["old"]
    finally:
        await store.close()


def _runs() -> list[dict[str, object]]:
    """Runs of two agents over every thread and resource (none too), some with a deadline, some
    decided (no longer waiting), one a sub-run."""
    runs = []
    for number in range(30):
        call = tool_call("c1")
        if number % 4 == 1:
            call["expiresAt"] = T0 + timedelta(minutes=number % 5)
        doc = snapshot(
            f"m{number:02}",
            agent_id=("refund-agent", "mail-agent")[number % 2],
            thread=(None, "t1", "t2")[number % 3],
            resource=(None, "r1", "r2")[number // 3 % 3],
            calls=[call],
        )
        doc["suspendedAt"] = T0 + timedelta(seconds=number % 7)
        if number % 11 == 10:
            doc["status"] = "running"
        if number == 13:
            doc["parentRunId"] = "m00"
        runs.append(doc)
    return runs  # type: ignore[return-value]


async def _walk(store: SnapshotStore, f: QueueFilter) -> list[str]:
    walked: list[str] = []
    after = None
    while page := await store.list_review_runs(f, limit=2, after=after):
        walked += [doc["_id"] for doc in page]
        after = queue_key(page[-1])
    return walked


async def test_every_filter_walks_the_runs_the_memory_store_lists(sqlite_path: Path) -> None:
    store, memory = await _open(sqlite_path), MemorySnapshotStore()
    await memory.open()
    try:
        for doc in _runs():
            for each in (store, memory):
                await each.insert(doc, b"[]")  # type: ignore[arg-type]
        filters = [*INDEXES, QueueFilter(thread_id="t2", resource_ids=frozenset({"r2"})), QueueFilter()]
        for f in filters:
            for due in (None, T0 + timedelta(minutes=3)):
                both = replace(f, expires_before=due)
                expected = await _walk(memory, both)
                assert expected or due is not None, both
                assert await _walk(store, both) == expected, both
                assert await store.count_review_questions(both) == await memory.count_review_questions(both), both
    finally:
        await store.close()
        await memory.close()
