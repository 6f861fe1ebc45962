"""The ``./dev`` commands a newcomer runs first: help, ``run``, ``serve``'s authentication choice,
``ferretdb`` and ``documentdb``."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from pymongo import MongoClient

from . import _processes
from ._documentdb import ferretdb2_binary
from ._graphql import REFUND, REFUND_PROMPT, START_RUN, data
from ._processes import scaled
from ._servers import ROOT, ferretdb_binary, free_port, wait_for_port
from .conftest import IN_CI

DEV = str(ROOT / "dev")
SERVE_ENV = str(ROOT / "scripts" / "dev-serve-env.py")
"""What ``./dev serve ARGS`` runs to choose the settings of a local trial: ``NAME=VALUE`` lines it exports."""
DEMO_AGENTS = "runtime.demo:AGENTS"
BARE_PATH = "/usr/local/bin:/usr/bin:/bin"
"""A fresh shell's PATH: without ``~/.local/bin``, where ``./dev`` installs uv."""


@pytest.mark.parametrize("asking", ["help", "-h", "--help"])
def test_help_lists_the_commands_and_exits_0(asking: str) -> None:
    result = _processes.run([DEV, asking], capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, result.stderr
    for command in ("serve", "run CMD", "ferretdb", "documentdb", "test", "schema", "bench"):
        assert f"./dev {command}" in result.stdout


def test_an_unknown_command_exits_2_naming_it() -> None:
    result = _processes.run([DEV, "sevre"], capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 2
    assert "unknown command: sevre" in result.stderr
    assert "./dev serve" in result.stderr


@pytest.mark.process
def test_run_runs_a_command_in_the_project_environment_without_uv_on_path() -> None:
    env = {**os.environ, "PATH": BARE_PATH}
    result = _processes.run(
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
    with _processes.logged(
        [DEV, "ferretdb", "--port", str(port), "--data-dir", str(tmp_path / "data")],
        output,
        env={**os.environ, "FERRETDB_BIN": binary},
    ) as proc:
        _serve_ferretdb_until_sigterm(proc, port, output, tmp_path)
        # and SIGTERM (as Ctrl-C) to ./dev alone stopped FerretDB with it: nothing listens any more
        # (before the block's end stops what is left of the group)
        assert proc.returncode == 0, output.read_text()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()


def _serve_ferretdb_until_sigterm(proc: subprocess.Popen[bytes], port: int, output: Path, tmp_path: Path) -> None:
    try:
        wait_for_port(port, proc=proc)
        deadline = time.monotonic() + scaled(10)  # printed once FerretDB listens
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
        proc.terminate()  # the leader only: ./dev passes it on to FerretDB
        proc.wait(timeout=scaled(15))


@pytest.mark.process
@pytest.mark.mongo
def test_documentdb_prints_the_uri_to_use_and_serves_mongodb_until_stopped(tmp_path: Path) -> None:
    try:
        binary = ferretdb2_binary()
    except RuntimeError as exc:
        if IN_CI:
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    port = free_port()
    output = tmp_path / "dev.out"
    data = Path(tempfile.mkdtemp(prefix="runsgate-dev-documentdb-"))  # pytest's own folders are closed to postgres
    try:
        for attempt in ("first start: initdb", "second start: the same data"):
            with _processes.logged(
                [DEV, "documentdb", "--port", str(port), "--data-dir", str(data)],
                output,
                grace=scaled(30),
                env={**os.environ, "FERRETDB2_BIN": binary},
            ) as proc:
                wait_for_port(port, timeout=scaled(90), proc=proc)
                deadline = time.monotonic() + scaled(10)  # printed once FerretDB listens
                while (line := f"MONGODB_URI=mongodb://127.0.0.1:{port}/runsgate ./dev serve") not in (
                    lines := output.read_text().splitlines()
                ) and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert line in lines, (attempt, lines)
                with MongoClient(f"mongodb://127.0.0.1:{port}/runsgate", serverSelectionTimeoutMS=10_000) as client:
                    if attempt.startswith("first"):
                        client.runsgate.probe.insert_one({"_id": "dev-documentdb"})
                    assert client.runsgate.probe.find_one({"_id": "dev-documentdb"}) == {"_id": "dev-documentdb"}
                proc.terminate()  # the leader only, as Ctrl-C: ./dev passes it on to FerretDB and PostgreSQL
                proc.wait(timeout=scaled(30))
                # SIGTERM stopped FerretDB and PostgreSQL with it: nothing listens any more (before
                # the block's end stops what is left of the group)
                assert proc.returncode == 0, output.read_text()
                with pytest.raises(ConnectionRefusedError):
                    socket.create_connection(("127.0.0.1", port), timeout=2).close()
            assert not (data / "postgres" / "postmaster.pid").exists(), attempt
    finally:
        shutil.rmtree(data, ignore_errors=True)


def _trial_settings(tmp_path: Path, dotenv: str | None, *args: str, **variables: str) -> dict[str, str]:
    """The settings ``./dev serve ARGS`` exports, run in ``tmp_path`` with ``.env`` holding
    ``dotenv`` and exactly ``variables`` as the ``RUNSGATE_*`` environment."""
    if dotenv is not None:
        (tmp_path / ".env").write_text(dotenv)
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("RUNSGATE_")} | variables
    result = _processes.run(
        [sys.executable, SERVE_ENV, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return dict(line.split("=", 1) for line in result.stdout.splitlines())


def _turns_auth_off(tmp_path: Path, dotenv: str | None, *args: str, **variables: str) -> bool:
    """Whether ``./dev serve ARGS`` would turn authentication off, run in ``tmp_path`` with ``.env``
    holding ``dotenv`` and exactly ``variables`` as the ``RUNSGATE_*`` environment."""
    return _trial_settings(tmp_path, dotenv, *args, **variables).get("RUNSGATE_AUTH") == "off"


@pytest.mark.parametrize(
    "dotenv",
    [
        "RUNSGATE_API_KEYS='[]'\n",
        'export RUNSGATE_API_KEYS=\'[{"name": "alice"}]\'\n',
        'RUNSGATE_API_KEYS = [{"name": "alice"}]\n',
        "  RUNSGATE_JWT_SECRET=abc\n",
        "# local\nrunsgate_jwt_jwks_url=https://issuer.example/jwks.json\n",
        'RUNSGATE_AUTH="on"\n',
    ],
)
def test_serve_leaves_authentication_on_when_dotenv_configures_it_in_any_form_the_settings_read(
    tmp_path: Path, dotenv: str
) -> None:
    assert not _turns_auth_off(tmp_path, dotenv)


@pytest.mark.parametrize("variable", ["RUNSGATE_AUTH", "RUNSGATE_API_KEYS", "RUNSGATE_JWT_SECRET"])
def test_serve_leaves_authentication_on_when_the_environment_configures_it(tmp_path: Path, variable: str) -> None:
    assert not _turns_auth_off(tmp_path, None, **{variable: "x"})


@pytest.mark.parametrize(
    ("dotenv", "args", "variables"),
    [
        (None, (), {}),
        ("# RUNSGATE_API_KEYS=[]\nRUNSGATE_PORT=4001\n", ("--port", "4001"), {}),
        (None, ("--host", "::1"), {}),
        (None, ("--host=localhost",), {"RUNSGATE_HOST": "0.0.0.0"}),
        ("RUNSGATE_HOST=127.0.0.2\n", (), {}),
    ],
)
def test_serve_turns_authentication_off_on_loopback_when_nothing_configures_it(
    tmp_path: Path, dotenv: str | None, args: tuple[str, ...], variables: dict[str, str]
) -> None:
    assert _turns_auth_off(tmp_path, dotenv, *args, **variables)


@pytest.mark.parametrize(
    ("dotenv", "args", "variables"),
    [
        (None, ("--host", "0.0.0.0"), {}),
        (None, ("--host=192.0.2.7",), {}),
        (None, (), {"RUNSGATE_HOST": "0.0.0.0"}),
        ("RUNSGATE_HOST=::\n", (), {}),
    ],
)
def test_serve_leaves_authentication_on_for_a_host_that_is_not_loopback(
    tmp_path: Path, dotenv: str | None, args: tuple[str, ...], variables: dict[str, str]
) -> None:
    assert not _turns_auth_off(tmp_path, dotenv, *args, **variables)


@pytest.mark.parametrize(("dotenv", "args"), [(None, ()), ("RUNSGATE_API_KEYS='[]'\n", ("--host", "0.0.0.0"))])
def test_serve_serves_the_demo_agents_when_nothing_names_agents(
    tmp_path: Path, dotenv: str | None, args: tuple[str, ...]
) -> None:
    assert _trial_settings(tmp_path, dotenv, *args)["RUNSGATE_AGENTS"] == DEMO_AGENTS


@pytest.mark.parametrize(
    ("dotenv", "variables"),
    [
        (None, {"RUNSGATE_AGENTS": "my_agents:AGENTS"}),
        ("RUNSGATE_AGENTS=my_agents:AGENTS\n", {}),
        ("export runsgate_agents = 'my_agents:AGENTS'\n", {}),
    ],
)
def test_serve_leaves_the_agents_to_runsgate_agents_when_it_is_set(
    tmp_path: Path, dotenv: str | None, variables: dict[str, str]
) -> None:
    assert "RUNSGATE_AGENTS" not in _trial_settings(tmp_path, dotenv, **variables)


@pytest.mark.process
def test_serve_starts_the_demo_agents_with_authentication_off_and_says_so(tmp_path: Path) -> None:
    if (ROOT / ".env").exists():
        pytest.skip("this clone has a .env, which may configure what this test leaves unset")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNSGATE_") and k != "MONGODB_URI"}
    port = free_port()
    output = tmp_path / "dev.out"
    # when ./dev serve starts, as the README's first command, with nothing configured
    with _processes.logged([DEV, "serve", "--port", str(port)], output, env=env | {"PATH": BARE_PATH}) as proc:
        wait_for_port(port, proc=proc)
        # then a refund run starts without a token
        url = f"http://127.0.0.1:{port}"
        started = data(url, None, START_RUN, input={"agentId": REFUND, "prompt": REFUND_PROMPT})["startRun"]
        assert started["status"] == "SUSPENDED", started
    # and the server said it serves the demo agents
    said = "runsgate serves the agents of RUNSGATE_AGENTS=runtime.demo:AGENTS: refund-agent, support-supervisor, "
    assert said in output.read_text(), output.read_text()[-3000:]


@pytest.mark.process
def test_serve_on_a_public_host_without_credentials_asks_for_one() -> None:
    if (ROOT / ".env").exists():
        pytest.skip("this clone has a .env, which configures what this test leaves unset")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNSGATE_") and k != "MONGODB_URI"}
    result = _processes.run(
        [DEV, "serve", "--host", "0.0.0.0", "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env | {"PATH": BARE_PATH},
    )
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("runsgate: invalid configuration: RUNSGATE_AUTH is on but no credential is configured")


@pytest.mark.parametrize(
    ("args", "skips"),
    [
        (["-m", "not process"], True),
        (["-q", "-m", "not process and not mongo", "tests/server"], True),
        (["-mnot process"], True),
        ([], False),
        (["-q", "tests/test_dev.py"], False),
        (["-m", "process"], False),
        (["-m", "not process", "-m", "mongo"], False),
    ],
)
def test_test_installs_node_and_chromium_unless_the_process_tests_are_deselected(args: list[str], skips: bool) -> None:
    # ./dev test skips the Node and Chromium installs when selects_not_process "$@" holds
    function = _processes.run(
        ["sed", "-n", "/^selects_not_process() {/,/^}/p", DEV], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    assert function.strip().endswith("}")
    script = f'{function}\nif selects_not_process "$@"; then echo skip; else echo install; fi'
    result = _processes.run(["bash", "-c", script, "dev", *args], capture_output=True, text=True, timeout=30)
    assert result.stdout.strip() == ("skip" if skips else "install"), result.stderr
    assert 'if ! selects_not_process "$@"; then' in Path(DEV).read_text()


@pytest.mark.parametrize(
    ("workers", "args", "expected"),
    [
        (None, [], f"-n {len(os.sched_getaffinity(0)) + 1} --dist loadfile"),  # auto by default
        ("0", ["-q"], ""),
        ("3", ["-q", "tests/server"], "-n 3 --dist loadfile"),
        ("auto", [], f"-n {len(os.sched_getaffinity(0)) + 1} --dist loadfile"),
        ("3", ["-n", "2"], ""),
        ("3", ["-n2"], ""),
        ("3", ["--numprocesses=2"], ""),
        ("3", ["-p", "no:xdist"], ""),
    ],
)
def test_test_runs_on_the_workers_runsgate_test_workers_asks_for(
    workers: str | None, args: list[str], expected: str
) -> None:
    # ./dev test passes worker_args' words to pytest before the user's own arguments
    result = _worker_args(workers, args)
    assert (result.returncode, result.stdout.strip()) == (0, expected), result.stderr
    assert 'exec uv run --frozen --no-sync pytest "${workers[@]}" "$@"' in Path(DEV).read_text()


def test_test_refuses_a_workers_setting_that_is_not_a_number() -> None:
    result = _worker_args("three", [])
    assert result.returncode == 2
    assert "RUNSGATE_TEST_WORKERS must be a number of workers or auto, got 'three'" in result.stderr


def _worker_args(workers: str | None, args: list[str]) -> subprocess.CompletedProcess[str]:
    function = _processes.run(
        ["sed", "-n", "/^worker_args() {/,/^}/p", DEV], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    assert function.strip().endswith("}")
    env = {k: v for k, v in os.environ.items() if k != "RUNSGATE_TEST_WORKERS"}
    if workers is not None:
        env["RUNSGATE_TEST_WORKERS"] = workers
    script = f'set -eu\n{function}\nworker_args "$@"'
    return _processes.run(["bash", "-c", script, "dev", *args], capture_output=True, text=True, timeout=30, env=env)
