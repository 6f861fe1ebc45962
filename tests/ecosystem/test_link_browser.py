"""A signed link in a real browser: headless Chromium (Debian's) opens an email's approve link,
sees the question and a button, and only the click decides (issue 45 part 5).

``link-page.mjs`` drives ``/usr/bin/chromium`` with playwright-core; the screenshot is left in
``tests/ecosystem/output/`` (git-ignored).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime.notifying.links import LinkSigner

from .._auth import ALL, TestKey, api_keys_json
from .._servers import runsgate_process
from ..conftest import IN_CI
from ._node import OUTPUT, run_node_json

pytestmark = pytest.mark.usefixtures("node_tools")

CHROMIUM = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
SECRET = "a-link-secret-of-at-least-32-bytes-0123456789"
ALICE = TestKey("alice", "rg_link_browser_alice_0123456789abcdefghijklmnop", ALL)

CALLS = """
query Calls($runId: ID!) {
  suspendedRun(agentId: "refund-agent", runId: $runId) { toolCalls { toolCallId questionId decision { kind } } }
}
"""
START = """
mutation { startRun(input: {agentId: "refund-agent", prompt: "Please refund order 1042"}) {
  ... on RunOutcome { runId status } } }
"""
EVENTS = 'query E($runId: ID!) { runEvents(agentId: "refund-agent", runId: $runId) { type by data } }'


@pytest.fixture(scope="module")
def chromium() -> str:
    if os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    problem = f"Chromium is not installed at {CHROMIUM} (./dev test installs Debian's chromium package)"
    if IN_CI:
        pytest.fail(problem)
    pytest.skip(problem)


def _data(base_url: str, query: str, **variables: Any) -> Any:
    answer = httpx.post(
        f"{base_url}/graphql", json={"query": query, "variables": variables}, headers=ALICE.headers, timeout=30
    ).json()
    assert "errors" not in answer, answer
    return answer["data"]


def test_an_approve_link_opened_in_chromium_decides_only_when_its_button_is_clicked(
    chromium: str, tmp_path: Path
) -> None:
    with runsgate_process(
        tmp_path / "runsgate.log",
        RUNSGATE_AUTH="on",
        RUNSGATE_API_KEYS=api_keys_json(ALICE),
        RUNSGATE_LINK_SECRET=SECRET,
    ) as base_url:
        run_id = _data(base_url, START)["startRun"]["runId"]
        call = _data(base_url, CALLS, runId=run_id)["suspendedRun"]["toolCalls"][0]
        token = LinkSigner(SECRET, ttl=3600).make(
            recipient="key:alice",
            agent_id="refund-agent",
            run_id=run_id,
            tool_call_id=call["toolCallId"],
            question_id=call["questionId"],
            action="approve",
        )
        OUTPUT.mkdir(exist_ok=True)
        screenshot = OUTPUT / "link-page.png"
        screenshot.unlink(missing_ok=True)
        seen = run_node_json(
            "link-page.mjs", f"{base_url}/links/{token}", str(screenshot), env={"CHROMIUM_BIN": chromium}
        )
        events = _data(base_url, EVENTS, runId=run_id)["runEvents"]

    # the page showed the question and one button, without errors
    assert seen["title"] == "Approve issue_refund?"
    assert "1042" in seen["text"]
    assert "key:alice" in seen["text"]
    assert seen["button"] == "Approve"
    assert seen["pageErrors"] == []
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the click decided, as alice, once
    assert seen["after"]["status"] == 200, seen["after"]
    assert seen["after"]["title"] == "You approved issue_refund"
    decisions = [(e["by"], e["data"]["kind"]) for e in events if e["type"] == "decision"]
    assert decisions == [("key:alice", "approved")]
    # and axe reports no violation on the page
    assert seen["violations"] == []
