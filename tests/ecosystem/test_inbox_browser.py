"""The reviewer inbox in a real browser: headless Chromium (Debian's) decides runs on runsgate's /inbox.

``inbox.mjs`` drives ``/usr/bin/chromium`` with playwright-core in a fresh profile, keyboard only:
it opens ``/inbox``, starts runs through the GraphQL API and waits for them to appear live (no
reload), approves one, declines one with a reason, and resumes the weather run through the form
generated from its ``resumeSchema`` (submitting it empty first, for the field's error); it
sees a run declined through the API (by someone else) leave the page without a reload; then it
filters by agent and thread and pages with the cursors, two runs per page. Where the
server's schema has issue 18's ``editedArgs`` and ``decideToolCalls`` it also edits then approves a
call (first typing an edit its ``argsSchema`` refuses: the problems are shown and nothing is sent)
and approves two in bulk, as the page itself shows those only then. axe-core checks the page.
This test then checks every outcome through the API. Screenshots are left in
``tests/ecosystem/output/`` (git-ignored).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt
import pytest

from .._auth import ADMIN
from .._processes import scaled
from .._servers import runsgate_process
from ._node import OUTPUT, run_node_json
from .test_graphiql_browser import chromium  # noqa: F401  (the fixture)

pytestmark = pytest.mark.usefixtures("node_tools")

RUN_EVENTS = """
query Events($agentId: ID!, $runId: ID!) { runEvents(agentId: $agentId, runId: $runId) { type by data } }
"""
UNAUTHORIZED = "401 (Unauthorized)"
SUSPENDED = """
query Waiting($agentId: ID!) { suspendedRuns(agentId: $agentId) { totalCount } }
"""


def _graphql(base_url: str, query: str, variables: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    response = httpx.post(f"{base_url}/graphql", json={"query": query, "variables": variables}, headers=headers)
    body: dict[str, Any] = response.json()
    assert "errors" not in body, body
    data: dict[str, Any] = body["data"]
    return data


def _decision(base_url: str, agent_id: str, run_id: str, headers: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The run's one decision event's data, and the kinds of all its events."""
    events = _graphql(base_url, RUN_EVENTS, {"agentId": agent_id, "runId": run_id}, headers)["runEvents"]
    decisions = [event["data"] for event in events if event["type"] == "decision"]
    assert len(decisions) == 1, events
    return decisions[0], [event["type"] for event in events]


def _drive_inbox(chromium_bin: str, base_url: str, prefix: str, api_key: str | None = None) -> dict[str, Any]:
    OUTPUT.mkdir(exist_ok=True)
    for old in OUTPUT.glob(f"{prefix}inbox-*.png"):
        old.unlink()
    seen: dict[str, Any] = run_node_json(
        "inbox.mjs",
        base_url,
        str(OUTPUT),
        *([api_key] if api_key else []),
        env={"CHROMIUM_BIN": chromium_bin, "SCREENSHOT_PREFIX": prefix},
        timeout=300,
    )
    return seen


def _check_page(seen: dict[str, Any], base_url: str, console_errors: list[str] | None = None) -> None:
    # every file came from runsgate itself, the page never reloaded, and ran without errors
    origin = urlsplit(base_url).netloc
    assert seen["requests"], "the page made no request"
    assert [url for url in seen["requests"] if urlsplit(url).netloc != origin] == []
    assert any(url.endswith("/static/inbox/inbox.js") for url in seen["requests"])
    assert seen["pageErrors"] == []
    assert seen["cspViolations"] == []
    assert seen["consoleErrors"] == (console_errors or [])
    assert seen["reloaded"] is False
    # the runs started through the API appeared without a reload
    for key in ("approve", "decline", "weather"):
        assert seen["runs"][key] in seen["visibleAfterStart"]
    # the empty form showed its error next to the field, and moved the focus there
    assert seen["resumeError"]["text"] == "is required"
    assert seen["resumeError"]["focused"] == seen["resumeError"]["inputId"]
    # the page offers issue 18's actions exactly when the schema has them
    assert (seen["featuresShown"]["editButtons"] > 0) == seen["features"]["editedArgs"]
    assert (seen["featuresShown"]["bulkForms"] > 0) == seen["features"]["bulk"]
    # axe-core: no violation at all, in each state checked
    assert len(seen["axe"]) == 3
    for check in seen["axe"]:
        assert check["violations"] == [], f"{check['label']}: {json.dumps(check['violations'], indent=1)}"


