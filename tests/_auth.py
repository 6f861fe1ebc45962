"""Credentials of the tests: API keys (only their hashes go into the server's settings).

``ADMIN`` holds every scope on every run; the server tests talk through it, so the whole
GraphQL contract suite runs with authentication on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from server.auth import hash_api_key

ALL = ("runs:read", "runs:decide", "runs:start")


@dataclass(frozen=True)
class TestKey:
    """An API key and the principal it stands for."""

    __test__ = False  # not a pytest class

    name: str
    key: str
    scopes: tuple[str, ...] = ALL
    resources: tuple[str, ...] | None = None
    """``None``: every run (``"*"``)."""
    email: str | None = None
    """Its entry's ``email`` (issue 45), when set."""

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def entry(self) -> dict[str, Any]:
        """This key's ``RUNSGATE_API_KEYS`` entry."""
        entry: dict[str, Any] = {
            "name": self.name,
            "hash": hash_api_key(self.key),
            "scopes": list(self.scopes),
            "resources": "*" if self.resources is None else list(self.resources),
        }
        if self.email is not None:
            entry["email"] = self.email
        return entry


ADMIN = TestKey("test-admin", "rg_test_admin_0123456789abcdefghijklmnopqrstuvwxyz")


def api_keys_json(*keys: TestKey) -> str:
    """The ``RUNSGATE_API_KEYS`` value for ``keys``."""
    return json.dumps([key.entry() for key in keys])
