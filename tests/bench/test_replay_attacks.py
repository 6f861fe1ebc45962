"""``bench.replay_attacks`` at a tiny size, so it cannot rot (no timing or memory is asserted)."""

from __future__ import annotations

import pytest

from bench.replay_attacks import main


@pytest.mark.process
def test_the_replay_attack_bench_runs_each_attack_against_a_real_server() -> None:
    rows = main(
        [
            "--stores",
            "memory",
            "--runs",
            "4",
            "--prompt-kib",
            "1",
            "--sockets",
            "1,2",
            "--subscriptions",
            "2",
            "--hold",
            "1",
            "--settle",
            "0.2",
        ]
    )

    assert [(r.attack, r.sockets, r.operations) for r in rows] == [
        ("events", 1, 2),
        ("events", 2, 4),
        ("updates", 1, 2),
        ("updates", 2, 4),
    ]
    assert all(r.healthz_answers > 0 for r in rows)
    assert all(r.held.sockets >= 1 for r in rows)  # the server's own gauges were read
