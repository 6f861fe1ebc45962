"""Fixtures of the subscription tests: Node and the pinned npm packages of this folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def node() -> str:
    """The ``node`` binary, with this folder's ``package-lock.json`` installed (``./dev test`` runs
    ``npm ci`` here when needed)."""
    binary = shutil.which("node")
    if binary is None:
        pytest.fail("node is not installed: ./dev test installs it")
    if not (HERE / "node_modules" / "graphql-ws").is_dir():
        pytest.fail(f"the npm packages of {HERE} are not installed: run ./dev test (npm ci there)")
    return binary
