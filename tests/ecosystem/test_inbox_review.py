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
    [check] = seen["axe"]
    assert check["violations"] == [], json.dumps(check["violations"], indent=1)
