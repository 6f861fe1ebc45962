"""GraphiQL in a real browser: headless Chromium (Debian's) runs a query on runsgate's /graphql page.

``graphiql.mjs`` drives ``/usr/bin/chromium`` with playwright-core (no browser download), in a
fresh profile: it types a ``suspendedRuns`` query into GraphiQL's editor, runs it and reads the
result pane. The page must work offline: every file it loads comes from runsgate itself. The
screenshot is left in ``tests/ecosystem/output/`` (git-ignored).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from .._servers import runsgate_process
from ..conftest import IN_CI
from ._node import OUTPUT, run_node_json

pytestmark = pytest.mark.usefixtures("node_tools")

CHROMIUM = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")

START_RUN = """
mutation Start($agentId: ID!, $prompt: String!) {
  startRun(input: {agentId: $agentId, prompt: $prompt}) {
    __typename
    ... on RunOutcome { runId status }
    ... on UserError { code message }
  }
}
"""

TYPED_QUERY = """{
  suspendedRuns(agentId: "refund-agent") {
    totalCount
    nodes { runId status toolCalls { toolName args } }
  }
}"""


@pytest.fixture(scope="module")
def chromium() -> str:
    """Debian's Chromium (``./dev test`` installs it); its absence skips outside CI and fails in CI."""
    if os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    problem = f"Chromium is not installed at {CHROMIUM} (./dev test installs Debian's chromium package)"
    if IN_CI:
        pytest.fail(problem)
    pytest.skip(problem)


def _start(base_url: str, agent_id: str, prompt: str) -> str:
    response = httpx.post(
        f"{base_url}/graphql",
        json={"query": START_RUN, "variables": {"agentId": agent_id, "prompt": prompt}},
        timeout=30,
    )
    outcome: dict[str, Any] = response.json()["data"]["startRun"]
    assert outcome["__typename"] == "RunOutcome", outcome
    assert outcome["status"] == "SUSPENDED"
    run_id: str = outcome["runId"]
    return run_id


def test_graphiql_runs_a_suspended_runs_query_in_chromium(chromium: str, tmp_path: Path) -> None:
    with runsgate_process(tmp_path / "runsgate.log") as base_url:
        # given two suspended refund runs and a weather run (another agent's)
        refunds = [_start(base_url, "refund-agent", f"Please refund order {n}") for n in (1042, 1043)]
        weather = _start(base_url, "weather-agent", "What's the weather like?")

        # when a person opens /graphql in Chromium, types the query and runs it
        OUTPUT.mkdir(exist_ok=True)
        screenshot = OUTPUT / "graphiql-suspended-runs.png"
        screenshot.unlink(missing_ok=True)
        seen = run_node_json(
            "graphiql.mjs", f"{base_url}/graphql", str(screenshot), TYPED_QUERY, env={"CHROMIUM_BIN": chromium}
        )

    # then the result pane shows the refund agent's two runs, and only them
    connection = seen["result"]["data"]["suspendedRuns"]
    assert connection["totalCount"] == 2
    assert sorted(node["runId"] for node in connection["nodes"]) == sorted(refunds)
    for node in connection["nodes"]:
        assert node["status"] == "SUSPENDED"
        assert node["toolCalls"][0]["toolName"] == "issue_refund"
    for run_id in refunds:
        assert run_id in seen["visible"]
    assert weather not in seen["visible"]
    # and the page ran without errors, loading nothing from outside runsgate
    assert seen["pageErrors"] == []
    origin = urlsplit(base_url).netloc
    assert seen["requests"], "the page made no request"
    assert [url for url in seen["requests"] if urlsplit(url).netloc != origin] == []
    assert any("/static/graphiql/graphiql@" in url for url in seen["requests"])
    # and the screenshot is a PNG
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


GRAPHIQL_KEY = "rg_graphiql_browser_0123456789abcdefghijklmnopqrstuv"


def test_graphiql_keeps_the_bearer_token_only_in_the_page_never_in_storage(chromium: str, tmp_path: Path) -> None:
    from .._auth import TestKey, api_keys_json

    key = TestKey("graphiql-user", GRAPHIQL_KEY)
    with runsgate_process(
        tmp_path / "runsgate.log", RUNSGATE_AUTH="on", RUNSGATE_API_KEYS=api_keys_json(key)
    ) as base_url:
        # when a person writes their token in GraphiQL's headers editor and runs a query
        seen = run_node_json(
            "graphiql-headers.mjs", f"{base_url}/graphql", key.key, "{ agents { id } }", env={"CHROMIUM_BIN": chromium}
        )

    # then the query ran with it
    assert {"id": "refund-agent"} in seen["result"]["data"]["agents"], seen["result"]
    assert seen["pageErrors"] == []
    # and the token is kept nowhere beyond the tab: not in localStorage (also after a reload),
    # and a page opened later starts with no header
    for stored in (seen["localStorage"], seen["localStorageAfterReload"]):
        assert [name for name, value in stored.items() if GRAPHIQL_KEY in (value or "")] == [], stored
    assert GRAPHIQL_KEY not in seen["headersAfterReload"]
