"""The inbox as a reviewer's queue (issue 45 part 6), in headless Chromium.

``inbox-queue.mjs`` signs in with an API key against a server with the ``json-echo`` test agent,
and records: a decision made with the mouse (where the next card's Approve button is before and
after, what is under the pointer, where the focus is), the activity lines of an approval, an edit
and a bulk approval, a long Arguments panel, a data request's question, the keyboard shortcuts,
and axe-core's violations in each state. It runs once for the module; each test checks one fault
a new user found. Screenshots are left in ``tests/ecosystem/output/`` (git-ignored); those of
docs/inbox.md are copies of them.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from .._auth import ADMIN
from .._servers import runsgate_process
from ._node import OUTPUT, run_node_json
from .test_graphiql_browser import chromium  # noqa: F401  (the fixture)

pytestmark = pytest.mark.usefixtures("node_tools")


@pytest.fixture(scope="module")
def seen(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: F811
    OUTPUT.mkdir(exist_ok=True)
    log = tmp_path_factory.mktemp("inbox-queue") / "runsgate.log"
    variables = {
        "RUNSGATE_AUTH": "on",
        "RUNSGATE_API_KEYS": json.dumps([ADMIN.entry()]),
        "RUNSGATE_AGENTS": "tests._json_agent:AGENTS",
    }
    with runsgate_process(log, **variables) as base_url:
        found: dict[str, Any] = run_node_json(
            "inbox-queue.mjs", base_url, str(OUTPUT), ADMIN.key, env={"CHROMIUM_BIN": chromium}, timeout=600
        )
    assert found["pageErrors"] == []
    assert found["cspViolations"] == []
    return found


def _step(seen: dict[str, Any], name: str) -> None:
    """The script's step ``name`` went to its end."""
    assert name not in seen["errors"], seen["errors"][name]


def test_a_decision_is_shown_in_place_and_nothing_moves_under_the_pointer(seen: dict[str, Any]) -> None:
    _step(seen, "place")
    place = seen["place"]
    # the next card's Approve button is where it was: the pointer is not over it now
    assert place["after"] == place["before"], place
    under = place["underPointer"]
    assert (under["settled"], under["button"]) == (seen["runs"]["upper"], False), under
    # the decided card's place holds its result, as tall as the card was
    slot, card = place["slot"], place["card"]
    assert (round(slot["box"]["y"]), round(slot["box"]["height"])) == (round(card["y"]), round(card["height"]))
    for text in ("Approved", "issue_refund", "order_id 1043"):
        assert text in slot["text"], slot["text"]
    # and the focus is on the next card's first action
    assert place["focused"] == {"tag": "BUTTON", "text": "Approve", "run": f"run-{seen['runs']['lower']}"}


def test_activity_names_the_call_and_the_change_and_a_bulk_action_adds_one_line(seen: dict[str, Any]) -> None:
    _step(seen, "activity")
    activity = seen["activity"]
    # an approval names the call: its tool, a short id and its arguments
    for text in ("issue_refund", "order_id 1043, amount ", "call "):
        assert text in activity["approval"], activity
    # an edit says which argument changed, from what to what
    assert "edited amount: " in activity["edit"], activity["edit"]
    assert " → 25" in activity["edit"], activity["edit"]
    # three calls approved at once add one entry about the decision (the runs' completions are
    # their own), which names each of the calls
    (bulk,) = [entry for entry in activity["bulk"] if re.search("approv|decision", entry, re.IGNORECASE)]
    assert " UTC Bulk approval of 3 calls on refund-agent: 3 recorded.\n" in bulk, bulk
    for order in (2001, 2002, 2003):
        assert f"order_id {order}" in bulk, bulk


