"""``bench.approval_cost`` at a tiny size (no timing asserted): an approval's CPU time holds the
model's run, and the profile paused during the model's run holds none of pydantic-ai's run."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai import models

from bench.approval_cost import _profiled, cpu_ms, fdatasync_ms, paired, targets
from tests._servers import ROOT

models.ALLOW_MODEL_REQUESTS = False


def _runs_agent(table: dict[tuple[str, int, str], object]) -> bool:
    return any("pydantic_ai" in filename and name == "run" for filename, _, name in table)


async def test_the_model_run_is_part_of_the_approval() -> None:
    approval, model = await cpu_ms(approvals=3, rounds=1)
    assert 0 < model < approval


async def test_the_profile_without_the_model_has_no_agent_run() -> None:
    full = await _profiled(3, without_model=False)
    rest = await _profiled(3, without_model=True)
    assert _runs_agent(full)
    assert not _runs_agent(rest)
    assert any(filename.endswith("approve_tool_call.py") for filename, _, _ in rest)


def test_fdatasync_is_timed_in_the_folder(tmp_path: Path) -> None:
    assert fdatasync_ms(tmp_path, samples=3) > 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.process
def test_the_targets_are_measured_in_paired_rounds() -> None:
    lines = targets(rounds=2, per_round=2)
    assert lines[0].startswith("- approve -> completed p50 over HTTP, 2 rounds of 2, the order rotating (memory/SQLite")
    rounds = lines[0].split("): ")[1].split(", ")  # memory/SQLite ms, each round
    assert len(rounds) == 2
    assert all(float(m) > 0 and float(q) > 0 for m, q in (r.split("/") for r in rounds)), rounds
    verdicts = [line for line in lines if line.startswith("- target ")]
    assert len(verdicts) == 2
    assert all(line.split(": ")[1].split(" (")[0] in ("met", "not met") for line in verdicts), verdicts


@pytest.mark.process
def test_documentdb_is_timed_in_the_same_rounds() -> None:
    lines = targets(rounds=2, per_round=2, documentdb=True)
    assert "(memory/SQLite/DocumentDB ms per round)" in lines[0]
    rounds = lines[0].split("): ")[1].split(", ")
    assert all(len(r.split("/")) == 3 and all(float(ms) > 0 for ms in r.split("/")) for r in rounds), rounds
    verdict = lines[-1]
    assert verdict.startswith("- target DocumentDB p50 <= 2 x SQLite p50 (issue 44): DocumentDB p50 ")
    assert verdict.rsplit(": ", 1)[1] in ("met", "not met"), verdict


@pytest.mark.process
@pytest.mark.mongo
def test_documentdb_versions_are_timed_in_paired_rounds(mongodb_server: str) -> None:
    # this checkout served twice, as "before" and "after", each on a seeded database of its own
    lines = paired(ROOT, rounds=2, per_round=2, seeded=6, uri=mongodb_server)
    assert lines[0].startswith("- DocumentDB approve -> completed p50 over HTTP, 2 rounds of 2, 6 seeded runs")
    rounds = lines[0].split("): ")[1].split(", ")
    assert all(len(r.split("/")) == 2 and all(float(ms) > 0 for ms in r.split("/")) for r in rounds), rounds
    assert float(lines[1].rsplit(": ", 1)[1]) > 0, lines
