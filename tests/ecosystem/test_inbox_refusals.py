"""Inbox faults a new user found on the memory store (issue 45 part 6), in headless Chromium.

``inbox-refusals.mjs`` signs in with an API key against a server with the demo agents and one
refund waiting. It records what an inbox link naming an agent no server registers opens (the
queue view and ``?view=agents``), what Clear does to a link naming a known agent, what a Decline
the server refuses for its reason's size shows on the card, and on the call's next question;
axe-core in those states.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .._auth import ADMIN, api_keys_json
from .._servers import runsgate_process
from ._node import OUTPUT, run_node_json
from .test_graphiql_browser import chromium  # noqa: F401  (the fixture)

pytestmark = pytest.mark.usefixtures("node_tools")


@pytest.fixture(scope="module")
def seen(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: F811
    OUTPUT.mkdir(exist_ok=True)
    log = tmp_path_factory.mktemp("inbox-refusals") / "runsgate.log"
    variables = {"RUNSGATE_AUTH": "on", "RUNSGATE_API_KEYS": api_keys_json(ADMIN)}
    with runsgate_process(log, **variables) as base_url:
        found: dict[str, Any] = run_node_json(
            "inbox-refusals.mjs", base_url, str(OUTPUT), ADMIN.key, env={"CHROMIUM_BIN": chromium}, timeout=600
        )
    (OUTPUT / "inbox-refusals.json").write_text(json.dumps(found, indent=1))
    assert found["pageErrors"] == []
    assert found["cspViolations"] == []
    return found


def _step(seen: dict[str, Any], name: str) -> None:
    """The script's step ``name`` went to its end."""
    assert name not in seen["errors"], seen["errors"][name]


def test_a_link_to_an_unknown_agent_says_so_and_lists_the_queue(seen: dict[str, Any]) -> None:
    _step(seen, "unknown-queue")
    found = seen["unknown-queue"]
    # the queue is listed, across agents, and the filter says so
    assert seen["runs"]["refund"] in found["cards"], found
    assert "loading…" not in " ".join(found["headings"]), found
    assert found["agentFilter"] == "All agents", found
    # a line above the cards says the link's agent is unknown
    assert any("nope" in line and "run x" in line.lower() for line in found["linesBeforeCards"]), found
    # the header and the activity agree: live, and nothing stopped
    assert found["live"].startswith("Live"), found
    assert not [line for line in found["activity"] if "stopped" in line], found
    # the address no longer names the unknown agent, before or after Clear
    for state in (found, found["afterClear"]):
        assert "nope" not in state["search"], state


def test_a_link_to_an_unknown_agent_in_the_agents_view_says_so_and_lists_them(seen: dict[str, Any]) -> None:
    _step(seen, "unknown-agents")
    found = seen["unknown-agents"]
    assert seen["runs"]["refund"] in found["cards"], found
    assert any("nope" in line for line in found["linesBeforeCards"]), found
    assert found["live"].startswith("Live"), found


def test_clear_forgets_a_links_agent_in_the_address_too(seen: dict[str, Any]) -> None:
    _step(seen, "known-clear")
    found = seen["known-clear"]
    # the link lists its agent's runs
    assert found["linked"]["agentFilter"] == "refund-agent", found
    # Clear lists every agent's, and the address no longer names the link's agent
    assert found["afterClear"]["agentFilter"] == "All agents", found
    assert "agentId" not in found["afterClear"]["search"], found
    # so loading that address again keeps every agent's runs listed
    assert found["afterReload"]["agentFilter"] == "All agents", found


def test_a_decline_refused_for_its_reason_says_so_under_the_call(seen: dict[str, Any]) -> None:
    _step(seen, "long-reason")
    found = seen["long-reason"]
    # typing cannot make the reason longer than the server accepts
    assert found["maxLength"] == 4096, found
    assert found["typedLength"] == 4096, found
    # a reason of more bytes than that is refused: the card stays, with the result under the call
    assert found["cardListed"], found
    (under,) = [text for text in found["underCall"] if text]
    for text in ("Decline of issue_refund", "failed", "at most 4096"):
        assert text in under, under
    # and the activity line names the call
    (line,) = [line for line in found["activity"] if "Decline of issue_refund" in line]
    assert "Call: issue_refund(" in line or "call " in line, line


def test_a_refusal_stays_with_its_question_not_the_next(seen: dict[str, Any]) -> None:
    _step(seen, "next-question")
    found = seen["next-question"]
    # the refused decline is said under the question it was about
    assert any("failed" in text for text in found["underRefused"]), found
    # and not under the call's next question (order 1043), which nobody has decided
    assert "1043" in found["cardText"], found
    assert not [text for text in found["underNext"] if text], found


def test_axe_finds_no_violations(seen: dict[str, Any]) -> None:
    for state in seen["axe"]:
        assert state["violations"] == [], state
