"""The ``./dev`` commands a newcomer runs first: help, ``run`` and ``ferretdb``."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
from pymongo import MongoClient

from ._servers import ROOT, ferretdb_binary, free_port, stop_process, wait_for_port
from .conftest import IN_CI

DEV = str(ROOT / "dev")
BARE_PATH = "/usr/local/bin:/usr/bin:/bin"
"""A fresh shell's PATH: without ``~/.local/bin``, where ``./dev`` installs uv."""


@pytest.mark.parametrize("asking", ["help", "-h", "--help"])
def test_help_lists_the_commands_and_exits_0(asking: str) -> None:
    result = subprocess.run([DEV, asking], capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, result.stderr
    for command in ("serve", "run CMD", "ferretdb", "test", "schema", "bench"):
        assert f"./dev {command}" in result.stdout


def test_an_unknown_command_exits_2_naming_it() -> None:
    result = subprocess.run([DEV, "sevre"], capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 2
    assert "unknown command: sevre" in result.stderr
    assert "./dev serve" in result.stderr


@pytest.mark.process
def test_run_runs_a_command_in_the_project_environment_without_uv_on_path() -> None:
    env = {**os.environ, "PATH": BARE_PATH}
    result = subprocess.run(
        [DEV, "run", "python", "-c", "import server, sys; print(sys.prefix)"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()) == ROOT / ".venv"


@pytest.mark.process
@pytest.mark.mongo
def test_ferretdb_prints_the_uri_to_use_and_serves_mongodb_until_stopped(tmp_path: Path) -> None:
    binary = ferretdb_binary()
    if binary is None:
        if IN_CI:
            pytest.fail("FerretDB could not be built")
        pytest.skip("FerretDB could not be built")
    port = free_port()
    output = tmp_path / "dev.out"
    with open(output, "wb") as out:
        proc = subprocess.Popen(
            [DEV, "ferretdb", "--port", str(port), "--data-dir", str(tmp_path / "data")],
            env={**os.environ, "FERRETDB_BIN": binary},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_port(port, timeout=30, proc=proc)
        deadline = time.monotonic() + 10  # printed once FerretDB listens
        while (line := f"MONGODB_URI=mongodb://127.0.0.1:{port}/runsgate ./dev serve") not in (
            lines := output.read_text().splitlines()
        ) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert line in lines, lines
        with MongoClient(f"mongodb://127.0.0.1:{port}/runsgate", serverSelectionTimeoutMS=10_000) as client:
            client.runsgate.probe.insert_one({"_id": "dev-ferretdb"})
            assert client.runsgate.probe.find_one({"_id": "dev-ferretdb"}) == {"_id": "dev-ferretdb"}
        assert (tmp_path / "data" / "runsgate.sqlite").is_file()
    finally:
        stop_process(proc)
    # and SIGTERM (as Ctrl-C) stopped FerretDB with it: nothing listens any more
    assert proc.returncode == 0, output.read_text()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
