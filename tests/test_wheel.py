"""runsgate as a user installs it, by the README's production install: the sdist and the wheel
built (``uv build``), ``uv.lock``'s versions exported with their hashes (``uv export``), installed
into a clean virtualenv with the hashes checked, then the wheel without dependencies; and
``runsgate serve`` from there on a SQLite file: a run started, listed and approved, then a
graceful stop. The ``openai`` extra installs and imports too (docs/testing.md "The installed
package").

The commands are the README's (``readme_install``), with ``uv pip install`` in place of the
virtualenv's ``pip install`` (the same arguments: uv reads the same requirements file and checks
the same hashes), so the check needs no new download once uv's cache has the packages; it runs
outside the repository, so nothing is imported from the source tree.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import sys
import zipfile
from pathlib import Path

import pytest

from . import _processes
from ._graphql import APPROVE, REFUND, REFUND_PROMPT, START_RUN, SUSPENDED_RUNS, data
from ._processes import scaled
from ._servers import ROOT, free_port, log_tail, server_env, wait_for_port

PRODUCT = ("storage", "runtime", "resolvers", "server")
"""The wheel's packages (pyproject.toml ``[tool.hatch.build.targets.wheel]``)."""


def readme_install() -> list[list[str]]:
    """The commands of the README's production install (the ``sh`` block of its **Install**
    item), each split as a shell splits it, comments left out.

    Raises:
        ValueError: The README has no such item or block.
    """
    readme = (ROOT / "README.md").read_text()
    item = readme[readme.index("- **Install**") :]
    block = re.search(r"```sh\n(.*?)```", item[: item.index("\n- **", 1)], re.S)
    if block is None:
        raise ValueError("the README's Install item has no sh block")
    return [shlex.split(line, comments=True) for line in block[1].splitlines() if line.strip()]


def test_the_readmes_production_install_takes_the_locks_versions_with_their_hashes() -> None:
    # the versions of uv.lock, with their hashes, exported by uv; then the project without dependencies
    assert readme_install() == [
        [
            "./dev",
            "run",
            "uv",
            "export",
            "--quiet",
            "--frozen",
            "--no-dev",
            "--no-emit-project",
            "-o",
            "requirements.txt",
        ],
        ["python3", "-m", "venv", ".venv-prod"],
        [".venv-prod/bin/pip", "install", "--require-hashes", "-r", "requirements.txt"],
        [".venv-prod/bin/pip", "install", "--no-deps", "."],
    ]


def test_the_readmes_export_step_writes_its_file_and_prints_nothing(tmp_path: Path) -> None:
    export = readme_install()[0]
    requirements = tmp_path / "requirements.txt"
    printed = _ok(_uv(), *_as_here(export[3:], requirements, ROOT), cwd=ROOT, env=_clean_env())
    assert "--hash=sha256:" in requirements.read_text()
    assert printed == ""


def _uv() -> str:
    found = os.environ.get("UV") or shutil.which("uv") or str(Path.home() / ".local" / "bin" / "uv")
    if not Path(found).exists():
        pytest.fail("uv is not installed: ./dev installs it (the wheel check builds with `uv build`)")
    return found


def _ok(*command: str | Path, timeout: float = 600, **options: object) -> str:
    result = _processes.run(list(map(str, command)), capture_output=True, text=True, timeout=timeout, **options)
    assert result.returncode == 0, f"{' '.join(map(str, command))} exited {result.returncode}:\n{result.stderr[-4000:]}"
    return str(result.stdout)


def _clean_env(**variables: str) -> dict[str, str]:
    """The test's environment without the project's virtualenv or Python path (nor runsgate settings)."""
    env = server_env(**variables)
    for name in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "UV_PROJECT_ENVIRONMENT"):
        env.pop(name, None)
    project_bin = str(ROOT / ".venv" / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != project_bin)
    return env


