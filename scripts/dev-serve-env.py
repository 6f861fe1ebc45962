"""The settings ``./dev serve ARGS`` adds for a local trial: prints ``NAME=VALUE`` lines, which
``./dev serve`` exports before it starts ``runsgate serve``.

Run by ``./dev serve`` in the project's folder, in the project's environment (python-dotenv is
a dependency of pydantic-settings). A setting is added only where the user decided nothing: the
settings are read from the environment and from ``.env``, by python-dotenv's ``dotenv_values`` as
the settings loader (server/settings/core.py) reads it, names compared without case as
pydantic-settings does (so ``export RUNSGATE_API_KEYS='[...]'`` and ``RUNSGATE_API_KEYS = [...]``
count).

- ``RUNSGATE_AGENTS=runtime.demo:AGENTS`` (the demo agents, ``DEMO_AGENTS`` of the settings)
  unless ``RUNSGATE_AGENTS`` is set: ``runsgate serve`` itself serves no agents by default.
- ``RUNSGATE_AUTH=off`` unless ``RUNSGATE_AUTH`` or a credential (``RUNSGATE_API_KEYS``,
  ``RUNSGATE_JWT_SECRET``, ``RUNSGATE_JWT_JWKS_URL``) is set, and only when the host (``--host H``,
  else ``RUNSGATE_HOST``, else ``127.0.0.1``) is loopback: elsewhere the server refuses to start
  without a credential, naming the variables to set. Loopback is server/settings/security.py's
  ``is_loopback``.

The server package is not imported: importing it takes seconds.
"""

from __future__ import annotations

import ipaddress
import os
import sys

from dotenv import dotenv_values

DEMO_AGENTS = "runtime.demo:AGENTS"
DECISIONS = {"RUNSGATE_AUTH", "RUNSGATE_API_KEYS", "RUNSGATE_JWT_SECRET", "RUNSGATE_JWT_JWKS_URL"}


def _settings() -> dict[str, str]:
    """``RUNSGATE_*`` values set to something, upper-cased names; the environment wins over ``.env``."""
    found = {k.upper(): v for k, v in dotenv_values(".env").items() if v is not None and v.strip()}
    found.update({k.upper(): v for k, v in os.environ.items() if v.strip()})
    return found


def _host(args: list[str], settings: dict[str, str]) -> str:
    host = settings.get("RUNSGATE_HOST", "127.0.0.1")
    for i, arg in enumerate(args):
        if arg == "--host" and i + 1 < len(args):
            host = args[i + 1]
        elif arg.startswith("--host="):
            host = arg.removeprefix("--host=")
    return host


def _is_loopback(host: str) -> bool:
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def trial_settings(args: list[str]) -> dict[str, str]:
    """The settings to add for ``./dev serve ARGS``, by name."""
    settings = _settings()
    added = {}
    if "RUNSGATE_AGENTS" not in settings:
        added["RUNSGATE_AGENTS"] = DEMO_AGENTS
    if not DECISIONS & settings.keys() and _is_loopback(_host(args, settings)):
        added["RUNSGATE_AUTH"] = "off"
    return added


if __name__ == "__main__":
    for name, value in trial_settings(sys.argv[1:]).items():
        print(f"{name}={value}")
