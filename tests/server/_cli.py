"""Running the ``runsgate serve`` command in-process with an environment of the test's choosing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import uvicorn
from uvicorn.supervisors import Multiprocess

from server.cli.main import main
from server.settings import DEMO_AGENTS


def serve_with_only(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    variables: dict[str, str],
    *args: str,
    unset: tuple[str, ...] = (),
) -> int:
    """``runsgate serve ARGS`` with exactly ``variables`` as its settings (no other ``RUNSGATE_*``,
    no ``MONGODB_URI``, no ``.env``: it runs in ``tmp_path``); returns its exit status.

    Unless ``variables`` or ``ARGS`` name a port, it is ``RUNSGATE_PORT=0`` (any free one): the
    command binds its port before it checks the store, and 4000 may be taken on this machine.
    Unless ``variables`` name them, the agents are the demo agents (``RUNSGATE_AGENTS``, which the
    command requires). The variables named in ``unset`` are left unset."""
    monkeypatch.chdir(tmp_path)
    for key in [k for k in os.environ if k.startswith("RUNSGATE_") or k == "MONGODB_URI"]:
        monkeypatch.delenv(key)
    if "RUNSGATE_PORT" not in variables and "--port" not in args:
        monkeypatch.setenv("RUNSGATE_PORT", "0")
    if "RUNSGATE_AGENTS" not in variables:
        monkeypatch.setenv("RUNSGATE_AGENTS", DEMO_AGENTS)
    for key in unset:
        monkeypatch.delenv(key, raising=False)
    for key, value in variables.items():
        monkeypatch.setenv(key, value)

    def never_serve(*_: object, **__: object) -> None:
        raise AssertionError(f"runsgate serve accepted {variables} {args} and started serving")

    # a refusal this helper expects, missed, fails the test at once instead of serving forever
    monkeypatch.setattr(uvicorn.Server, "run", never_serve)  # a test's own Server subclass may override it
    monkeypatch.setattr(Multiprocess, "run", never_serve)
    return main(["serve", *args])