def _check_outcomes(seen: dict[str, Any], base_url: str, headers: dict[str, str], by: str) -> None:
    runs = seen["runs"]
    approved, kinds = _decision(base_url, "refund-agent", runs["approve"], headers)
    assert (approved["kind"], kinds[-1]) == ("approved", "completed")
    declined, kinds = _decision(base_url, "refund-agent", runs["decline"], headers)
    assert (declined["kind"], declined["reason"], kinds[-1]) == (
        "declined",
        "Order 1043 was already refunded by phone",
        "completed",
    )
    resumed, kinds = _decision(base_url, "weather-agent", runs["weather"], headers)
    assert (resumed["kind"], kinds[-1]) == ("resumed", "completed")
    events = _graphql(base_url, RUN_EVENTS, {"agentId": "weather-agent", "runId": runs["weather"]}, headers)
    completed = events["runEvents"][-1]["data"]["output"]
    assert completed.startswith("The weather in Paris"), completed
    for event in events["runEvents"]:
        if event["type"] == "decision":
            assert event["by"] == by
    elsewhere, kinds = _decision(base_url, "refund-agent", runs["elsewhere"], headers)
    assert (seen["elsewhere"], elsewhere["reason"], kinds[-1]) == ("RunOutcome", "decided elsewhere", "completed")
    if seen["features"]["editedArgs"]:
        if seen["features"]["argsSchema"]:  # the invalid edit was refused in the page, against argsSchema
            assert "order_id: is required" in seen["schemaProblem"], seen["schemaProblem"]
            assert "amount: " in seen["schemaProblem"], seen["schemaProblem"]
            assert seen["schemaProblemInvalid"] == "true"
            assert seen["approvalsSentWhileInvalid"] == 0
        edited, kinds = _decision(base_url, "refund-agent", runs["edited"], headers)
        assert edited["kind"] == "approved"
        assert kinds[-1] == "completed"
        assert {"order_id": 1042, "amount": 10.5} in edited.values(), edited  # beside the original arguments
        events = _graphql(base_url, RUN_EVENTS, {"agentId": "refund-agent", "runId": runs["edited"]}, headers)
        assert "$10.50" in events["runEvents"][-1]["data"]["output"]  # the tool ran with the edited amount
    # each run decided in the page got its progress card (tests/ecosystem/test_inbox_progress.py
    # checks what they show), none decided elsewhere did
    if seen["features"]["progress"]:
        decided = {runs["approve"], runs["decline"], runs["weather"]}
        decided |= {runs["edited"]} if seen["features"]["editedArgs"] else set()
        decided |= set(runs["bulk"]) if seen["features"]["bulk"] else set()
        assert sorted(seen["progressCards"]) == sorted(decided)
    if seen["features"]["bulk"]:
        for run_id in runs["bulk"]:
            bulk, kinds = _decision(base_url, "refund-agent", run_id, headers)
            assert bulk["kind"] == "approved"
            assert kinds[-1] == "completed"
    # and nothing waits any more, but the runs of the paging step
    waiting = {"refund-agent": len(runs["paged"]) + 1, "weather-agent": 0}
    for agent_id, count in waiting.items():
        assert _graphql(base_url, SUSPENDED, {"agentId": agent_id}, headers)["suspendedRuns"]["totalCount"] == count
    # the filters kept only the thread's runs, newest first, two per page, and the cursors paged
    newest_first = runs["paged"][::-1]
    assert seen["paging"] == {
        "first": newest_first[:2],
        "headings": ["Filters", "Activity", "refund-agent 3 waiting"],
        "second": newest_first[2:],
        "back": newest_first[:2],
    }


