"""Invalid configuration fails at start with a message naming the variable (docs/configuration.md).

The two ``python -m server serve`` processes start together (each spends seconds importing);
more cases go through the same CLI entry point in-process.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .. import _processes
from .._processes import scaled
from .._servers import ROOT, SERVE, free_port, server_env
from ._cli import serve_with_only

PROCESS_CASES = {"RUNSGATE_PORT": "abc", "MONGODB_URI": "http://x"}
"""Variable -> invalid value, each given alone to a real ``python -m server serve`` (on a free
port, unless the port is the invalid value)."""


@pytest.fixture(scope="module")
def serve_results() -> dict[str, tuple[int, str, str]]:
    """``(exit status, stdout, stderr)`` of ``python -m server serve`` with each invalid variable."""
    procs = {
        variable: _processes.start(
            SERVE,
            cwd=ROOT,
            env=server_env(**{"RUNSGATE_PORT": str(free_port()), variable: value}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for variable, value in PROCESS_CASES.items()
    }
    results = {}
    try:
        for variable, proc in procs.items():
            out, err = proc.communicate(timeout=scaled(60))
            results[variable] = (proc.returncode, out, err)
    finally:
        for proc in procs.values():
            _processes.stop(proc)
    return results


@pytest.mark.process
@pytest.mark.parametrize("variable", list(PROCESS_CASES))
def test_serve_with_an_invalid_variable_exits_2_naming_it(
    serve_results: dict[str, tuple[int, str, str]], variable: str
) -> None:
    # given an environment where one runsgate variable is invalid
    # when `python -m server serve` starts
    status, out, err = serve_results[variable]

    # then it stops at once with status 2, and stderr names the variable without a traceback
    assert status == 2, (out, err)
    assert variable in err
    assert "Traceback" not in err
    assert "Uvicorn running" not in out + err


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"RUNSGATE_PORT": "70000"}, ["RUNSGATE_PORT"]),
        ({"RUNSGATE_MAX_PAGE_SIZE": "0"}, ["RUNSGATE_MAX_PAGE_SIZE"]),
        ({"RUNSGATE_AGENTS": "no-colon"}, ["RUNSGATE_AGENTS"]),
        ({"RUNSGATE_LOG_FORMAT": "xml"}, ["RUNSGATE_LOG_FORMAT"]),
        ({"RUNSGATE_TRACING": "sometimes"}, ["RUNSGATE_TRACING"]),
        ({"RUNSGATE_METRICS": "maybe"}, ["RUNSGATE_METRICS"]),
        ({"MONGODB_URI": "postgres://db/x"}, ["MONGODB_URI"]),
        ({"RUNSGATE_SUBSCRIPTION_POLL_INTERVAL": "0"}, ["RUNSGATE_SUBSCRIPTION_POLL_INTERVAL"]),
        ({"RUNSGATE_SUBSCRIPTION_LOOKBACK": "-1"}, ["RUNSGATE_SUBSCRIPTION_LOOKBACK"]),
        ({"RUNSGATE_WS_CONNECTION_INIT_TIMEOUT": "soon"}, ["RUNSGATE_WS_CONNECTION_INIT_TIMEOUT"]),
        ({"RUNSGATE_PORT": "abc", "MONGODB_URI": "http://x"}, ["RUNSGATE_PORT", "MONGODB_URI"]),
        ({"RUNSGATE_MAX_BULK_DECISIONS": "0"}, ["RUNSGATE_MAX_BULK_DECISIONS"]),
        ({"RUNSGATE_BULK_CONCURRENCY": "0"}, ["RUNSGATE_BULK_CONCURRENCY"]),
        (
            {"RUNSGATE_TOOL_RULES": '[{"tool": "issue_refund", "argument": "amount", "above": 5}]'},
            ["RUNSGATE_TOOL_RULES"],
        ),
    ],
)
def test_the_serve_command_names_every_invalid_variable(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    variables: dict[str, str],
    named: list[str],
) -> None:
    # when the serve command runs in an environment (and no .env file) with invalid variables
    status = serve_with_only(monkeypatch, tmp_path, variables)

    # then it returns 2 before serving, naming each invalid variable on stderr
    out, err = capsys.readouterr()
    assert status == 2
    for variable in named:
        assert variable in err
    assert "Uvicorn running" not in out + err


def _refusal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str, **env: str
) -> str:
    """stderr of ``runsgate serve ARGS`` with exactly ``env``, which must refuse it with status 2."""
    status = serve_with_only(monkeypatch, tmp_path, env, *args)
    err = capsys.readouterr().err
    assert status == 2, err
    return err


@pytest.mark.parametrize(
    "variables",
    [
        {"RUNSGATE_STORE": "postgres://db/x"},
        {"MONGODB_URI": "http://x"},
        {"RUNSGATE_AGENTS": "no-colon"},
        {"RUNSGATE_WEBHOOKS": '[{"url": "ftp://x", "secret": "whsec_x", "events": ["run.suspended"]}]'},
        {"RUNSGATE_TOOL_RULES": '[{"tool": "issue_refund", "onExpiry": "approve"}]'},
    ],
)
def test_configuration_errors_do_not_carry_pydantics_prefix(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, variables: dict[str, str]
) -> None:
    err = _refusal(monkeypatch, capsys, tmp_path, **variables)
    assert "invalid configuration: " in err
    assert "Value error" not in err
    assert "Assertion failed" not in err


@pytest.mark.parametrize(
    ("variables", "shown"),
    [
        (
            {"RUNSGATE_PORT": "abc"},
            "RUNSGATE_PORT: Input should be a valid integer, unable to parse string as an integer (got 'abc')",
        ),
        ({"RUNSGATE_LOG_FORMAT": "xml"}, "RUNSGATE_LOG_FORMAT: Input should be 'auto', 'json' or 'text' (got 'xml')"),
        ({"RUNSGATE_STORE": "postgres://db/x"}, "(got 'postgres://db/x')"),
        (
            {"RUNSGATE_MAX_PAGE_SIZE": "0"},
            "RUNSGATE_MAX_PAGE_SIZE: Input should be greater than or equal to 1 (got '0')",
        ),
        (
            {"RUNSGATE_TOOL_RULES": '[{"tool": "issue_refund", "scope": "refunds:approve", "approvals": 0}]'},
            "RUNSGATE_TOOL_RULES[0].approvals: Input should be greater than or equal to 1 (got 0)",
        ),
        # a MongoDB URL is shown without its password
        ({"MONGODB_URI": "http://alice:hunter2@db:27017/x"}, "(got 'http://alice:***@db:27017/x')"),
    ],
)
def test_configuration_errors_show_the_refused_value(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    variables: dict[str, str],
    shown: str,
) -> None:
    err = _refusal(monkeypatch, capsys, tmp_path, **variables)
    assert shown in err
    assert "hunter2" not in err


@pytest.mark.parametrize(
    ("variables", "secret"),
    [
        ({"RUNSGATE_JWT_SECRET": "short-hunter2"}, "hunter2"),
        (
            {
                "RUNSGATE_API_KEYS": '[{"name": "a", "hash": "sha256:hunter2", "scopes": ["runs:read"], '
                '"resources": "*"}]'
            },
            "hunter2",
        ),
        ({"RUNSGATE_API_KEYS": "[not json hunter2"}, "hunter2"),
        (
            {
                "RUNSGATE_WEBHOOKS": '[{"url": "https://hooks.example/x", "secret": "hunter2", '
                '"events": ["run.suspended"]}]'
            },
            "hunter2",
        ),
        (
            {
                "RUNSGATE_WEBHOOKS": '[{"url": "https://hooks.example/x", "secret": "whsec_aHVudGVyMg==", '
                '"events": ["nope"]}]'
            },
            "aHVudGVyMg",
        ),
        ({"MONGODB_URI": "mongodb://alice:hunter2@db:27017/x?appname=a&retryWrites=maybe"}, "hunter2"),
        ({"RUNSGATE_STORE": "mongodb://alice:hunter2@db:27017/x", "MONGODB_URI": "mongodb://db/y"}, "hunter2"),
    ],
)
def test_configuration_errors_never_show_a_secret(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    variables: dict[str, str],
    secret: str,
) -> None:
    status = serve_with_only(monkeypatch, tmp_path, variables)
    err = capsys.readouterr().err
    assert status in (2, 3), err
    assert secret not in err
    assert "invalid configuration" in err or "cannot start" in err


@pytest.mark.parametrize(("option", "value"), [("--store", "sqlite://"), ("--port", "70000")])
def test_an_invalid_command_line_option_is_named_as_the_option(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, option: str, value: str
) -> None:
    err = _refusal(monkeypatch, capsys, tmp_path, option, value)
    assert f"invalid configuration: {option}: " in err
    assert f"(got '{value}')" in err or f"(got {value})" in err
    assert "RUNSGATE_STORE" not in err
    assert "RUNSGATE_PORT" not in err


def _spellings(value: float) -> set[str]:
    """How docs/configuration.md may write a bound: ``10000``, ``10,000``, ``64 KiB``, ``1 GiB``."""
    spellings = {str(value), f"{value:,}"}
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if isinstance(value, int) and value >= size and value % size == 0:
            spellings.add(f"{value // size} {unit}")
            break
    return spellings


def test_every_bounded_setting_documents_its_range() -> None:
    """A setting with an upper bound says its range in its row of docs/configuration.md
    (``1 to 10,000``, or ``more than 0, at most 60`` for an open lower bound), so a value refused
    at start is never a surprise."""
    from server.settings import Settings

    rows = {}
    for line in (ROOT / "docs" / "configuration.md").read_text().splitlines():
        if line.startswith("| `"):
            rows[line.split("`")[1]] = line
    missing = []
    for name, field in Settings.model_fields.items():
        upper = next((m.le for m in field.metadata if getattr(m, "le", None) is not None), None)
        if upper is None:
            continue
        lower = next((m.ge for m in field.metadata if getattr(m, "ge", None) is not None), None)
        above = next((m.gt for m in field.metadata if getattr(m, "gt", None) is not None), None)
        variable = f"RUNSGATE_{name.upper()}"
        row = rows.get(variable, "")
        if above is not None:
            ranges = {f"more than {lo}, at most {hi}" for lo in _spellings(above) for hi in _spellings(upper)}
        else:
            ranges = {f"{lo} to {hi}" for lo in _spellings(lower or 0) for hi in _spellings(upper)}
        if not any(text in row for text in ranges):
            missing.append(f"{variable}: {sorted(ranges)[0]}")
    assert not missing, missing


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("RUNSGATE_LOG_LEVEL", "LOUD", "Input should be 'DEBUG', 'INFO', 'WARNING', 'ERROR' or 'CRITICAL'"),
        ("RUNSGATE_MODEL", "bogus", "pydantic-ai cannot use this model: Unknown model: bogus"),
        ("RUNSGATE_EVENT_RETENTION", "1e12", "Input should be less than or equal to 3155760000"),
        ("RUNSGATE_CLAIM_TTL", "inf", "Input should be a finite number"),
    ],
)
def test_a_value_the_server_could_not_use_later_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    variable: str,
    value: str,
    says: str,
) -> None:
    """A log level logging does not know once crashed the start with a traceback; a model
    pydantic-ai does not know failed only at the first run; a retention past Python's dates
    stopped every sweep pass. Each is one line at start now, with exit status 2."""
    err = _refusal(monkeypatch, capsys, tmp_path, **{"RUNSGATE_AUTH": "off", variable: value})
    assert err.count("\n") == 1, err
    assert err.startswith(f"runsgate: invalid configuration: {variable}: {says}"), err
    assert f"(got {value!r})" in err
