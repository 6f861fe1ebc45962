"""``bench.retention_soak`` at a tiny size (SQLite, 6-second periods, no timing asserted): the
report's shape, and that the records of the first period were deleted by the end: fewer
idempotency keys and events are left than were written."""

from __future__ import annotations

import pytest

from bench.retention_soak import TARGET, run, table

pytestmark = pytest.mark.process


def test_a_tiny_soak_reports_each_period_and_deletes_what_expired() -> None:
    [report] = run(["sqlite"], period=6.0, periods=2, rate=3.0)

    assert report["store"] == "sqlite"
    assert (report["periodSeconds"], report["periods"], report["target"]) == (6.0, 2, TARGET)
    assert [s["period"] for s in report["samples"]] == [1, 2]
    assert report["period1"]["bytes"] > 0
    assert report["period1"]["p50Ms"] > 0
    assert [r["period"] for r in report["ratios"]] == [2]
    assert isinstance(report["met"], bool)
    last = report["samples"][-1]
    assert last["errors"] == 0
    finished = last["runsFinished"]
    assert finished >= 10, last  # ~36 at the rate asked; fewer on a loaded machine
    # two keys (start, approve) and five events (started, suspended, decision, resumed, completed)
    # were written for each finished run; the first period's are gone
    assert 0 < last["counts"]["idempotency_keys"] < 2 * finished, last
    assert 0 < last["counts"]["run_events"] < 5 * finished, last
    assert last["counts"]["run_snapshots"] == 0  # a finished run leaves no snapshot
    assert "| sqlite | 2 |" in table([report])