def _as_here(args: list[str], requirements: Path, wheel: Path) -> list[str]:
    """A README command's arguments with ``requirements.txt`` at ``requirements`` and ``.`` (the clone) as ``wheel``."""
    return [str(requirements) if arg == "requirements.txt" else str(wheel) if arg == "." else arg for arg in args]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """``(virtualenv, wheel, requirements)``: the wheel built from the sdist, installed as the README says."""
    export, _, hashed, project = readme_install()  # the README's four steps (checked by the test above)
    work = tmp_path_factory.mktemp("wheel")
    uv = _uv()
    dist = work / "dist"
    # uv build: the sdist first, then the wheel built from the unpacked sdist (so the sdist is complete)
    _ok(uv, "build", "--sdist", "--wheel", "--out-dir", dist, "--no-progress", ROOT, cwd=work, env=_clean_env())
    (wheel,) = dist.glob("runsgate-*.whl")
    assert list(dist.glob("runsgate-*.tar.gz")), list(dist.iterdir())
    requirements = work / "requirements.txt"
    _ok(uv, *_as_here(export[3:], requirements, wheel), cwd=ROOT, env=_clean_env())  # after `./dev run uv`
    venv = work / "venv"
    _ok(uv, "venv", "--python", sys.executable, "--no-project", venv, cwd=work, env=_clean_env())
    python = ["--python", str(venv / "bin" / "python")]
    for step in (hashed, project):  # `.venv-prod/bin/pip install ARGS`
        _ok(uv, "pip", "install", *python, *_as_here(step[2:], requirements, wheel), cwd=work, env=_clean_env())
    return venv, wheel, requirements


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.process
def test_the_installed_versions_are_the_locks(installed: tuple[Path, Path, Path]) -> None:
    venv, _, requirements = installed
    locked = {_canonical(n): v for n, v in re.findall(r"^([\w.-]+)==([^\s;]+)", requirements.read_text(), re.M)}
    listed = _ok(_uv(), "pip", "list", "--python", venv / "bin" / "python", "--format", "freeze", env=_clean_env())
    versions = {_canonical(n): v for n, _, v in (line.partition("==") for line in listed.splitlines()) if v}
    versions.pop("runsgate")
    assert versions == {name: locked[name] for name in versions}, "installed versions differ from uv.lock's"
    assert {"pydantic-ai-slim", "uvicorn", "websockets", "strawberry-graphql"} <= versions.keys()


@pytest.mark.process
def test_the_wheel_holds_the_product_and_no_development_code(installed: tuple[Path, Path, Path]) -> None:
    _, wheel, _ = installed
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/", 1)[0] for name in archive.namelist() if not name.startswith("runsgate-")}
    assert tops == set(PRODUCT)


@pytest.mark.process
def test_the_installed_wheel_has_no_development_dependency(installed: tuple[Path, Path, Path]) -> None:
    venv, _, _ = installed
    listed = _ok(_uv(), "pip", "list", "--python", venv / "bin" / "python", "--format", "freeze", env=_clean_env())
    names = {line.split("==", 1)[0].lower() for line in listed.splitlines() if "==" in line}
    assert "runsgate" in names
    assert not names & {"pytest", "ruff", "mypy", "gql", "schemathesis", "hypothesis", "deptry"}, names


@pytest.mark.process
def test_runsgate_serve_from_the_wheel_starts_lists_approves_and_stops(
    installed: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    venv, _, _ = installed
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "runsgate.log"
    command = [venv / "bin" / "runsgate", "serve", "--port", str(port), "--store", "sqlite:///./runsgate.db"]
    # given the installed runsgate, started outside the repository on a SQLite file
    with _processes.logged(command, log, cwd=tmp_path, env=_clean_env(RUNSGATE_AUTH="off")) as proc:
        try:
            wait_for_port(port, proc=proc)
        except (RuntimeError, TimeoutError) as exc:
            raise AssertionError(f"the installed runsgate did not start: {exc}\n{log_tail(log)}") from exc

        # when a run is started, listed and approved over HTTP
        run = data(url, None, START_RUN, input={"agentId": REFUND, "prompt": REFUND_PROMPT})["startRun"]["run"]
        listed = data(url, None, SUSPENDED_RUNS, agentId=REFUND)["suspendedRuns"]["edges"]
        call = run["toolCalls"][0]["toolCallId"]
        outcome = data(url, None, APPROVE, input={"agentId": REFUND, "runId": run["runId"], "toolCallId": call})

        # then the run was listed, the approval completed it, and it is gone from the listing
        assert [edge["node"]["runId"] for edge in listed] == [run["runId"]]
        assert outcome["approveToolCall"]["status"] == "COMPLETED", outcome
        assert data(url, None, SUSPENDED_RUNS, agentId=REFUND)["suspendedRuns"]["edges"] == []

        # and SIGTERM stops it gracefully (uvicorn ends the process by the signal once it shut
        # down), with no traceback
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=scaled(30)) in (0, -signal.SIGTERM), log_tail(log)
    assert "Application shutdown complete." in log.read_text(), log_tail(log)
    assert "Traceback" not in log.read_text(), log_tail(log)
    assert (tmp_path / "runsgate.db").is_file()


@pytest.mark.process
def test_the_openai_extra_installs_and_imports(installed: tuple[Path, Path, Path], tmp_path: Path) -> None:
    venv, wheel, _ = installed
    python = venv / "bin" / "python"
    # the README's export with the extra (as its comment says), installed with the hashes checked
    export, _, hashed, _ = readme_install()
    requirements = tmp_path / "requirements.txt"
    _ok(_uv(), *_as_here(export[3:], requirements, wheel), "--extra", "openai", cwd=ROOT, env=_clean_env())
    assert "\nopenai==" in requirements.read_text()
    _ok(_uv(), "pip", "install", "--python", python, *_as_here(hashed[2:], requirements, wheel), env=_clean_env())
    script = (
        "from pydantic_ai.models.openai import OpenAIChatModel; import server.cli.main; print(OpenAIChatModel.__name__)"
    )
    assert _ok(python, "-c", script, cwd=venv, env=_clean_env()).strip() == "OpenAIChatModel"
