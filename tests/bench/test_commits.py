"""``bench.commits``: its reading of a trace (store calls by task, each fsync to the write that ran
last before it) and a real count on a memory and a SQLite server (no timing is asserted)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.commits import OUTSIDE, _parse_strace, measure, steps

TRACE = """\
1.000\tcall\tA\t0\tget
1.001\tsqlq\tA\t2\tSELECT document FROM run_snapshots WHERE run_id = ?
1.001\tsql\t2\t-\tSELECT document FROM run_snapshots WHERE run_id = ?
1.002\tdone\tA\t0\tget
1.010\tcall\tA\t0\trecord_decision
1.011\tsql\t1\t-\tBEGIN IMMEDIATE
1.012\tsql\t1\tA\tUPDATE run_snapshots SET document = ?
1.013\tsql\t1\tA\tINSERT INTO run_events (event_id) VALUES (?)
1.014\tsql\t1\t-\tCOMMIT
1.016\tdone\tA\t0\trecord_decision
1.020\tcall\tB\t0\trenew_claim
1.021\tcall\tC\t0\tappend_event
1.022\tsql\t1\t-\tBEGIN IMMEDIATE
1.023\tsql\t1\tB\tUPDATE run_snapshots SET claim_until = ?
1.024\tsql\t1\tC\tINSERT INTO run_events (event_id) VALUES (?)
1.025\tsql\t1\t-\tCOMMIT
1.026\tdone\tB\t0\trenew_claim
1.027\tdone\tC\t0\tappend_event
1.030\tsql\t1\tZ\tDELETE FROM run_updates WHERE at < ?
1.031\tsql\t1\t-\tCOMMIT
"""


def test_each_fsync_goes_to_the_write_whose_commit_ran_last_before_it() -> None:
    fsyncs = [(1.0145, "fdatasync x/bench.db-wal"), (1.0255, "fdatasync x/bench.db-wal"), (1.032, "fdatasync x/w")]
    found = steps(TRACE.splitlines(), fsyncs)
    assert [step.name for step in found] == ["get", "record_decision", "renew_claim", "append_event", OUTSIDE]
    get, decision, renewal, appended, outside = found
    assert (get.reads, get.commits, sum(get.fsyncs.values())) == (1, 0, 0)
    assert dict(decision.writes) == {"UPDATE run_snapshots": 1, "INSERT run_events": 1}
    assert (decision.commits, dict(decision.fsyncs)) == (1, {"fdatasync x/bench.db-wal": 1})
    # B's and C's writes shared one transaction: its COMMIT and fsync count for C's, which ran last
    assert (dict(renewal.writes), renewal.commits, sum(renewal.fsyncs.values())) == ({"UPDATE run_snapshots": 1}, 0, 0)
    assert (dict(appended.writes), appended.commits) == ({"INSERT run_events": 1}, 1)
    assert dict(appended.fsyncs) == {"fdatasync x/bench.db-wal": 1}
    # a write of no open store call
    assert (dict(outside.writes), outside.commits, dict(outside.fsyncs)) == (
        {"DELETE run_updates": 1},
        1,
        {"fdatasync x/w": 1},
    )


def test_each_mongodb_command_counts_in_its_store_call_with_its_round_trip() -> None:
    trace = [
        "1.000\tcall\tA\t0\tget",
        "1.001\tmongo\tA\tfind\trun_snapshots\t7",
        "1.003\tmongoend\t7\t2500",
        "1.004\tdone\tA\t0\tget",
        "1.010\tcall\tA\t0\tdelete_claimed",
        "1.011\tmongo\tA\tfindAndModify\trun_histories\t8",
        "1.011\tmongo\tA\tinsert\trun_updates\t9",
        "1.013\tmongoend\t9\t1000",
        "1.014\tmongoend\t8\t3000",
        "1.015\tdone\tA\t0\tdelete_claimed",
    ]
    get, deletion = steps(trace, [])
    assert (dict(get.commands), dict(get.micros), get.reads, get.commits) == (
        {"find run_snapshots": 1},
        {"find run_snapshots": 2500},
        1,
        0,
    )
    assert dict(deletion.commands) == {"findAndModify run_histories": 1, "insert run_updates": 1}
    assert dict(deletion.micros) == {"findAndModify run_histories": 3000, "insert run_updates": 1000}
    assert deletion.commits == 2


def test_strace_lines_give_the_time_and_file_of_each_sync() -> None:
    text = (
        "4242 1700000000.123456 fdatasync(7</tmp/a/bench.db-wal>) = 0\n"
        "4243 1700000000.223456 fsync(9</var/pg/pg_wal/0001>) = 0\n"
        "4243 1700000000.323456 +++ exited with 0 +++\n"
    )
    assert _parse_strace(text) == [
        (1700000000.123456, "fdatasync a/bench.db-wal"),
        (1700000000.223456, "fsync pg_wal/0001"),
    ]


@pytest.mark.process
@pytest.mark.skipif(
    shutil.which("strace") is None, reason="strace counts the fsyncs (python -m bench.commits installs it)"
)
def test_an_approval_is_counted_on_memory_and_sqlite(tmp_path: Path) -> None:
    for store in ("memory", "sqlite"):
        (tmp_path / store).mkdir()
        # a long update interval: no batch is written while the tool runs, however slow the machine;
        # a long first-text delay: the run ends before it, so its first delta goes with the outcome
        plain, keyed = measure(store, 1, tmp_path / store, update_interval=60, first_text_delay=30)
        assert not plain.keyed
        assert keyed.keyed
        names = [step.name for step in keyed.steps]
        for name in ("record_decision", "load_history", "delete_claimed"):
            assert name in names, names
        # the decision's write reserved the key, the completion's wrote its answer
        assert "reserve_idempotency_key" not in names, names
        assert "complete_idempotency_key" not in names, names
        if store == "memory":
            assert (plain.commits, plain.fsyncs, keyed.commits, keyed.fsyncs) == (0, 0, 0, 0)
        else:  # WAL, synchronous=FULL: each COMMIT syncs the WAL once, and nothing else is synced
            for approval in (plain, keyed):
                assert approval.commits >= 1
                assert approval.fsyncs == approval.commits
                synced = {name for step in approval.steps for name in step.fsyncs}
                assert synced == {"fdatasync sqlite/bench.db-wal"}, synced
            decision = next(step for step in plain.steps if step.name == "record_decision")
            assert "UPDATE run_snapshots" in decision.writes
            # the claim's resumed update is written with the decision, the others (the first text
            # delta too) with the completion: the commits are the decision (with a key's
            # reservation) and the completion (with a key's answer)
            completion = next(step for step in plain.steps if step.name == "delete_claimed")
            for step in (decision, completion):
                assert step.writes["INSERT run_updates"] == 1, step.writes
                assert step.commits == 1
            keyed_decision = next(step for step in keyed.steps if step.name == "record_decision")
            assert keyed_decision.writes["INSERT idempotency_keys"] == 1, keyed_decision.writes
            keyed_completion = next(step for step in keyed.steps if step.name == "delete_claimed")
            assert keyed_completion.writes["UPDATE idempotency_keys"] == 1, keyed_completion.writes
            assert "append_run_updates" not in [step.name for step in plain.steps], plain.steps
            assert (plain.commits, keyed.commits) == (2, 2), [(s.name, s.commits) for s in keyed.steps]


WRITES_PER_APPROVAL = {"mongo": (8, 10), "ferretdb1": (14, 18)}
"""MongoDB write commands (each its own commit) of one approval, without and with an idempotency
key: on DocumentDB (FerretDB 2.5, or ``MONGODB_URI``), whose conditional writes are atomic and take
no write lease, and on FerretDB 1.24, where every write to a run holds one (an insert and a delete
in ``run_write_locks``; docs/storage.md "Write leases")."""


COMMANDS_PER_APPROVAL = {"mongo": (10, 12), "ferretdb1": (16, 20)}
"""Every MongoDB command of one approval (reads, writes, write leases), without and with an
idempotency key, on the servers of ``WRITES_PER_APPROVAL``."""


@pytest.mark.process
@pytest.mark.mongo
@pytest.mark.skipif(
    shutil.which("strace") is None, reason="strace counts the fsyncs (python -m bench.commits installs it)"
)
@pytest.mark.parametrize("kind", ["mongo", "ferretdb1"])
def test_an_approval_is_counted_on_documentdb_and_ferretdb(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    from tests._servers import with_database

    from ..conftest import MONGO_SERVERS

    uri = with_database(request.getfixturevalue(MONGO_SERVERS[kind]))
    store = "documentdb" if kind == "mongo" else "ferretdb"
    plain, keyed = measure(store, 1, tmp_path, uri, update_interval=60, first_text_delay=30)
    names = [step.name for step in plain.steps]
    assert names == ["get", "record_decision", "load_history", "delete_claimed"], names
    leases = {step.name: step.writes.get("insert run_write_locks", 0) for step in (*plain.steps, *keyed.steps)}
    if kind == "mongo":
        assert set(leases.values()) == {0}, leases  # no write lease where conditional writes are atomic
    else:
        assert leases["record_decision"] == 1, leases  # the pending events are left to the claim's holder
        assert leases["delete_claimed"] >= 2, leases
    for approval in (plain, keyed):
        # the decision's events (`decision`, `resumed`) are appended by one insert command
        decision = next(step for step in approval.steps if step.name == "record_decision")
        assert decision.writes["insert run_events"] == 1, decision.writes
    assert (plain.commits, keyed.commits) == WRITES_PER_APPROVAL[kind], [
        (step.name, dict(step.writes)) for approval in (plain, keyed) for step in approval.steps
    ]
    # every command, reads included: the run read once before the decision (whose write claims
    # it with no read first) and its history once by the id the claim read
    assert (plain.commands, keyed.commands) == COMMANDS_PER_APPROVAL[kind], [
        (step.name, dict(step.commands)) for approval in (plain, keyed) for step in approval.steps
    ]
    assert plain.reads == 2, [(step.name, dict(step.commands)) for step in plain.steps]
