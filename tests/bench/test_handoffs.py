"""``bench.handoffs`` at a tiny size (no timing asserted): an approval's COMMITs, statements and
thread hand-offs on SQLite, counted exactly, its WAL frames and threads' CPU counted, and none of
them on the memory store."""

from __future__ import annotations

import asyncio

from pydantic_ai import models

from bench.handoffs import measure, report

models.ALLOW_MODEL_REQUESTS = False


def test_an_approval_commits_twice_and_hands_off_twice_on_sqlite() -> None:
    counts, timings = asyncio.run(measure(approvals=3, warm_up=2))

    # the decision's and the completion's transactions, each one hand-off back from the writer;
    # the run's read (`get`) runs on the loop, no hand-off; the history (`load_history`) is the one
    # the claiming decision read in its own transaction: no read of its own
    measured = ("event loop iterations", "WAL frames written", "writer thread CPU ms", "reader thread CPU ms")
    per_approval = counts["sqlite"].per_approval()
    assert per_approval | dict.fromkeys(measured, 0) == {
        "COMMITs": 2,
        "hand-offs back from the writer": 2,
        # the two transactions' statements as SQLite's trace reports them (the kept counts'
        # triggers included): BEGIN, the decision's read and its write (which reads the history
        # too), its events and updates; the deletion, its history's, events and updates; each
        # commit's free-page check and COMMIT; and 4 of the triggers of the queue's candidate
        # marks (`review_marks`: a DELETE and an INSERT each time a waiting run's calls change)
        "statements on the writer": 38,
        **dict.fromkeys(measured, 0),
    }, counts["sqlite"].counted
    # each COMMIT writes the pages it changed to the WAL (about 13 for the decision, 24 for the completion)
    assert 2 * 5 <= per_approval["WAL frames written"] <= 2 * 60, per_approval
    assert per_approval["writer thread CPU ms"] > 0, per_approval
    assert set(counts["memory"].per_approval()) == {"event loop iterations"}, counts["memory"].counted
    assert all(len(times) == 3 for times in timings.values())
    assert any("paired approvals" in line for line in report(counts, timings))
