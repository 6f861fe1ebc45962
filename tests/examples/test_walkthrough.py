"""The README's client examples, run against a real server process (memory store, demo agents).

``examples/walkthrough_gql.py`` (Python, gql) and ``examples/walkthrough.sh`` (curl, python3's
json module) each start a refund run, list it, approve it with an edited amount and see it
finished, then decide a run's two refunds in one ``decideToolCalls``; both print the same lines.
Against a server with authentication on, they send the key in ``RUNSGATE_TOKEN`` as a bearer token.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from .. import _processes
from .._auth import ADMIN, api_keys_json
from .._servers import ROOT, runsgate_process

EXPECTED = [
    r"started run (?P<run>[0-9a-f]{32}): SUSPENDED",
    r'waiting on issue_refund \{"order_id": 1042, "amount": 49\.9\}',
    r"refund-agent has 1 suspended run\(s\) in thread t-1",
    r"listed: True",
    r'approved with \{"order_id": 1042, "amount": 25\}: '
    r"COMPLETED with output Refund of \$25\.00 for order 1042 issued\.",
    r"still listed: False",
    r"started run (?P<run>[0-9a-f]{32}) with 2 pending calls",
    r"decided in bulk: SUSPENDED, COMPLETED with output Refund of \$49\.90 for order 1042 issued\. "
    r"The refund for order 1043 was not issued: The user declined this tool call\. Reason: Refunded by phone",
]
"""The lines each example prints, in order."""

COMMANDS = {
    "gql": [sys.executable, "examples/walkthrough_gql.py"],
    "curl": ["bash", "examples/walkthrough.sh"],
}


def walk(client: str, url: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    """The example of ``client`` run against ``url``, with ``RUNSGATE_TOKEN`` set to ``token`` (unset
    for ``None``); its output as text."""
    return _processes.run(
        [*COMMANDS[client], url],
        cwd=ROOT,
        env=_environment(token),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def assert_printed(lines: list[str], expected: list[str]) -> None:
    """Each of ``lines`` matches the pattern of ``expected`` in its place, and there are as many."""
    assert len(lines) == len(expected), lines
    for line, pattern in zip(lines, expected, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)


@pytest.fixture(scope="module")
def graphql_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("examples") / "runsgate.log"
    with runsgate_process(log) as url:
        yield f"{url}/graphql"


@pytest.mark.parametrize("client", list(COMMANDS))
def test_the_walkthrough_example_starts_lists_approves_edited_and_decides_in_bulk(
    graphql_url: str, client: str
) -> None:
    # when the example runs against the server
    result = walk(client, graphql_url)

    # then it succeeds and prints each step's line
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert_printed(result.stdout.splitlines(), EXPECTED)


def test_the_curl_example_fails_when_the_server_answers_with_errors(graphql_url: str) -> None:
    # given a URL where no GraphQL server answers
    wrong = graphql_url.removesuffix("/graphql") + "/nowhere"

    # when the curl example runs, then it stops with a non-zero status before printing a step
    result = _processes.run(
        ["bash", "examples/walkthrough.sh", wrong], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode != 0
    assert "started run" not in result.stdout


@pytest.fixture(scope="module")
def graphql_url_with_auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server with authentication on, which knows one key: ``ADMIN``'s (every scope, every run)."""
    log = tmp_path_factory.mktemp("examples") / "runsgate.log"
    with runsgate_process(log, RUNSGATE_AUTH="on", RUNSGATE_API_KEYS=api_keys_json(ADMIN)) as url:
        yield f"{url}/graphql"


def _environment(token: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RUNSGATE_TOKEN"}
    return env if token is None else env | {"RUNSGATE_TOKEN": token}


@pytest.mark.parametrize("client", list(COMMANDS))
def test_the_walkthrough_example_sends_the_token_in_runsgate_token(graphql_url_with_auth: str, client: str) -> None:
    # when the example runs against a server with authentication on, with a key in RUNSGATE_TOKEN
    result = walk(client, graphql_url_with_auth, ADMIN.key)

    # then it does every step, as with authentication off
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert_printed(result.stdout.splitlines(), EXPECTED)
    assert ADMIN.key not in result.stdout + result.stderr


@pytest.mark.parametrize("client", list(COMMANDS))
@pytest.mark.parametrize("token", [None, "rg_not_a_key"], ids=["no-token", "wrong-token"])
def test_the_walkthrough_example_without_a_good_token_stops_naming_runsgate_token(
    graphql_url_with_auth: str, client: str, token: str | None
) -> None:
    # when the example runs against a server with authentication on, without a key it knows
    result = walk(client, graphql_url_with_auth, token)

    # then it stops before a step, saying the server refused it and what to set
    assert result.returncode != 0
    assert "started run" not in result.stdout
    assert "401" in result.stderr, result.stderr
    assert "RUNSGATE_TOKEN" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr


@pytest.fixture(scope="module")
def graphql_url_refusing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server whose rule makes a refund over $100 need a review claim first: the bulk step's
    decline of order 1043 ($120) is refused."""
    log = tmp_path_factory.mktemp("examples") / "runsgate.log"
    rules = '[{"tool": "issue_refund", "argument": "amount", "above": 100, "requireReviewClaim": true}]'
    with runsgate_process(log, RUNSGATE_TOOL_RULES=rules) as url:
        yield f"{url}/graphql"


@pytest.mark.parametrize("client", list(COMMANDS))
def test_the_walkthrough_example_says_which_decision_was_refused_and_why(
    graphql_url_refusing: str, client: str
) -> None:
    # when the example runs against a server that refuses the bulk step's second decision
    result = walk(client, graphql_url_refusing)

    # then the steps before it print as usual, and it stops naming the refused decision, its code
    # and the server's message, without a traceback
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stdout.splitlines()
    assert_printed(lines[:-1], EXPECTED[:-1])
    assert lines[-1].startswith("decideToolCalls refused decision 2: REVIEW_CLAIM_REQUIRED: "), lines[-1]
    assert "claimReview it first" in lines[-1], lines[-1]
    assert "Traceback" not in result.stderr, result.stderr
