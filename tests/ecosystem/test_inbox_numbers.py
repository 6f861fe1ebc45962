"""Numbers a browser's JavaScript cannot hold, through every path of the inbox, in headless
Chromium (issue 41 part 2).

A JSON number is a double in JavaScript: ``JSON.parse`` rounds 1790000000000000001 to
1790000000000000000. What a reviewer sees and sends must be exactly what the tool receives, so
``inbox-numbers.mjs`` shows, edits and sends such numbers on each path: the Arguments panel, an
edit of another argument, a plain approval and a bulk one with their progress cards, the resume
form (a large default and a large number typed in) and the JSON editor of a call without a schema.
Each test checks one path against what the server stored and answered, read here with Python,
whose JSON keeps every number. Screenshots are left in ``tests/ecosystem/output/``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .._auth import ADMIN
from .._graphql import data
from .._servers import runsgate_process
from ._node import OUTPUT, run_node_json
from .test_graphiql_browser import chromium  # noqa: F401  (the fixture)

pytestmark = pytest.mark.usefixtures("node_tools")

UNAUTHORIZED = "Failed to load resource: the server responded with a status of 401 (Unauthorized)"
EVENTS = "query E($agentId: ID!, $runId: ID!) { runEvents(agentId: $agentId, runId: $runId) { type by data } }"
ROUNDS = "issue 41 part 2: the inbox parses JSON numbers into doubles, which round integers beyond 2^53"


def _amount(order: int) -> str:
    """The amount of the demo's order ``order`` (not in its table), as the server writes it."""
    return f"{10 + order % 90}.0"


def _arguments(order: int, amount: str | None = None) -> str:
    """The Arguments panel of a demo refund of ``order``, as the server writes it, indented."""
    return f'{{\n  "order_id": {order},\n  "amount": {amount or _amount(order)}\n}}'


def _lines(text: str) -> str:
    """``text`` as shown, each line stripped, without blank lines."""
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def _sent(seen: dict[str, Any], operation: str) -> list[dict[str, Any]]:
    """The ``input`` of every ``operation`` the page sent, read with Python's JSON (every number kept)."""
    return [json.loads(s["body"])["variables"]["input"] for s in seen["sent"] if s["operation"] == operation]


