"""Starting ``runsgate serve`` on a busy machine: ``scripts/cpu-load.py`` tops the load up to twice
the core count while the server starts; where other work loads the machine beyond that, the
bounds grow in proportion (docs/testing.md "A busy machine").

- ``--workers 2``: both workers start and answer, and uvicorn's supervisor kills neither
  (its worker health check waits ``RUNSGATE_WORKER_HEALTHCHECK_TIMEOUT``).
- An unreachable MongoDB stops the start after ``RUNSGATE_MONGODB_TIMEOUT``, not after the
  agents and the app were imported: the store is checked first.
- A port already in use: exit status 4, with one line of its own, before anything says ready.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .. import _processes
from .._graphql import REFUND, SUSPENDED_RUNS, data
from .._processes import scaled
from .._servers import ROOT, free_port, log_tail, runsgate_servers, server_env

pytestmark = pytest.mark.process

RUNSGATE = str(Path(sys.executable).with_name("runsgate"))
"""The installed ``runsgate`` entry point (a spawned worker re-imports it as its main module)."""


TARGET_LOAD = 2 * (os.cpu_count() or 1)
"""The load the targets name: twice the core count (issue 25)."""


@pytest.fixture
def cpu_load() -> Iterator[float]:
    """Keep the machine at ``TARGET_LOAD`` for the test's length (``scripts/cpu-load.py``).

    Yields the factor a bound of the target is multiplied by: 1 unless other work (the suite's
    other workers, another session) already loads the machine beyond the target, in which case
    the generator adds nothing and the bound grows by the excess (the same CPU share per process).
    """
    background = os.getloadavg()[0]
    processes = max(0, TARGET_LOAD - round(background))
    factor = max(1.0, background / TARGET_LOAD)
    if processes == 0:
        yield factor
        return
    with _processes.started(
        [sys.executable, str(ROOT / "scripts" / "cpu-load.py"), "--processes", str(processes)],
        stdout=subprocess.PIPE,
        text=True,
    ) as load:
        assert load.stdout is not None
        assert load.stdout.readline().startswith("cpu-load:")
        time.sleep(2)  # the load is on before the server starts
        yield factor


def _ready_workers(log: Path) -> set[str]:
    return set(re.findall(r"runsgate ready: .*?instance=(\S+?)[\"\s]", log.read_text()))


def test_two_workers_start_and_answer_under_load_and_none_is_killed(cpu_load: float, tmp_path: Path) -> None:
    log = tmp_path / "runsgate.log"
    started = time.monotonic()
    # when `runsgate serve --workers 2` starts while the machine is busy
    with runsgate_servers(
        [log],
        [RUNSGATE, "serve", "--workers", "2"],
        RUNSGATE_STORE=f"sqlite:///{tmp_path / 'runsgate.db'}",
        RUNSGATE_LOG_LEVEL="INFO",
        RUNSGATE_LOG_FORMAT="json",
    ) as (server,):
        # then both workers are ready within 60 s of the start (at the target load)
        deadline = started + scaled(60) * cpu_load
        while len(_ready_workers(log)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(_ready_workers(log)) == 2, log_tail(log)
        # and both answer, still under load, for 10 s more, with no worker killed or replaced
        for _ in range(20):
            assert data(server.url, None, SUSPENDED_RUNS, agentId=REFUND)["suspendedRuns"]["edges"] == []
            time.sleep(0.5)
        text = log.read_text()
        assert not re.search(r"died|killed|failed to start|Terminated child|not ready in time", text), log_tail(log)
        assert len(re.findall(r"Started server process", text)) == 2, log_tail(log)
        assert len(_ready_workers(log)) == 2, log_tail(log)


def test_an_unreachable_mongodb_fails_the_start_within_its_timeout_under_load(cpu_load: float, tmp_path: Path) -> None:
    # given a MongoDB URI nobody answers at, a 2 s timeout, and agents that take 60 s to import
    # (as the whole app does on a loaded machine)
    timeout = 2.0
    env = server_env(
        MONGODB_URI=f"mongodb://127.0.0.1:{free_port()}/runsgate",
        RUNSGATE_MONGODB_TIMEOUT=str(timeout),
        RUNSGATE_AGENTS="tests.server._slow_agents:AGENTS",
        RUNSGATE_AUTH="off",
    )
    # when `runsgate serve` starts under load
    began = time.monotonic()
    result = _processes.run(
        [RUNSGATE, "serve", "--port", str(free_port())], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
    )
    took = time.monotonic() - began

    # then it exits with status 3 saying why, after the timeout and the start of Python, long
    # before the agents could have been imported
    assert result.returncode == 3, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("runsgate cannot start: the store at 127.0.0.1:")
    assert "Traceback" not in result.stderr
    assert took < timeout + scaled(20) * cpu_load, took


@pytest.mark.parametrize(
    "options", [[], ["--workers", "2", "--store", "sqlite:///./runsgate.db"]], ids=["one-process", "two-workers"]
)
def test_a_busy_port_exits_4_with_its_own_line_before_anything_says_ready(tmp_path: Path, options: list[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", free_port()))
        taken.listen()
        port = taken.getsockname()[1]
        # when runsgate is started on a port another process listens on
        result = _processes.run(
            [RUNSGATE, "serve", "--port", str(port), *options],
            cwd=tmp_path,
            env=server_env(RUNSGATE_AUTH="off", RUNSGATE_LOG_LEVEL="INFO", RUNSGATE_LOG_FORMAT="json"),
            capture_output=True,
            text=True,
            timeout=120,
        )
    # then it exits with status 4 and one line naming the address, and nothing said "ready"
    output = result.stdout + result.stderr
    assert result.returncode == 4, output
    line = (
        f"runsgate cannot start: 127.0.0.1:{port} cannot be bound (Address already in use); "
        "choose another port with --port or RUNSGATE_PORT"
    )
    assert line in result.stderr.splitlines(), output
    assert "ready" not in output.replace(line, ""), output
    assert "Traceback" not in output
