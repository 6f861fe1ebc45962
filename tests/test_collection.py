"""The collected suite: every test has a node id of its own, so pytest-xdist runs each one.

pytest-xdist sends node ids to its workers; two tests with one id are one test for it, and it
runs only one of them (docs/testing.md "Parallel runs").
"""

from __future__ import annotations

import sys
from collections import Counter

import pytest

from . import _processes
from ._servers import ROOT


@pytest.mark.process
def test_no_two_collected_tests_share_a_node_id() -> None:
    # given the whole suite, collected as ./dev test collects it
    result = _processes.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    ids = [line for line in result.stdout.splitlines() if line.startswith("tests/") and "::" in line]
    assert len(ids) > 2000, result.stdout[-4000:]
    # then no node id is given to two tests
    assert {nodeid: n for nodeid, n in Counter(ids).items() if n > 1} == {}
