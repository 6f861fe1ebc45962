"""The ``RunUpdateLog`` part on every store (memory, SQLite, FerretDB): the batches of a run's
progress that ``runUpdates`` subscribers on other instances read (docs/architecture.md "Run updates").

A batch is named by the id of its last update, so the batches holding updates after an update id
are exactly those whose id sorts after it; a listing is scoped by agent and run, in id order,
``limit`` at a time; pruning deletes the batches written before a moment, whoever wrote them, and
leaves the others.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from storage import RunUpdateBatchDocument, SnapshotStore, utcnow

C1 = "01700000000000000001-aaaaaaaaaaaa"
C2 = "01700000000000000002-bbbbbbbbbbbb"


def _batch(
    last: str, *, run_id: str = "run-1", agent_id: str = "refund-agent", at: datetime | None = None
) -> RunUpdateBatchDocument:
    return {
        "_id": last,
        "agentId": agent_id,
        "runId": run_id,
        "at": at or utcnow(),
        "updates": f'[{{"id": "{last}", "text": "a $key, a dotted.key, and 18446744073709551617"}}]',
    }


async def _ids(store: SnapshotStore, after: str | None, *, limit: int = 100, run_id: str = "run-1") -> list[str]:
    return [b["_id"] for b in await store.list_run_updates("refund-agent", run_id, after=after, limit=limit)]


async def test_the_batches_of_a_run_are_listed_in_id_order_after_an_update_id(store: SnapshotStore) -> None:
    for last in (f"{C1}.00000003", f"{C2}.00000001", f"{C1}.00000007", f"{C1}.end", f"{C2}.end"):
        await store.append_run_updates(_batch(last))
    await store.append_run_updates(_batch(f"{C1}.00000002", run_id="run-2"))
    await store.append_run_updates(_batch(f"{C1}.00000004", agent_id="other-agent"))

    assert await _ids(store, None) == [f"{C1}.00000003", f"{C1}.00000007", f"{C1}.end", f"{C2}.00000001", f"{C2}.end"]
    # the batch ending at 7 holds the updates after 5: it is listed after 5
    assert await _ids(store, f"{C1}.00000005") == [f"{C1}.00000007", f"{C1}.end", f"{C2}.00000001", f"{C2}.end"]
    assert await _ids(store, f"{C1}.end") == [f"{C2}.00000001", f"{C2}.end"]
    assert await _ids(store, C2) == [f"{C2}.00000001", f"{C2}.end"]
    assert await _ids(store, None, limit=2) == [f"{C1}.00000003", f"{C1}.00000007"]
    assert await _ids(store, None, run_id="run-2") == [f"{C1}.00000002"]
    assert await _ids(store, None, run_id="run-3") == []


async def test_a_batch_comes_back_as_written(store: SnapshotStore) -> None:
    written = _batch(f"{C1}.00000001")

    await store.append_run_updates(written)

    (read,) = await store.list_run_updates("refund-agent", "run-1", after=None, limit=10)
    assert read == {**written, "at": read["at"]}
    assert abs(read["at"] - written["at"]) < timedelta(milliseconds=1)  # type: ignore[operator]
    assert read["at"].tzinfo is not None


async def test_pruning_deletes_the_batches_written_before_a_moment(store: SnapshotStore) -> None:
    now = utcnow()
    await store.append_run_updates(_batch(f"{C2}.00000001", at=now - timedelta(hours=2)))
    await store.append_run_updates(_batch(f"{C1}.00000001", run_id="run-2", at=now - timedelta(hours=1)))
    await store.append_run_updates(_batch(f"{C1}.00000002", at=now))

    pruned = await store.prune_run_updates(before=now - timedelta(minutes=30), limit=100)

    assert pruned == 2
    assert await _ids(store, None) == [f"{C1}.00000002"]
    assert await _ids(store, None, run_id="run-2") == []
    assert await store.prune_run_updates(before=now - timedelta(minutes=30), limit=100) == 0


async def test_pruning_deletes_at_most_limit_batches(store: SnapshotStore) -> None:
    old = utcnow() - timedelta(hours=2)
    for seq in range(1, 6):
        await store.append_run_updates(_batch(f"{C1}.{seq:08d}", at=old))

    assert await store.prune_run_updates(before=utcnow(), limit=3) == 3
    assert len(await _ids(store, None)) == 2
