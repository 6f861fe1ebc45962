"""``bench.handoffs`` at a tiny size (no timing asserted): an approval's COMMITs and thread
hand-offs on SQLite, counted exactly, and none on the memory store."""

from __future__ import annotations

import asyncio

from pydantic_ai import models

from bench.handoffs import measure, report

models.ALLOW_MODEL_REQUESTS = False


def test_an_approval_commits_twice_and_hands_off_three_times_on_sqlite() -> None:
    counts, timings = asyncio.run(measure(approvals=3, warm_up=2))

    # the decision's and the completion's transactions, each one hand-off back from the writer;
    # the run's read (`get`) from the reader; the history (`load_history`) is the one the
    # claiming decision read in its own transaction: no read of its own
    assert counts["sqlite"].per_approval() | {"event loop iterations": 0} == {
        "COMMITs": 2,
        "event loop iterations": 0,
        "hand-offs back from the writer": 2,
        "hand-offs back from other threads": 1,
    }, counts["sqlite"].counted
    assert set(counts["memory"].per_approval()) == {"event loop iterations"}, counts["memory"].counted
    assert all(len(times) == 3 for times in timings.values())
    assert any("paired approvals" in line for line in report(counts, timings))