@pytest.fixture(scope="module")
def seen(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: F811
    OUTPUT.mkdir(exist_ok=True)
    log = tmp_path_factory.mktemp("inbox-numbers") / "runsgate.log"
    variables = {
        "RUNSGATE_AUTH": "on",
        "RUNSGATE_API_KEYS": json.dumps([ADMIN.entry()]),
        "RUNSGATE_AGENTS": "tests._json_agent:AGENTS",
    }
    with runsgate_process(log, **variables) as base_url:
        found: dict[str, Any] = run_node_json(
            "inbox-numbers.mjs", base_url, str(OUTPUT), ADMIN.key, env={"CHROMIUM_BIN": chromium}, timeout=300
        )
        runs = found["runs"]
        agents = {"edit": "refund-agent", "approve": "refund-agent", "form": "json-echo", "json": "json-echo"}
        found["events"] = {
            name: data(base_url, ADMIN, EVENTS, agentId=agent, runId=runs[name])["runEvents"]
            for name, agent in agents.items()
        }
        found["events"]["bulk"] = [
            data(base_url, ADMIN, EVENTS, agentId="refund-agent", runId=run_id)["runEvents"] for run_id in runs["bulk"]
        ]
    assert found["pageErrors"] == []
    assert found["cspViolations"] == []
    assert found["consoleErrors"] == [UNAUTHORIZED]
    return found


def _output(events: list[dict[str, Any]]) -> Any:
    (completed,) = [e for e in events if e["type"] == "completed"]
    return completed["data"]["output"]


def test_the_arguments_panel_shows_each_number_as_the_server_sent_it(seen: dict[str, Any]) -> None:
    # the conversation beside it shows the model's call as the server wrote it
    assert seen["edit"]["conversation"] == '{"order_id":1790000000000000001,"amount":91.0}'
    # and so does the Arguments panel, on every card
    assert seen["edit"]["arguments"] == _arguments(1790000000000000001)
    assert seen["approve"]["arguments"] == _arguments(1790000000000000003)
    assert seen["bulk"]["arguments"] == [_arguments(1790000000000000005), _arguments(1790000000000000007)]


def test_an_edit_of_the_amount_sends_and_refunds_the_order_shown(seen: dict[str, Any]) -> None:
    # the editor starts from the arguments as sent, and only the amount was changed
    assert seen["edit"]["editor"] == _arguments(1790000000000000001)
    assert seen["edit"]["edited"] == _arguments(1790000000000000001, "25")
    # what the page sent, what was stored and what the tool did name the exact order
    exact = {"order_id": 1790000000000000001, "amount": 25}
    assert [sent.get("editedArgs") for sent in _sent(seen, "InboxApprove")][:1] == [exact]
    (decision,) = [e for e in seen["events"]["edit"] if e["type"] == "decision"]
    assert decision["data"]["editedArgs"] == exact
    assert decision["data"]["originalArgs"] == {"order_id": 1790000000000000001, "amount": 91.0}
    assert _output(seen["events"]["edit"]) == "Refund of $25.00 for order 1790000000000000001 issued."
    # and the progress card shows the arguments the tool ran with
    card = _lines(seen["edit"]["card"])
    assert 'Arguments\n{\n"order_id": 1790000000000000001,\n"amount": 25\n}\nResult\n' in card, card


def test_an_approval_and_a_bulk_approval_show_the_orders_they_refund(seen: dict[str, Any]) -> None:
    cards = [("approve", seen["approve"]["card"], seen["events"]["approve"], 1790000000000000003)]
    cards += [
        ("bulk", card, events, order)
        for card, events, order in zip(
            seen["bulk"]["cards"], seen["events"]["bulk"], [1790000000000000005, 1790000000000000007], strict=True
        )
    ]
    for path, card, events, order in cards:
        refunded = f"Refund of ${_amount(order)}0 for order {order} issued."
        assert _output(events) == refunded, path
        shown = _lines(card)
        expected = f'Arguments\n{{\n"order_id": {order},\n"amount": {_amount(order)}\n}}\nResult\n{refunded}'
        assert expected in shown, (path, shown)


def test_the_resume_form_shows_and_sends_large_integers_exactly(seen: dict[str, Any]) -> None:
    form = seen["form"]
    # the payload as the server wrote it, the schema's default in its field, the typed number kept
    assert form["payload"] == '{\n  "account": 1790000000000000009,\n  "scale": 1e+16,\n  "rate": 0.1\n}'
    assert (form["account"], form["amount"]) == ("1790000000000000011", "1790000000000000013")
    exact = {"account": 1790000000000000011, "amount": 1790000000000000013}
    assert [sent["resumeData"] for sent in _sent(seen, "InboxResume")][:1] == [exact]
    assert _output(seen["events"]["form"]) == {"answered": exact}
    card = _lines(form["card"])
    assert card.endswith(
        'Completed. Output:\n{\n"answered": {\n"account": 1790000000000000011,\n"amount": 1790000000000000013\n}\n}'
        "\nDismiss"
    ), card


def test_the_json_editor_sends_numbers_as_typed(seen: dict[str, Any]) -> None:
    answered = _output(seen["events"]["json"])["answered"]
    assert answered == {"account": 1790000000000000015, "ratio": 1.0}
    assert type(answered["ratio"]) is float  # 1.0 as typed, not 1


NOT_EXACT = "beyond ±9007199254740991"


def test_without_source_text_access_the_page_says_where_numbers_may_be_rounded_and_sends_none(
    seen: dict[str, Any],
) -> None:
    legacy = seen["legacy"]
    assert legacy["rawJSON"] == "undefined"
    # the panel shows the double it read, and says it may be rounded
    assert "1790000000000000000" in legacy["arguments"], legacy["arguments"]
    assert "may be shown rounded. The server keeps them exact." in legacy["arguments"], legacy["arguments"]
    # its editor refuses to send the order id, and its resume form both large integers
    assert f"This browser cannot send numbers {NOT_EXACT} exactly (order_id: " in legacy["editorProblem"]
    assert len(legacy["formErrors"]) == 2, legacy["formErrors"]
    assert all(NOT_EXACT in error for error in legacy["formErrors"]), legacy["formErrors"]
    sent = [json.loads(s["body"])["variables"]["input"] for s in seen["sent"] if s["tab"] == "legacy"]
    assert [(s.get("editedArgs"), s.get("resumeData")) for s in sent] == [(None, None)], sent
    # a plain approval names the call only: the exact order was refunded
    order = 1790000000000000021
    assert f"Refund of ${_amount(order)}0 for order {order} issued." in legacy["card"], legacy["card"]
    assert "may be shown rounded" in legacy["card"], legacy["card"]
