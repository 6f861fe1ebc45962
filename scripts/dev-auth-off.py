"""Whether ``./dev serve ARGS`` may turn authentication off: exits 0 if so, 1 if not.

Run by ``./dev serve`` in the project's folder, in the project's environment (python-dotenv is
a dependency of pydantic-settings). Authentication stays as configured when the user decided
it: ``RUNSGATE_AUTH`` or a credential (``RUNSGATE_API_KEYS``, ``RUNSGATE_JWT_SECRET``,
``RUNSGATE_JWT_JWKS_URL``) set in the environment or in ``.env``, read by python-dotenv's
``dotenv_values`` as the settings loader (server/settings/core.py) reads it, names compared without
case as pydantic-settings does (so ``export RUNSGATE_API_KEYS='[...]'`` and
``RUNSGATE_API_KEYS = [...]`` count). It also stays on when the host (``--host H``, else
``RUNSGATE_HOST``, else ``127.0.0.1``) is not loopback: the server then refuses to start without a
credential, naming the variables to set. Loopback is server/settings/security.py's
``is_loopback`` (not imported: importing the server package takes seconds).
"""

from __future__ import annotations

import ipaddress
import os
import sys

from dotenv import dotenv_values

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


def main(args: list[str]) -> int:
    settings = _settings()
    if DECISIONS & settings.keys():
        return 1
    return 0 if _is_loopback(_host(args, settings)) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
