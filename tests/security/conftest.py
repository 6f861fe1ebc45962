"""Real runsgate processes with authentication on, for the security tests.

Each server is ``python -m server serve`` on 127.0.0.1 with the API keys below, an HS256 JWT
secret (``JWT_SECRET``), the demo
agents and a per-tool rule: approving ``issue_refund`` with an ``amount`` above 40 needs
``refunds:approve`` (the demo refund is 49.90). The MongoDB-backed one uses a fresh database
that the tests also read directly, to check that rejected requests wrote nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .._auth import ALL, TestKey, api_keys_json
from .._servers import runsgate_process, with_database

ADMIN = TestKey(
    "sec-admin", "rg_sec_admin_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", (*ALL, "refunds:approve", "webhooks:read")
)
ALICE = TestKey("alice", "rg_alice_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", (*ALL, "refunds:approve"), ("tenant-a",))
BOB = TestKey("bob", "rg_bob_ccccccccccccccccccccccccccccccccccccccccc", (*ALL, "refunds:approve"), ("tenant-b",))
CAROL = TestKey("carol", "rg_carol_dddddddddddddddddddddddddddddddddddddd", ALL, ("tenant-a",))
"""Like alice but without ``refunds:approve``: may decline refunds, not approve them."""
READER = TestKey("reader", "rg_reader_eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee", ("runs:read",))
DECIDER = TestKey(
    "decider-a", "rg_decider_ffffffffffffffffffffffffffffffffffff", ("runs:decide", "refunds:approve"), ("tenant-a",)
)
STARTER = TestKey("starter", "rg_starter_gggggggggggggggggggggggggggggggggggg", ("runs:start",))
PRINCIPALS = [ADMIN, ALICE, BOB, CAROL, READER, DECIDER, STARTER]

JWT_SECRET = "matrix-jwt-secret-0123456789abcdefghijklmnopqrstuvwxyz"
"""HS256 secret of the secured servers: the matrix also runs with JWTs (expired ones included)."""

TOOL_RULES = json.dumps([{"tool": "issue_refund", "scope": "refunds:approve", "argument": "amount", "above": 40}])


@dataclass(frozen=True)
class Server:
    url: str
    """Base URL, e.g. ``http://127.0.0.1:18123``."""
    mongodb_uri: str | None
    """The database the server uses, or ``None`` for the memory store."""
    log: Path


def secured_env(mongodb_uri: str | None, **extra: str) -> dict[str, str]:
    """The settings of a secured test server."""
    env = {
        "RUNSGATE_AUTH": "on",
        "RUNSGATE_API_KEYS": api_keys_json(*PRINCIPALS),
        "RUNSGATE_TOOL_RULES": TOOL_RULES,
        "RUNSGATE_JWT_SECRET": JWT_SECRET,
        "RUNSGATE_GRAPHIQL": "false",
        **extra,
    }
    if mongodb_uri is not None:
        env["MONGODB_URI"] = mongodb_uri
    return env


@pytest.fixture(scope="package", params=["memory", pytest.param("mongo", marks=pytest.mark.mongo)])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A secured server on each store in turn."""
    uri = with_database(request.getfixturevalue("mongodb_server")) if request.param == "mongo" else None
    log = tmp_path_factory.mktemp("secured") / "runsgate.log"
    with runsgate_process(log, **secured_env(uri)) as url:
        yield Server(url, uri, log)


@pytest.fixture(scope="package")
def mongo_server(mongodb_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A secured server on MongoDB (FerretDB), whose database the tests read directly."""
    uri = with_database(mongodb_server)
    log = tmp_path_factory.mktemp("secured-mongo") / "runsgate.log"
    with runsgate_process(log, **secured_env(uri, RUNSGATE_LOG_LEVEL="INFO")) as url:
        yield Server(url, uri, log)
