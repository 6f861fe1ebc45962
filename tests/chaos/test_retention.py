"""``python -m chaos --retention``: the instances get it as every retention setting; a run whose
checker window (the workload, the drain, the checks, the driver's key replays) is not inside it
is refused at the start with one line and exit status 2; a run inside it says so in report.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.__main__ import main, parse, planned_window, run
from chaos.cluster import Cluster
from chaos.driver import GIVE_UP_AFTER

from .._processes import scaled
from .._servers import READY_WAIT

RETENTIONS = (
    "RUNSGATE_EVENT_RETENTION",
    "RUNSGATE_IDEMPOTENCY_KEY_RETENTION",
    "RUNSGATE_WEBHOOK_DELIVERY_RETENTION",
    "RUNSGATE_RUN_UPDATES_RETENTION",
)


def test_the_instances_get_the_retention(tmp_path: Path) -> None:
    env = Cluster(tmp_path, retention=900.0).env()
    assert {name: env[name] for name in RETENTIONS} == dict.fromkeys(RETENTIONS, "900.0")
    assert not set(RETENTIONS) & set(Cluster(tmp_path).env())


def test_the_window_holds_the_workload_the_drain_and_the_key_replays() -> None:
    assert planned_window(parse(["--seconds", "1000", "--run-seconds", "30", "--drain", "20"])) == 1000 + 30 + 20 + 120
    assert planned_window(parse(["--runs", "80", "--concurrency", "8", "--run-seconds", "60"])) == 10 * 60 + 60 + 120
    assert planned_window(parse(["--seconds", "1", "--run-seconds", "1", "--drain", "1"])) == GIVE_UP_AFTER


@pytest.mark.parametrize("argv", [["--retention", "200", "--seconds", "5"], ["--retention", "3", "--seconds", "1"]])
def test_a_window_outside_the_retention_is_refused_in_one_line(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run([*argv, "--workdir", str(tmp_path / "chaos")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("chaos: "), err
    assert err.count("\n") == 1, err
    assert not (tmp_path / "chaos").exists()  # nothing was started


@pytest.mark.process
async def test_a_run_inside_the_retention_reports_it(tmp_path: Path) -> None:
    args = [
        "--retention", "600", "--seconds", "2", "--instances", "1", "--concurrency", "2", "--run-seconds", "8",
        "--drain", "5", "--fault-every", "0", "--workdir", str(tmp_path), "--ready-within", str(scaled(READY_WAIT)),
    ]  # fmt: skip
    report = await main(parse(args))

    assert report["runs"] > 0
    assert report["violationCount"] == 0, report["violationsByRule"]
    saved = json.loads((tmp_path / "report.json").read_text())
    assert (saved["retention"], saved["retentionSet"], saved["windowInsideRetention"]) == (600.0, True, True)
    assert 0 < saved["windowSeconds"] < saved["plannedWindow"] < 600
