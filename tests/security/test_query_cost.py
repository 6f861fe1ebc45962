"""What a request costs before it runs (issue 42, part A), against a real secured server process.

A fragment bomb (each fragment spreading the one before it twice) is checked in time that grows
with its size, not with its expansion: the server answers it at once and stays responsive.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from .._graphql import post
from .._processes import scaled
from .._servers import runsgate_process
from .conftest import ADMIN, secured_env


@dataclass(frozen=True)
class Costed:
    url: str
    log: Path


@pytest.fixture
def costed(tmp_path: Path) -> Iterator[Costed]:
    """A secured server of its own (memory store), stopped after each test: a test that finds
    the server stuck leaves no stuck server to the next one."""
    log = tmp_path / "runsgate.log"
    with runsgate_process(log, **secured_env(None)) as url:
        yield Costed(url, log)


def fragment_bomb(levels: int, body: str = "id", root: str = "agents") -> str:
    """``fragment F0 on Agent { <body> }``, then ``F<i>`` spreading ``F<i-1>`` twice, up to
    ``F<levels-1>``, which ``{ <root> { ... } }`` spreads: 2^(levels-1) copies of ``body``
    once inlined, in a document of about 20 bytes a level."""
    fragments = [f"fragment F0 on Agent {{ {body} }}"] + [
        f"fragment F{i} on Agent {{ ...F{i - 1} ...F{i - 1} }}" for i in range(1, levels)
    ]
    return f"query {{ {root} {{ ...F{levels - 1} }} }}\n" + "\n".join(fragments)


def test_a_fragment_bomb_is_answered_at_once_and_the_server_stays_responsive(costed: Costed) -> None:
    # given a 40-level fragment bomb (about 1.6 KB; 2^39 copies of `id` once inlined)
    document = fragment_bomb(40)
    assert len(document) < 2000

    # when it is sent (the client waits generously: before the fix, the answer never came)
    response = post(costed.url, ADMIN, document)

    # then it is answered, as its inlined form would be: `id` merged into one field per agent
    assert response.status_code == 200, response.text
    agents = response.json()["data"]["agents"]
    assert [set(agent) for agent in agents] == [{"id"}] * len(agents)
    assert agents
    # and the server still answers its health check
    assert httpx.get(f"{costed.url}/healthz", timeout=scaled(10)).status_code == 200
