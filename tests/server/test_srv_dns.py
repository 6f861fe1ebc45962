"""A ``mongodb+srv://`` URI whose DNS records cannot be read is an unreachable store, as a host
that does not answer is (docs/operations.md "Exit statuses"): ``runsgate serve`` exits 3 with its
one line, ``runsgate seed`` exits 1 with one line, never a traceback nor an "invalid
configuration" (a DNS outage is not a wrong setting). ``.invalid`` never resolves (RFC 2606)."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.cli.main import main

from ._cli import serve_with_only

URI = "mongodb+srv://alice:hunter2@nonexistent.invalid/runsgate"


def test_serve_with_srv_records_that_cannot_be_read_exits_3_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status = serve_with_only(
        monkeypatch, tmp_path, {"RUNSGATE_AUTH": "off", "RUNSGATE_MONGODB_TIMEOUT": "2"}, "--store", URI
    )
    err = capsys.readouterr().err
    assert status == 3, err
    assert err.startswith("runsgate cannot start: the store at nonexistent.invalid is unreachable (its DNS records")
    assert err.count("\n") == 1, err
    assert "hunter2" not in err


def test_seed_with_srv_records_that_cannot_be_read_exits_1_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RUNSGATE_MONGODB_TIMEOUT", "2")
    status = main(["seed", "--runs", "1", "--store", URI])
    err = capsys.readouterr().err
    assert status == 1, err
    assert err.startswith("runsgate seed: MongoDB is unreachable: its DNS records could not be read"), err
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    assert "hunter2" not in err
