"""``runsgate serve`` against a store it cannot reach (one line naming the host, exit status 3) or with
agents it cannot import or tool rules naming what no agent has (one line naming ``RUNSGATE_AGENTS`` or
``RUNSGATE_TOOL_RULES``, exit status 2)."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

from server.services import Services
from server.settings import ConfigError, Settings
from storage.mongo import store_address

from .. import _processes
from .._servers import ROOT, SERVE, free_port, server_env
from ._cli import serve_with_only

NO_AGENTS = (
    "RUNSGATE_AGENTS is not set: name the agent registry to serve, package.module:attribute "
    "(docs/writing-agents.md), or RUNSGATE_AGENTS=runtime.demo:AGENTS for the demo agents, as ./dev serve does"
)
"""Why a start without agents is refused."""


def _serve(uri: str) -> subprocess.CompletedProcess[str]:
    return _processes.run(
        [*SERVE, "--port", str(free_port())],
        cwd=ROOT,
        env=server_env(MONGODB_URI=uri, RUNSGATE_MONGODB_TIMEOUT="1", RUNSGATE_AUTH="off"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.process
@pytest.mark.parametrize("credentials", ["", "alice:s3cret-pa55@"])
def test_an_unreachable_store_at_start_is_one_line_naming_the_host_and_exit_status_3(credentials: str) -> None:
    port = free_port()  # nothing listens there
    result = _serve(f"mongodb://{credentials}127.0.0.1:{port}/runsgate?authSource=admin")
    assert result.returncode == 3, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"runsgate cannot start: the store at 127.0.0.1:{port} is unreachable ("), line
    assert line.endswith(")"), line
    assert "s3cret" not in result.stderr + result.stdout
    assert "alice" not in result.stderr + result.stdout


@pytest.mark.process
def test_a_uri_pymongo_refuses_is_a_configuration_error_with_exit_status_2() -> None:
    result = _serve("mongodb://alice:s3cret@127.0.0.1:1/bad$name")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "runsgate: invalid configuration: MONGODB_URI: Bad database name (got 'mongodb://alice:***@127.0.0.1:1/bad$name')"
    ]


@pytest.mark.parametrize(
    ("uri", "address"),
    [
        ("mongodb://127.0.0.1:27018/runsgate", "127.0.0.1:27018"),
        ("mongodb://db.internal", "db.internal:27017"),
        ("mongodb://alice:s3cret@h1:27017,h2/runsgate?replicaSet=rs0", "h1:27017,h2:27017"),
        ("mongodb://alice:sec/ret@h1:5/runsgate", "h1:5"),  # an unescaped "/" in the password
        ("mongodb+srv://alice:s3cret@cluster0.example.net/runsgate", "cluster0.example.net"),
    ],
)
def test_the_store_address_names_the_hosts_and_never_the_credentials(uri: str, address: str) -> None:
    assert store_address(uri) == address


AGENT_MODULES = {
    "missing": ("nope.mod:AGENTS", None, "cannot import 'nope.mod': No module named 'nope'"),
    "failing-inside": (
        "broken_agents:AGENTS",
        "import not_an_installed_package\n",
        "importing 'broken_agents' failed: ModuleNotFoundError: No module named 'not_an_installed_package'",
    ),
    "openai-not-installed": (
        "openai_agents:AGENTS",
        'from pydantic_ai import Agent\nAGENTS = [Agent("openai:gpt-4o-mini", name="chat")]\n',
        "Please install the `openai` package",
    ),
    "openai-not-installed, the extra to install": (
        "openai_agents:AGENTS",
        'from pydantic_ai import Agent\nAGENTS = [Agent("openai:gpt-4o-mini", name="chat")]\n',
        "(runsgate's `openai` extra installs it; see docs/configuration.md)",
    ),
}
"""Case -> (RUNSGATE_AGENTS, source of the module in a folder on PYTHONPATH or None, part of the line)."""


@pytest.mark.process
@pytest.mark.parametrize("case", list(AGENT_MODULES))
def test_an_agent_module_that_cannot_be_imported_is_one_line_naming_the_variable_and_exit_status_2(
    tmp_path: Path, case: str
) -> None:
    agents, source, expected = AGENT_MODULES[case]
    if case.startswith("openai-not-installed") and importlib.util.find_spec("openai") is not None:
        pytest.skip("the openai package is installed here")
    if source is not None:
        (tmp_path / f"{agents.partition(':')[0]}.py").write_text(source)
    result = _processes.run(
        [*SERVE, "--port", str(free_port())],
        cwd=ROOT,
        env=server_env(RUNSGATE_AGENTS=agents, RUNSGATE_AUTH="off", PYTHONPATH=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"runsgate: invalid configuration: RUNSGATE_AGENTS: agent registry path '{agents}': "), line
    assert expected in line
    assert "Uvicorn running" not in result.stdout + result.stderr


@pytest.mark.process
def test_a_registry_of_no_agents_is_one_line_naming_the_variable_and_exit_status_2(tmp_path: Path) -> None:
    # given a registry module whose agents are an empty mapping
    (tmp_path / "no_agents.py").write_text("AGENTS = {}\n")
    result = _processes.run(
        [*SERVE, "--port", str(free_port())],
        cwd=ROOT,
        env=server_env(RUNSGATE_AGENTS="no_agents:AGENTS", RUNSGATE_AUTH="off", PYTHONPATH=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # then the start stops with one line naming the variable: a server of no agents answers nothing
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "runsgate: invalid configuration: RUNSGATE_AGENTS: agent registry path 'no_agents:AGENTS': names no agents"
    ]


@pytest.mark.process
def test_a_tool_rule_naming_an_unknown_tool_is_one_line_naming_the_variable_and_exit_status_2() -> None:
    rules = '[{"tool": "issue_refnud", "scope": "refunds:approve"}]'
    result = _processes.run(
        [*SERVE, "--port", str(free_port())],
        cwd=ROOT,
        env=server_env(RUNSGATE_TOOL_RULES=rules, RUNSGATE_AUTH="off"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(
        "runsgate: invalid configuration: RUNSGATE_TOOL_RULES: rule 1 ('issue_refnud') names tool"
    ), line
    assert "not a tool of any registered agent" in line
    assert "Uvicorn running" not in result.stdout + result.stderr


def test_serve_without_runsgate_agents_is_refused_naming_the_variable_and_the_demo(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # when runsgate serve starts with no agent registry named
    status = serve_with_only(monkeypatch, tmp_path, {"RUNSGATE_AUTH": "off"}, unset=("RUNSGATE_AGENTS",))

    # then it is refused, with one line that says how to name one, or the demo agents
    assert status == 2
    assert capsys.readouterr().err.splitlines() == [f"runsgate: invalid configuration: {NO_AGENTS}"]


async def test_an_app_without_agents_is_refused_before_it_opens_its_store(tmp_path: Path) -> None:
    settings = Settings(store=f"sqlite:///{tmp_path / 'runs.db'}", auth=False, agents=None)
    with pytest.raises(ConfigError) as refused:
        async with Services(settings):
            pass
    assert str(refused.value) == f"invalid configuration: {NO_AGENTS}"
    assert not (tmp_path / "runs.db").exists()
