"""``runsgate backup`` while a server decides runs (docs/operations.md "Backup and restore"): every
decision acknowledged over HTTP before the backup began is in the copy, nothing else is invented,
and a server started on the copy decides its suspended runs.

Real processes: a ``python -m server serve`` on a SQLite file, ``python -m server backup`` run
while approvals keep coming, then a server on the copy."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from .. import _processes
from .._graphql import APPROVE, REFUND, SUSPENDED_RUNS, TWO_REFUNDS_PROMPT, data
from .._graphql import START_RUN as START
from .._servers import runsgate_process

RUNS = 24
BEFORE = 12
"""Runs whose first call is approved before the backup starts; the others' during it."""


def _approve(base_url: str, run_id: str, call_id: str) -> dict[str, Any]:
    outcome: dict[str, Any] = data(
        base_url, None, APPROVE, input={"agentId": REFUND, "runId": run_id, "toolCallId": call_id}
    )["approveToolCall"]
    assert outcome["__typename"] == "RunOutcome", outcome
    return outcome


def _listed(base_url: str) -> dict[str, dict[str, Any]]:
    connection = data(base_url, None, SUSPENDED_RUNS, agentId=REFUND, first=100)["suspendedRuns"]
    return {edge["node"]["runId"]: edge["node"] for edge in connection["edges"]}


def _decided(run: dict[str, Any]) -> set[str]:
    return {call["toolCallId"] for call in run["toolCalls"] if call["decision"] is not None}


@pytest.mark.process
def test_a_backup_taken_while_decisions_are_made_holds_every_acknowledged_one_and_can_be_served(
    tmp_path: Path,
) -> None:
    source, copy = tmp_path / "runsgate.db", tmp_path / "backup.db"
    acknowledged: dict[str, str] = {}  # run id -> the call whose approval was answered before the backup
    during: dict[str, str] = {}
    with runsgate_process(tmp_path / "first.log", RUNSGATE_STORE=f"sqlite:///{source}") as first:
        # given refund runs each waiting on two calls, and the first call of half of them approved
        runs = []
        for _ in range(RUNS):
            started = data(first, None, START, input={"agentId": REFUND, "prompt": TWO_REFUNDS_PROMPT})["startRun"]
            assert started["status"] == "SUSPENDED", started
            runs.append((started["runId"], [c["toolCallId"] for c in started["run"]["toolCalls"]]))
        assert all(len(calls) == 2 for _, calls in runs)
        for run_id, calls in runs[:BEFORE]:
            assert _approve(first, run_id, calls[0])["status"] == "SUSPENDED"
            acknowledged[run_id] = calls[0]

        # when a backup runs while the other half's first calls are being approved
        result: list[Any] = []
        command = [sys.executable, "-m", "server", "backup", "--store", f"sqlite:///{source}", "--to", str(copy)]
        backing_up = threading.Thread(
            target=lambda: result.append(_processes.run(command, timeout=120, capture_output=True, text=True))
        )
        backing_up.start()
        for run_id, calls in runs[BEFORE:]:
            assert _approve(first, run_id, calls[0])["status"] == "SUSPENDED"
            during[run_id] = calls[0]
        backing_up.join()
    [done] = result
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "backed up" in done.stdout

    with runsgate_process(tmp_path / "second.log", RUNSGATE_STORE=f"sqlite:///{copy}") as second:
        # then a server on the copy lists every run, with every approval acknowledged before the
        # backup, and no decision the first server did not make
        listed = _listed(second)
        assert set(listed) == {run_id for run_id, _ in runs}
        for run_id, call_id in acknowledged.items():
            assert _decided(listed[run_id]) == {call_id}
            [decision] = [c["decision"] for c in listed[run_id]["toolCalls"] if c["toolCallId"] == call_id]
            assert decision["kind"] == "APPROVED"
        for run_id, call_id in during.items():
            assert _decided(listed[run_id]) <= {call_id}

        # and its suspended runs are decided: each of their waiting calls approved, each run completes
        for run_id, run in listed.items():
            waiting = [c["toolCallId"] for c in run["toolCalls"] if c["decision"] is None]
            outcomes = [_approve(second, run_id, call_id) for call_id in waiting]
            assert outcomes[-1]["status"] == "COMPLETED", outcomes[-1]
        assert _listed(second) == {}
