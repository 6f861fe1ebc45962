"""The SQLite writer's group commit under many interleavings (hypothesis): concurrent inserts,
some of which fail (a duplicate id) and some whose callers are cancelled at once or a moment
later. Each write that returned is in the file, read by a fresh connection; nothing of one that
raised is; a cancelled one is there whole (its run and its history) or not at all."""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from storage import DuplicateRunError, SQLiteSnapshotStore

from ._contract import snapshot

AGENT = "refund-agent"

_op = st.tuples(st.sampled_from(["insert", "duplicate", "cancel"]), st.sampled_from([0, 0, 1, 3]))
"""A write: an insert, an insert of the id stored before, or an insert whose caller is cancelled
after that many loop iterations."""


async def _round(path: Path, ops: list[tuple[str, int]]) -> None:
    store = SQLiteSnapshotStore(path)
    await store.open()
    try:
        await store.insert(snapshot("taken"), b"taken")

        async def one(number: int, kind: str, iterations: int) -> str:
            run_id = "taken" if kind == "duplicate" else f"run-{number}"
            document = {**snapshot(run_id), "historyId": f"history-{number}"}  # a new history, even for "taken"
            write = asyncio.ensure_future(store.insert(document, f"history-{number}".encode()))
            if kind == "cancel":
                for _ in range(iterations):
                    await asyncio.sleep(0)
                write.cancel()
            try:
                await write
            except DuplicateRunError:
                return "refused"
            except asyncio.CancelledError:
                return "cancelled"
            return "stored"

        outcomes = await asyncio.gather(*(one(n, kind, it) for n, (kind, it) in enumerate(ops)))
    finally:
        await store.close()

    reopened = SQLiteSnapshotStore(path)
    await reopened.open()
    try:
        for number, ((kind, _), outcome) in enumerate(zip(ops, outcomes, strict=True)):
            if kind == "duplicate":
                assert outcome == "refused"
                continue
            stored = await reopened.get(AGENT, f"run-{number}")
            history = await reopened.load_history(AGENT, f"run-{number}")
            if outcome == "stored":
                assert stored is not None
                assert history == f"history-{number}".encode()
            else:  # cancelled: whole or not at all
                assert outcome == "cancelled"
                assert (stored is None) == (history is None)
                assert history in (None, f"history-{number}".encode())
        assert await reopened.load_history(AGENT, "taken") == b"taken"
    finally:
        await reopened.close()
    with sqlite3.connect(path) as db:  # and nothing of a refused write stayed: no history without its run
        orphans = db.execute(
            "SELECT count(*) FROM run_histories WHERE history_id NOT IN (SELECT history_id FROM run_snapshots)"
        ).fetchone()[0]
    assert orphans == 0


@settings(max_examples=40, deadline=None, derandomize=True)
@given(ops=st.lists(_op, min_size=1, max_size=12))
def test_concurrent_writes_are_each_stored_whole_or_not_at_all(ops: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory(prefix="runsgate-writer-") as folder:
        asyncio.run(_round(Path(folder) / "runs.db", ops))
