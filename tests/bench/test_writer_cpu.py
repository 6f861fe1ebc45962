"""``bench.writer_cpu`` at a tiny size (no timing asserted): the statements runsgate runs on the
SQLite writer for one approval, counted exactly, and the writer thread's CPU split measured."""

from __future__ import annotations

import asyncio

from pydantic_ai import models

from bench.writer_cpu import kind, measure, report

models.ALLOW_MODEL_REQUESTS = False


def test_a_statement_counts_by_its_kind() -> None:
    assert kind("UPDATE run_snapshots SET a = ?") == "UPDATE run_snapshots"
    assert kind("INSERT INTO run_events (a) VALUES (?)") == "INSERT INTO run_events"
    assert kind("SELECT tool_calls, (a = ?) FROM run_snapshots WHERE b") == "SELECT FROM run_snapshots"
    assert kind("PRAGMA freelist_count") == "PRAGMA"
    assert kind("BEGIN IMMEDIATE") == "BEGIN IMMEDIATE"


def test_an_approval_runs_its_two_transactions_statements_once_each() -> None:
    counts, cpu, timings = asyncio.run(measure(approvals=3, warm_up=2))

    frames = counts.pop("WAL frames written")
    # the decision: its read of the run's calls, its write (with the claim), its events and
    # updates; the completion: the run's and its history's deletion, its events and updates;
    # each transaction's BEGIN, free-page check and COMMIT (triggers are not statements here)
    assert counts == {
        "transactions": 2,
        "BEGIN IMMEDIATE": 2,
        "PRAGMA": 2,
        "COMMIT": 2,
        "SELECT FROM run_snapshots": 1,
        "UPDATE run_snapshots": 1,
        "DELETE FROM run_snapshots": 1,
        "DELETE FROM run_histories": 1,
        "INSERT INTO run_events": 2,
        "INSERT INTO run_updates": 2,
    }
    assert 2 * 5 <= frames <= 2 * 60
    assert cpu["COMMIT (WAL writes, fdatasync)"] > 0, cpu
    assert cpu["whole thread (less the frames' count)"] > 0, cpu
    assert all(len(times) == 3 for times in timings.values())
    assert any("paired approvals" in line for line in report({**counts, "WAL frames written": frames}, cpu, timings))
