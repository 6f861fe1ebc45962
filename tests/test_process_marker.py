"""The ``process`` marker keeps ``-m "not process"`` free of started processes (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ._servers import listening_process, runsgate_process


def test_a_test_without_the_marker_cannot_start_runsgate(tmp_path: Path) -> None:
    # given this test, which has no `process` marker
    # when it starts runsgate, or any other listening process
    # then it fails at once naming the marker, and nothing was started (no log was written)
    with (
        pytest.raises(AssertionError, match="test_a_test_without_the_marker_cannot_start_runsgate starts runsgate"),
        runsgate_process(tmp_path / "runsgate.log"),
    ):
        pass
    with (
        pytest.raises(AssertionError, match="without the `process` marker"),
        listening_process(["node", "server.mjs"], 1, tmp_path / "node.log"),
    ):
        pass
    assert list(tmp_path.iterdir()) == []
