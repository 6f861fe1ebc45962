"""Node processes for the ecosystem tests: the tools of each GraphQL community, run as they ship.

The scripts beside this file (``*.mjs``) use the Node packages pinned in ``package.json`` /
``package-lock.json``, installed into ``node_modules`` by ``./dev test`` (``npm ci``, skipped when
up to date: ``scripts/install-ecosystem.sh``). pytest starts them with ``subprocess`` and talks
to them over HTTP, or reads the JSON they print.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import _processes
from .._servers import free_port, listening_process

HERE = Path(__file__).resolve().parent
NODE_MODULES = HERE / "node_modules"
OUTPUT = HERE / "output"
"""Where the tests leave what a person may want to look at (screenshots); git-ignored."""


def node_binary() -> str | None:
    return shutil.which("node")


def missing_node_tools() -> str | None:
    """Why the Node tools cannot run here, or ``None`` when they can."""
    if node_binary() is None:
        return "Node.js is not installed (node not on PATH)"
    if not (NODE_MODULES / ".package-lock.json").exists():
        return f"the Node packages are not installed: run ./dev test, or npm ci in {HERE}"
    return None


def run_node_json(script: str, *args: str, timeout: float = 180, env: dict[str, str] | None = None) -> Any:
    """Run ``node SCRIPT ARGS`` to completion (``env`` added to the environment) and parse its JSON stdout."""
    result = _processes.run(
        [node_binary() or "node", str(HERE / script), *args],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )
    assert result.returncode == 0, f"node {script} exited with {result.returncode}:\n{result.stderr[-4000:]}"
    return json.loads(result.stdout)


@contextmanager
def node_server(script: str, *args: str, log: Path) -> Iterator[str]:
    """Start ``node SCRIPT ARGS... PORT`` on a free loopback port; yield ``http://127.0.0.1:PORT``."""
    port = free_port()
    with listening_process(
        [node_binary() or "node", str(HERE / script), *args, str(port)], port, log, cwd=HERE, timeout=60
    ):
        yield f"http://127.0.0.1:{port}"
