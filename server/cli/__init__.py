"""The command line, ``runsgate`` (also ``python -m server``): its entry point ``main``
(``server.cli.main``) and its commands ``serve`` (``server.cli.serve``), ``seed``
(``server.cli.seed``), ``backup`` (``server.cli.backup``) and ``new-key``. The package itself holds
what every command shares: how a refusal begins and names a refused value."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..settings import Settings

INVALID = "runsgate: invalid configuration: "
"""How every refusal with exit status 2 begins (one line on stderr)."""


def store_setting(option: str | None, settings: Settings) -> str | None:
    """What named the store in use, as a refusal names it: ``--store`` (``option``, the command
    line's), else ``RUNSGATE_STORE``, else ``MONGODB_URI``; ``None`` for the default memory store."""
    if option:
        return "--store"
    if settings.store:
        return "RUNSGATE_STORE"
    return "MONGODB_URI" if settings.mongodb_uri else None


def refused(setting: str, why: str, value: str) -> str:
    """``SETTING: why (got VALUE)``, the refused value shown as every configuration error shows it,
    a URL's password masked (``server.settings.describe_error``)."""
    from ..settings import describe_error

    return describe_error({"type": "value_error", "loc": (), "msg": why, "input": value}, setting)


__all__ = ["INVALID", "refused", "store_setting"]
