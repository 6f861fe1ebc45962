"""``bench.listing_totals`` at a tiny size, so it cannot rot (no timing is asserted): a SQLite file
and a DocumentDB database seeded by ``runsgate seed``, each served by a real ``python -m
bench.serve``, every scenario answered (a full page, or every run when fewer) in one round."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.listing_totals import SCENARIOS, main


@pytest.mark.process
@pytest.mark.mongo
def test_the_listing_totals_bench_runs_at_a_tiny_size(
    tmp_path: Path, mongodb_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--sqlite", "40,120", "--documentdb", "40", "--documentdb-uri", mongodb_server, "--files", str(tmp_path)]
    assert main([*argv, "--rounds", "1", "--per-round", "1"]) == 0

    printed = capsys.readouterr().out
    assert "| sqlite | 120 | after |" in printed
    assert "| documentdb | 40 | after |" in printed
    growth = next(line for line in printed.splitlines() if line.startswith("- sqlite after, 120 / 40 runs: "))
    assert [part.rsplit(" ", 1)[0] for part in growth.split(": ", 1)[1].split(", ")] == list(SCENARIOS)
    ratios = next(line for line in printed.splitlines() if line.startswith("- sqlite after, 40 runs, queue / listing"))
    assert [part.rsplit(" ", 1)[0] for part in ratios.split(": ", 1)[1].split(", ")] == [
        "page+total",
        "thread page+total",
        "resource page+total",
    ]
