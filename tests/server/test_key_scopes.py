"""The scopes of an API key, checked where they are written and where they are read:
``runsgate new-key`` (a subprocess) refuses an empty ``--scopes`` or ``--resources`` and a
misspelt scope of runsgate's own (``runs:decid``: "did you mean"), and notes a custom scope (a
tool rule must name it); ``runsgate serve`` refuses a key holding an unknown ``runs:`` scope
(exit status 2) and warns of a key's custom scope no tool rule names.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from server.settings import ApiKeyConfig, Settings
from server.settings.core import DEMO_AGENTS

from .. import _processes
from .._auth import ADMIN, TestKey
from .._servers import ROOT, server_env
from ._cli import serve_with_only
from .test_auth import running

INVALID = "runsgate: invalid configuration: "


def _new_key(*options: str) -> subprocess.CompletedProcess[str]:
    return _processes.run(
        [sys.executable, "-m", "server", "new-key", "--name", "x", *options],
        cwd=ROOT,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.process
def test_new_key_refuses_a_misspelt_scope_of_runsgates_own_saying_which_was_meant() -> None:
    result = _new_key("--scopes", "runs:read,runs:decid")
    assert result.returncode == 2, result.stdout
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        f"{INVALID}--scopes: 'runs:decid' is not a scope of runsgate (runs:decide, runs:read, runs:start, "
        "webhooks:read); did you mean 'runs:decide'?"
    ]


@pytest.mark.process
@pytest.mark.parametrize(("option", "said"), [("--scopes", "no scope"), ("--resources", "no resource")])
def test_new_key_refuses_an_empty_list_of_scopes_or_resources(option: str, said: str) -> None:
    for empty in ("", " , "):
        result = _new_key(option, empty)
        assert result.returncode == 2, result.stdout
        assert result.stdout == ""
        [line] = result.stderr.strip().splitlines()
        assert line.startswith(f"{INVALID}{option}: {said}"), line


@pytest.mark.process
def test_new_key_accepts_a_custom_scope_noting_that_a_tool_rule_must_name_it() -> None:
    result = _new_key("--scopes", "runs:read,runs:decide,refunds:approve")
    assert result.returncode == 0, result.stderr
    entry = json.loads(result.stdout.split("RUNSGATE_API_KEYS entry: ", 1)[1])
    assert entry["scopes"] == ["runs:read", "runs:decide", "refunds:approve"]
    assert result.stderr.strip().splitlines() == [
        "runsgate: note: 'refunds:approve' is not one of runsgate's own scopes: it grants something only "
        'where a tool rule of RUNSGATE_TOOL_RULES names it ("scope": "refunds:approve")'
    ]


def test_serve_refuses_a_key_holding_an_unknown_scope_of_runsgates_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = {**ADMIN.entry(), "scopes": ["runs:read", "runs:decid"]}
    status = serve_with_only(monkeypatch, tmp_path, {"RUNSGATE_API_KEYS": json.dumps([entry])})
    assert status == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"{INVALID}RUNSGATE_API_KEYS[0].scopes.1: "), line
    assert "'runs:decid' is not a scope of runsgate" in line
    assert "did you mean 'runs:decide'?" in line


async def test_serve_warns_of_a_keys_custom_scope_no_tool_rule_names(caplog: pytest.LogCaptureFixture) -> None:
    ops = TestKey("ops", "rg_test_ops_0123456789abcdefghijklmnopqrstuvwxyz", ("runs:read", "refunds:aprove"))
    settings = Settings(
        agents=DEMO_AGENTS,
        mongodb_uri=None,
        api_keys=[ApiKeyConfig.model_validate(k.entry()) for k in (ADMIN, ops)],
        tool_rules=[{"tool": "issue_refund", "scope": "refunds:approve"}],
    )
    with caplog.at_level(logging.WARNING, logger="runsgate"):
        async with running(settings):
            pass
    said = [r.getMessage() for r in caplog.records if "no tool rule names" in r.getMessage()]
    assert said == [
        "the scope 'refunds:aprove' of API key ops is not one of runsgate's own scopes and no tool rule names "
        "it: it grants nothing (tool rules name refunds:approve)"
    ]
