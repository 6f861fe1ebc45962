"""What a reviewer sees in the inbox, in headless Chromium (issue 29 part 3).

``inbox-review.mjs`` signs in with an API key, starts a supervisor's refund (its sub-run is listed
under ``refund-agent``), a weather run (its only call asks for data) and a plain refund through the
API, and records what the page shows: every button's text contrast at rest, hovered, focused and
both; the bulk bar of each agent; how the sub-run is shown; each run's conversation; axe-core's
violations. It runs once for the module; each test checks one thing. Screenshots are left in
``tests/ecosystem/output/`` (git-ignored).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .._auth import ADMIN
from .._servers import runsgate_process
from ._node import OUTPUT, run_node_json
from .test_graphiql_browser import chromium  # noqa: F401  (the fixture)

pytestmark = pytest.mark.usefixtures("node_tools")

MIN_CONTRAST = 4.5
"""WCAG 2 AA for text (1.4.3)."""


def _lines(text: str | None) -> str:
    """``text`` as shown (``innerText``), without the blank lines between paragraphs."""
    assert text is not None, "no conversation shown"
    return "\n".join(line for line in text.splitlines() if line.strip())


@pytest.fixture(scope="module")
def seen(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: F811
    OUTPUT.mkdir(exist_ok=True)
    log = tmp_path_factory.mktemp("inbox-review") / "runsgate.log"
    keys = json.dumps([ADMIN.entry()])
    with runsgate_process(log, RUNSGATE_AUTH="on", RUNSGATE_API_KEYS=keys) as base_url:
        found: dict[str, Any] = run_node_json(
            "inbox-review.mjs", base_url, str(OUTPUT), ADMIN.key, env={"CHROMIUM_BIN": chromium}, timeout=300
        )
    assert found["pageErrors"] == []
    assert found["cspViolations"] == []
    return found


def test_every_button_keeps_its_text_readable_at_rest_hovered_and_focused(seen: dict[str, Any]) -> None:
    # given every button of the sign-in form and of a listing with each kind of call
    labels = {button["label"] for button in seen["buttons"]}
    expected = {"Open the inbox", "Forget my token", "Apply filters", "Clear", "Approve", "Decline", "Resume run"}
    expected |= {"Edit arguments", "Approve with edited arguments", "Approve selected", "Decline selected"}
    assert expected <= labels, labels

    # then each one's text contrasts at least 4.5:1 with its background, in every state
    low = [
        f"{button['where']}: {button['label']!r} {state} {measured['color']} on {measured['background']}: "
        f"{measured['ratio']}"
        for button in seen["buttons"]
        for state, measured in button["states"].items()
        if measured["ratio"] < MIN_CONTRAST
    ]
    assert low == [], "\n".join(low)


def test_a_supervisors_sub_run_is_shown_linked_to_its_supervisors_run_without_buttons(seen: dict[str, Any]) -> None:
    runs = seen["runs"]
    assert runs["subRun"], "the supervisor's refund has no sub-run under refund-agent"
    sub = seen["subRun"]
    # the sub-run offers nothing to press or fill in: its calls are decided on the supervisor's run
    assert (sub["buttons"], sub["controls"]) == (0, 0), sub
    assert runs["supervisor"] in sub["text"]
    # and it links to the supervisor's run, which the link leads to (under support-supervisor)
    assert {"href": f"#run-{runs['supervisor']}"} in [{"href": link["href"]} for link in sub["links"]], sub
    assert sub["followed"]["hash"] == f"#run-{runs['supervisor']}"
    assert sub["followed"]["target"]["agent"] == "agent-support-supervisor"


def test_the_bulk_bar_is_shown_only_for_an_agent_with_a_call_to_approve(seen: dict[str, Any]) -> None:
    bars = seen["bulkBars"]
    # an agent whose only call asks for data, or whose only run is a sub-run, has no bulk bar
    assert bars["withoutRefund"] == {"refund-agent": 0, "weather-agent": 0, "support-supervisor": 2}
    # and one with an approval waiting has it (Approve selected, Decline selected)
    assert bars["withRefund"] == {"refund-agent": 2, "weather-agent": 0, "support-supervisor": 2}


def test_axe_finds_no_violation_in_the_listing(seen: dict[str, Any]) -> None:
    # before a call is selected (two bulk forms), and with a conversation cut to fit
    assert len(seen["axe"]) == 2
    for check in seen["axe"]:
        assert check["violations"] == [], f"{check['label']}: {json.dumps(check['violations'], indent=1)}"


def test_each_run_shows_the_conversation_that_led_to_its_pending_calls(seen: dict[str, Any]) -> None:
    shown = {run: _lines(text) for run, text in seen["conversations"].items()}
    # the refund: the customer's words, the lookup and its result, and the refund call waiting below
    refund = shown["refund"]
    assert refund.startswith("Conversation: 4 messages\n"), refund
    for text in (
        "User\nPlease refund order 1042",
        "Tool call lookup_order",
        '{"order_id":1042}',
        "Tool result lookup_order",
    ):
        assert text in refund, refund
    assert 'Tool call issue_refund (waiting for a decision, below)\n{"order_id":1042,"amount":49.9}' in refund
    # the supervisor's: the customer's words and its call to the refund agent, waiting
    supervisor = shown["supervisor"]
    assert "User\nPlease refund order 1043" in supervisor
    assert "Tool call ask_refund_agent (waiting for a decision, below)" in supervisor
    # the sub-run's: the supervisor's request, and its refund call, decided on the supervisor's run
    sub = shown["subRun"]
    assert "User\nPlease refund order 1043" in sub
    assert "Tool call issue_refund (waiting, decided on the supervisor's run)\n" in sub
    assert "waiting for a decision" not in sub
    # the weather run's: the question it asks
    assert "Tool call ask_city (waiting for a decision, below)" in shown["weather"]


def test_a_conversation_longer_than_the_page_shows_says_where_it_was_cut(seen: dict[str, Any]) -> None:
    long = _lines(seen["conversations"]["long"])
    # the summary says it is shortened, and the prompt shows its beginning then a mark saying so
    assert long.startswith("Conversation: 4 messages, 16.0 KiB of 19.5 KiB shown\n"), long[:200]
    assert "User\nPlease refund order 1042, the grinder arrived broken and" in long
    assert "thanks." not in long
    assert "[… cut here: 19.4 KiB in all]" in long
    # and the refund call waiting is still shown whole, after it
    assert long.index("cut here") < long.index("Tool call issue_refund (waiting for a decision, below)")
    assert long.rstrip().endswith('{"order_id":1042,"amount":49.9}')