def test_a_reviewer_decides_runs_in_the_inbox_with_the_keyboard(chromium: str, tmp_path: Path) -> None:  # noqa: F811
    with runsgate_process(tmp_path / "runsgate.log") as base_url:
        # when a reviewer opens /inbox (authentication off: nothing to enter) and runs arrive
        seen = _drive_inbox(chromium, base_url, "")

        # then the page worked as a client of the API alone, and every decision was recorded
        _check_page(seen, base_url)
        _check_outcomes(seen, base_url, {}, "anonymous")
    assert (OUTPUT / "inbox-runs.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_with_authentication_the_inbox_asks_once_for_a_key_and_keeps_it_for_the_tab(
    chromium: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    keys = json.dumps([ADMIN.entry()])
    with runsgate_process(tmp_path / "runsgate.log", RUNSGATE_AUTH="on", RUNSGATE_API_KEYS=keys) as base_url:
        # given a page that needs no credential itself, but an API that does
        assert httpx.get(f"{base_url}/inbox").status_code == 200
        assert httpx.post(f"{base_url}/graphql", json={"query": "{ agents { id } }"}).status_code == 401

        # when the reviewer enters an API key once and works as before
        seen = _drive_inbox(chromium, base_url, "auth-", api_key=ADMIN.key)

        # then the key stayed in this tab's sessionStorage only, and every request (the live
        # WebSocket's included: the runs appeared live) carried it
        assert seen["sessionStorage"] == {"runsgate-inbox-token": ADMIN.key}
        assert seen["localStorage"] == {}
        # (the one 401 is the page's first request, sent without a key, which made it ask for one)
        _check_page(seen, base_url, [f"Failed to load resource: the server responded with a status of {UNAUTHORIZED}"])
        _check_outcomes(seen, base_url, ADMIN.headers, f"key:{ADMIN.name}")


def test_when_its_token_expires_the_inbox_asks_for_a_new_one(chromium: str, tmp_path: Path) -> None:  # noqa: F811
    # given a server that accepts JWTs, and a reviewer's token that expires 45 seconds after the
    # server is up (times the wait scale: on a loaded machine the server's start and Chromium's
    # take tens of seconds, and a token made before them expired before the page signed in)
    secret = "inbox-test-secret-0123456789abcdef0123456789"
    with runsgate_process(tmp_path / "runsgate.log", RUNSGATE_AUTH="on", RUNSGATE_JWT_SECRET=secret) as base_url:
        expires = int(time.time() + scaled(45))
        claims = {"sub": "alice", "scope": "runs:read runs:decide", "resources": "*", "exp": expires}
        token = jwt.encode(claims, secret, algorithm="HS256")
        # when the reviewer signs in with it and keeps the page open
        seen = run_node_json("inbox-expiry.mjs", base_url, token, env={"CHROMIUM_BIN": chromium}, timeout=150)

    # then the server closes the live socket when the token expires (4403), and the page drops
    # the token and asks for a new one rather than reconnecting with it
    assert seen["live"] is True
    assert "live connection was refused" in seen["message"], seen["message"]
    assert seen["sessionStorage"] == {}
    assert seen["pageErrors"] == []


def test_the_inbox_shows_each_typed_answer_and_the_reviewer_workflow_parts(chromium: str, tmp_path: Path) -> None:  # noqa: F811
    """Answers today's server cannot give on demand, with the page's POST /graphql answered by
    ``inbox-answers.mjs`` (the page, its files and its live socket are runsgate's): a schema with
    issue 18's fields, ``InvalidToolArguments`` to an edit, a bulk result of which one item is
    ``ToolCallAlreadyDecided`` by someone else, and ``InvalidResumeData`` from the server for data
    the form accepted. The documents themselves are checked against the schema by
    ``test_inbox_documents.py``; the real server's answers by the tests above."""
    with runsgate_process(tmp_path / "runsgate.log") as base_url:
        seen = run_node_json("inbox-answers.mjs", base_url, str(OUTPUT), env={"CHROMIUM_BIN": chromium})

    # then the reviewer-workflow parts are shown: deadline, approvals so far, the expiring filter
    shown = seen["shown"]
    assert shown["deadline"] == "2026-12-01 23:00:00 UTC"
    assert shown["approvals"] == "1 of 2\nkey:alice at 2026-11-30 22:01:00 UTC"
    assert shown["expiringFilter"] == 1
    # and a conversation the server cut shows where: the prompt's text cut, then the messages left out
    assert shown["conversations"] == 1  # the runs without one show none
    assert [line for line in shown["conversation"].split("\n") if line.strip()] == [
        "Conversation: 6 messages, 85 bytes of 8.8 KiB shown",
        "User",
        "Please refund order 1042, it arrived",
        "[… cut here: 6.7 KiB in all]",
        "[… 3 messages (2.0 KiB) left out here …]",
        "Assistant",
        "Checking the order.",
        "Tool call issue_refund (waiting for a decision, below)",
        '{"order_id":1042,"amount":600}',
    ]
    # and an edit is checked for JSON syntax in the page, then sent as editedArgs, and the
    # server's problems are shown under the editor
    assert shown["syntaxProblem"].startswith("Not valid JSON")
    assert "amount: Input should be less than or equal to 500" in shown["argumentsProblem"]
    ids = {"agentId": "refund-agent"}
    assert seen["sent"][0] == {
        "operation": "InboxApprove",
        "variables": {
            "input": {**ids, "runId": "run-1", "toolCallId": "call-1", "editedArgs": {"order_id": 1042, "amount": 700}}
        },
    }
    # and the two selected calls went in one decideToolCalls, each result reported on its own
    assert shown["bulkHeading"] == "Bulk decision on refund-agent: 2 selected"
    approve = {"kind": "APPROVED", "reason": None}
    assert seen["sent"][1] == {
        "operation": "InboxDecideMany",
        "variables": {
            "input": {
                **ids,
                "decisions": [
                    {"runId": "run-1", "toolCallId": "call-1", **approve},
                    {"runId": "run-2", "toolCallId": "call-2", **approve},
                ],
            }
        },
    }
    # in one activity entry, which names each call
    activity = "\n".join(seen["activity"])
    assert "Bulk approval of 2 calls on refund-agent: 1 recorded, 1 not recorded.\n" in activity
    assert (
        "issue_refund (call call-1: order_id 1042, amount 600) on run run-1: recorded; the run is now SUSPENDED."
        in activity
    )
    assert (
        "issue_refund (call call-2: order_id 1042, amount 600) on run run-2: not recorded, the call was already "
        "declined by key:bob at 2026-11-30 22:05:00 UTC." in activity
    )
    # and resume data refused by the server shows its problem under the field its path names
    assert seen["sent"][2]["variables"]["input"]["resumeData"] == {"name": "Atlantis"}
    assert seen["sent"][2]["variables"]["input"]["questionId"] == "q-w"
    assert shown["resumeProblem"] == "No forecast for this city"
    assert shown["resumeProblemField"].endswith("-data_name")
    # with no page error, and no axe-core violation in this state either
    assert seen["pageErrors"] == []
    assert seen["axe"] == []
