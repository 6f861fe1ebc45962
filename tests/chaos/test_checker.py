"""The chaos checker's ``stray run`` rule (docs/chaos.md "The checker"): a stored run that no start
answered to the driver, a top-level one or a sub-run whose supervisor is not one of the driver's
runs, is a violation; the driver's runs and their sub-runs are not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chaos.agents import APPROVE, SUPERVISOR
from chaos.checker import Checker
from chaos.driver import Driver


def _node(run_id: str, parent: str | None = None) -> dict[str, Any]:
    return {"runId": run_id, "status": "SUSPENDED", "parentRunId": parent, "createdAt": "2026-12-02T04:00:00Z"}


def test_a_listed_run_that_no_start_answered_is_a_stray_run(tmp_path: Path) -> None:
    # given the driver started r1 (chaos-approve) and s1 (a supervisor, whose sub-run is s1-sub)
    driver = Driver(["http://127.0.0.1:1"], seed=1)
    driver.runs = {"r1": APPROVE, "s1": SUPERVISOR}
    checker = Checker(driver, tmp_path / "ledger.jsonl")
    listing = {
        "r1": _node("r1"),
        "s1-sub": _node("s1-sub", parent="s1"),
        "r2": _node("r2"),  # a second run stored by a repeated start
        "gone-sub": _node("gone-sub", parent="gone"),  # its supervisor's start failed after storing it
    }

    # when the checker reads chaos-approve's listing
    checker.check_strays(listing)

    # then the two runs nobody was answered are violations, the others are not
    assert sorted((v.run_id, v.rule) for v in checker.violations) == [
        ("gone-sub", "stray run"),
        ("r2", "stray run"),
    ]
    assert "a sub-run of gone" in next(v.detail for v in checker.violations if v.run_id == "gone-sub")
