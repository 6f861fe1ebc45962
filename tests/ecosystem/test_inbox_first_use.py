"""Inbox faults a new user found on a server with API keys (issue 45 part 6), in headless Chromium.

``inbox-first-use.mjs`` signs the page in with a key that may decide (and, in its own tab, with a
read-only one) against a server with the demo agents. It records what an email's inbox link opens,
whether the page scrolls after a decision made with the mouse (at 1280x900 and 390x700), what a
read-only key is shown (in the queue view and the agents view), and the activity lines of a
partial (1 of 2) approval, single and in bulk; axe-core in those states.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .._auth import ADMIN, TestKey, api_keys_json
from .._servers import runsgate_process
from ._node import OUTPUT, run_node_json
from .test_graphiql_browser import chromium  # noqa: F401  (the fixture)

pytestmark = pytest.mark.usefixtures("node_tools")

READER = TestKey("reader", "rg_test_reader_0123456789abcdefghijklmnopqrstuvw", scopes=("runs:read",))
"""A key that may read runs but not decide."""


@pytest.fixture(scope="module")
def seen(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: F811
    OUTPUT.mkdir(exist_ok=True)
    log = tmp_path_factory.mktemp("inbox-first-use") / "runsgate.log"
    variables = {"RUNSGATE_AUTH": "on", "RUNSGATE_API_KEYS": api_keys_json(ADMIN, READER)}
    with runsgate_process(log, **variables) as base_url:
        found: dict[str, Any] = run_node_json(
            "inbox-first-use.mjs",
            base_url,
            str(OUTPUT),
            ADMIN.key,
            READER.key,
            env={"CHROMIUM_BIN": chromium},
            timeout=600,
        )
    (OUTPUT / "inbox-first-use.json").write_text(json.dumps(found, indent=1))
    assert found["pageErrors"] == []
    assert found["cspViolations"] == []
    return found


def _step(seen: dict[str, Any], name: str) -> None:
    """The script's step ``name`` went to its end."""
    assert name not in seen["errors"], seen["errors"][name]


def test_an_inbox_link_opens_its_run(seen: dict[str, Any]) -> None:
    _step(seen, "link")
    link = seen["link"]
    for view in ("queue", "agents"):
        assert link[view]["inView"], (view, link)
        assert link[view]["focused"], (view, link)
    # a link to a run decided since says so
    assert seen["runs"]["refunds"][0] in link["gone"], link


def test_a_link_to_a_run_on_another_page_follows_it_decided_meanwhile(seen: dict[str, Any]) -> None:
    _step(seen, "waits")
    waits, older = seen["waits"], seen["runs"]["waits"]["older"]
    # the run is read on its own: its card first, in view, with the focus, and no note
    before = waits["before"]
    assert before["first"] == f"run-{older}", waits
    assert before["inView"], waits
    assert before["focused"], waits
    assert not [note for note in before["notes"] if "which the link names" in note], waits
    # once it is decided elsewhere (the live message reads the listing again), the note says so
    assert older in waits["after"], waits
    assert "no longer waits" in waits["after"], waits
    assert waits["gone"], waits


@pytest.mark.parametrize("viewport", ["wide", "small"])
def test_a_decision_with_the_mouse_does_not_scroll_the_page(seen: dict[str, Any], viewport: str) -> None:
    _step(seen, f"scroll-{viewport}")
    record = seen["scroll"][viewport]
    scrolls = record["scrolls"]
    assert max(scrolls) - min(scrolls) <= 1, record
    # the decided card's place, with its result, stays where the reviewer looks
    assert record["slot"]["inView"], record
    assert record["slot"]["lineInView"], record
    assert "recorded" in record["slot"]["text"], record
    # the focus is on the next card, without scrolling to it
    assert (record["focus"]["run"], record["focus"]["text"]) == (record["next"], "Approve"), record


def test_a_read_only_key_is_told_it_has_no_queue(seen: dict[str, Any]) -> None:
    _step(seen, "readonly")
    readonly = seen["readonly"]
    text = readonly["text"]
    assert "may not decide" in text, text
    assert "loading" not in text.lower(), text
    assert "Live: new runs" not in text, text
    assert "at the next connection" not in text, text
    assert any(link["href"].endswith("?view=agents") for link in readonly["links"]), readonly


def test_a_read_only_key_reads_the_agents_view_without_decision_controls(seen: dict[str, Any]) -> None:
    _step(seen, "readonly-agents")
    agents = seen["readonlyAgents"]
    assert agents["runs"] > 0, agents
    # the page tells once that the key may read but not decide
    text = agents["text"]
    assert text.count("may not decide") == 1, text
    assert "runs:decide" in text, text
    # and its cards offer no decision: no buttons, forms or fields, no bulk decision
    assert agents["buttons"] == [], agents["buttons"]
    assert (agents["forms"], agents["fields"], agents["bulk"]) == (0, 0, 0), agents


def test_a_partial_approvals_activity_line_says_so(seen: dict[str, Any]) -> None:
    _step(seen, "partial")
    partial, (one, bulk) = seen["partial"], seen["runs"]["big"]
    assert "issue_refund (call " in partial["single"], partial
    assert "1 of 2 approvals given" in partial["single"], partial
    assert "the run is now SUSPENDED" not in partial["single"], partial
    assert "issue_refund (call " in partial["bulk"], partial
    assert f"on run {bulk}" in partial["bulk"], partial
    assert "1 of 2 approvals given" in partial["bulk"], partial
    assert one != bulk


def test_axe_finds_no_violation_in_those_states(seen: dict[str, Any]) -> None:
    labels = [check["label"] for check in seen["axe"]]
    assert labels == [
        "a link to a run that no longer waits",
        "a decision at 1280x900",
        "a decision at 390x700",
        "a read-only key",
        "a read-only key on the agents view",
    ], labels
    for check in seen["axe"]:
        assert check["violations"] == [], f"{check['label']}: {json.dumps(check['violations'], indent=1)}"
