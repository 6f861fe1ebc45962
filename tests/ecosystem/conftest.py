"""Fixtures of the ecosystem tests: the Node tools, or a clear skip (a failure under ``CI=true``)."""

from __future__ import annotations

import pytest

from ..conftest import IN_CI
from ._node import missing_node_tools


@pytest.fixture(scope="session")
def node_tools() -> None:
    """Node and the pinned packages are there; outside CI their absence skips the test, in CI it fails it."""
    problem = missing_node_tools()
    if problem is None:
        return
    if IN_CI:
        pytest.fail(f"the ecosystem tests must run in CI: {problem}")
    pytest.skip(problem)
