"""runsgate as a real process: ``python -m server serve`` on a free port (for restart / config tests)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from .._servers import ROOT, free_port, wait_for_port

SERVE = [sys.executable, "-m", "server", "serve"]


def server_env(**variables: str) -> dict[str, str]:
    """The test's environment without runsgate settings, plus ``variables``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNSGATE_") and k != "MONGODB_URI"}
    env.update(variables)
    return env


@contextmanager
def runsgate_process(log: Path, **variables: str) -> Iterator[str]:
    """Start ``python -m server serve`` (cwd: the repository); yield its base URL once /healthz answers.

    The process is terminated (SIGTERM, uvicorn's graceful shutdown) when the block ends.
    """
    port = free_port()
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [*SERVE, "--port", str(port)],
            cwd=ROOT,
            env=server_env(RUNSGATE_LOG_LEVEL="WARNING", **variables),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        try:
            wait_for_port(port, timeout=30, proc=proc)
            base_url = f"http://127.0.0.1:{port}"
            _wait_healthy(base_url, proc)
        except (RuntimeError, TimeoutError) as exc:
            raise AssertionError(f"runsgate did not start: {exc}\n{log.read_text()[-3000:]}") from exc
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_healthy(base_url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}")
        try:
            if httpx.get(f"{base_url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{base_url}/healthz did not answer 200 in {timeout} s")
