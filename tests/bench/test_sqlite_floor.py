"""``bench.sqlite_floor`` at a tiny size (no timing asserted): the bare replays commit the same
transactions, change the same rows and leave the same tables as the store's writer did."""

from __future__ import annotations

import asyncio

from pydantic_ai import models

from bench.sqlite_floor import NO_CHECKPOINT, measure, report

models.ALLOW_MODEL_REQUESTS = False


def test_the_replays_commit_what_the_store_committed() -> None:
    floor = asyncio.run(measure(approvals=3, warm_up=2))

    assert floor.per_approval == [2, 2, 2]  # the decision's and the completion's transactions
    assert all(t.committed for t in floor.store)
    assert all(t.statements[0][1] == "BEGIN IMMEDIATE" for t in floor.store)
    assert all(t.statements[-1][1] == "COMMIT" for t in floor.store)
    assert sum(t.changes for t in floor.store) > 0
    for name, replay in floor.replays.items():
        assert [t.committed for t in replay.transactions] == [t.committed for t in floor.store], name
        assert [t.changes for t in replay.transactions] == [t.changes for t in floor.store], name
        assert floor.rows[name] == floor.rows["store"], name
    assert all(frames > 0 for frames in floor.replays[NO_CHECKPOINT].frames)
    lines = report(floor)
    assert any("runsgate's share" in line for line in lines)