def test_arguments_are_readable_exact_and_folded(seen: dict[str, Any]) -> None:
    _step(seen, "args")
    folded, unfolded = seen["args"]["folded"], seen["args"]["unfolded"]
    # text shows its real line breaks, never a literal \n, and the large order id as sent
    assert '"note": "Dear team,\nplease refund the grinder.\nThanks"' in folded["text"], folded["text"]
    assert "\\n" not in folded["text"]
    assert '"order": 1790000000000000001' in folded["text"], folded["text"]
    # the 30-item list is folded into one line saying so
    assert folded["folds"] >= 1, folded
    assert folded["open"] == 0, folded
    assert '"lines": [… 30 items]' in folded["text"], folded["text"]
    assert "SKU-129" not in folded["text"]
    assert folded["height"] < 200, folded
    assert seen["args"]["card"] < 1200, seen["args"]["card"]  # its conversation included
    # unfolded, every item is there, in a panel no taller than its limit (it scrolls)
    assert '"sku": "SKU-129"' in unfolded["text"], unfolded["text"]
    assert unfolded["height"] <= 24 * 15 + 1, unfolded


def test_a_data_request_shows_its_question_with_its_payload_folded(seen: dict[str, Any]) -> None:
    _step(seen, "question")
    question = seen["question"]
    assert question["question"]["text"] == "Which account should the refund go to?\nGive its IBAN.", question
    # the payload is there, folded, and exact once unfolded
    assert question["payload"]["open"] == 0, question
    assert "1790000000000000003" not in question["payload"]["text"], question
    assert '"order": 1790000000000000003' in question["payloadOpen"]["text"], question


def test_keyboard_moves_between_cards_and_decides_after_a_confirmation(seen: dict[str, Any]) -> None:
    _step(seen, "keys")
    keys, runs = seen["keys"], seen["keys"]["runs"]

    def on(run: str, text: str = "Approve") -> dict[str, str]:
        return {"tag": "BUTTON", "text": text, "run": f"run-{run}"}

    # the page says which keys do what
    for text in ("j", "k", "a", "d", "Escape"):
        assert text in keys["help"], keys["help"]
    # j and k move between the cards' first actions
    assert (keys["j1"], keys["j2"], keys["k"]) == (on(runs["first"]), on(runs["second"]), on(runs["first"]))
    # a asks first; Escape sends nothing and gives the focus back
    assert "Approve issue_refund" in keys["confirm"]["text"], keys["confirm"]
    assert keys["escaped"] == {"sent": 0, "focused": on(runs["first"])}
    # a then Enter approves the card's question, and the focus goes to the next card
    (approved,) = keys["approved"]["sent"]
    assert (approved["operation"], approved["input"]["runId"]) == ("InboxApprove", runs["first"]), approved
    assert keys["approved"]["focused"] == on(runs["second"])
    # d asks for a reason; Enter declines with it
    assert keys["declineFocused"]["tag"] == "INPUT", keys["declineFocused"]
    (declined,) = keys["declined"]["sent"]
    assert declined["operation"] == "InboxDecline", declined
    assert (declined["input"]["runId"], declined["input"]["reason"]) == (runs["second"], "Refunded by phone")
    assert keys["declined"]["focused"] == on(runs["third"])


def test_a_decision_that_keeps_its_run_gives_the_focus_to_the_runs_next_call(seen: dict[str, Any]) -> None:
    _step(seen, "kept")
    kept = seen["kept"]
    # the approved call has no button left; its run's other call has the focus, so a keyboard
    # user goes on from there, not from the top of the page
    assert kept["approveButtons"] == 1, kept
    assert kept["focused"] == {"tag": "BUTTON", "text": "Approve", "run": f"run-{seen['runs']['kept']}"}, kept


def test_axe_finds_no_violation_in_any_state(seen: dict[str, Any]) -> None:
    labels = [check["label"] for check in seen["axe"]]
    assert labels == [
        "a decision shown in place",
        "arguments folded and unfolded",
        "a data request with its question",
        "a shortcut asking for confirmation",
        "after decisions by keyboard",
    ], labels
    for check in seen["axe"]:
        assert check["violations"] == [], f"{check['label']}: {json.dumps(check['violations'], indent=1)}"
