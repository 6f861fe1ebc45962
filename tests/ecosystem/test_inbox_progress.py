"""What the inbox shows after a decision, in headless Chromium (issue 29 part 3, "Progress").

``inbox-progress.mjs`` signs in with an API key against a server whose ``refund-agent`` streams its
answer slowly (``_paced_agents``), approves a refund, declines one while its progress stream is
ended early (as a server shutting down ends it), approves two in bulk, approves one refund of a run
whose other refund its deadline declined, and records every state of
each run's progress card, the ``runUpdates`` messages the server sent, the text contrast of every
element of the cards, and axe-core's violations. It runs once for the module; each test checks one
thing. Screenshots are left in ``tests/ecosystem/output/`` (git-ignored).
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
UNAUTHORIZED = "Failed to load resource: the server responded with a status of 401 (Unauthorized)"
REFUNDED = "Refund of $49.90 for order 1042 issued."
"""The paced refund agent's answer once the refund of order 1042 ran."""
EXPIRING_REFUNDS = json.dumps([{"tool": "issue_refund", "argument": "amount", "above": 500, "expiresAfter": 1}])
"""The server's rules: a refund over $500 (the demo's order 1045) waits 1 s for its approval, then
is declined by ``expiry``; the others wait."""


def _lines(text: str) -> str:
    """``text`` as shown (``innerText``), without the blank lines between paragraphs."""
    return "\n".join(line for line in text.splitlines() if line.strip())


def _unindented(text: str) -> str:
    return "\n".join(line.strip() for line in text.splitlines())


@pytest.fixture(scope="module")
def seen(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: F811
    OUTPUT.mkdir(exist_ok=True)
    log = tmp_path_factory.mktemp("inbox-progress") / "runsgate.log"
    keys = json.dumps([ADMIN.entry()])
    variables = {
        "RUNSGATE_AUTH": "on",
        "RUNSGATE_API_KEYS": keys,
        "RUNSGATE_AGENTS": "tests.ecosystem._paced_agents:AGENTS",
        "RUNSGATE_TOOL_RULES": EXPIRING_REFUNDS,
        "RUNSGATE_SWEEP_INTERVAL": "0.2",
    }
    with runsgate_process(log, **variables) as base_url:
        found: dict[str, Any] = run_node_json(
            "inbox-progress.mjs", base_url, str(OUTPUT), ADMIN.key, env={"CHROMIUM_BIN": chromium}, timeout=300
        )
    assert found["pageErrors"] == []
    assert found["cspViolations"] == []
    # the one request refused before the key was typed in
    assert found["consoleErrors"] == [UNAUTHORIZED]
    return found


def test_a_decision_is_sent_to_answer_once_recorded(seen: dict[str, Any]) -> None:
    # the approval asked not to wait for the continuation, and the activity log says so
    (sent,) = seen["approve"]["sent"]
    assert sent["waitFor"] == "RECORDED", sent
    expected = f"Approval of issue_refund on run {seen['runs']['approve']}: recorded, continuing…"
    assert any(expected in line for line in seen["approve"]["activity"]), seen["approve"]["activity"]


def test_an_approval_shows_recorded_then_the_deltas_as_they_stream_then_the_outcome(seen: dict[str, Any]) -> None:
    shown = seen["approve"]["shown"]
    # first "Recorded, continuing…", before any update
    assert "Recorded, continuing…" in shown[0]["card"], shown[0]
    # then the model's text, growing a delta at a time, before any outcome is shown
    texts = [state["text"] for state in shown if state["text"] and "Completed." not in state["card"]]
    assert len(texts) >= 3, texts
    assert all(REFUNDED.startswith(text) for text in texts), texts
    assert texts == sorted(texts, key=len), texts
    assert texts[0] != REFUNDED, texts
    assert all("Continuing…" in state["card"] for state in shown if state["text"] and "Completed." not in state["card"])
    # then the outcome, with the output, after the tool call the approval let run and the text
    final = _lines(seen["approve"]["final"])
    assert final.startswith(f"Run {seen['runs']['approve']} (refund-agent)\n"), final
    assert "\nCompleted\n" in final, final
    call = 'Tool call issue_refund ended\nArguments\n{\n"order_id": 1042,\n"amount": 49.9\n}\nResult\n' + REFUNDED
    assert call in _unindented(final), final
    assert final.endswith(f"{REFUNDED}\nCompleted. Output:\n{REFUNDED}\nDismiss"), final
    # the server streamed the call's start and end, several TEXT updates, and the outcome after them
    kinds = [update["kind"] for update in seen["updates"][seen["runs"]["approve"]] if update["type"] == "next"]
    assert kinds[0] == "RESUMED", kinds
    assert kinds.index("TOOL_CALL_STARTED") < kinds.index("TOOL_CALL_ENDED") < kinds.index("TEXT"), kinds
    assert kinds.count("TEXT") >= 3, kinds
    assert kinds[-1] == "COMPLETED", kinds
    assert max(i for i, kind in enumerate(kinds) if kind == "TEXT") < kinds.index("COMPLETED")


def test_the_progress_is_a_polite_live_region(seen: dict[str, Any]) -> None:
    assert seen["approve"]["live"] == ["polite"]


def test_a_stream_ended_early_is_shown_and_the_run_read_again(seen: dict[str, Any]) -> None:
    run_id = seen["runs"]["cut"]
    cut = seen["cut"]
    # the stream ended (as a server shutting down ends it) after the first delta
    kinds = [update["kind"] for update in seen["updates"][run_id] if update["type"] == "next"]
    assert kinds[-1] == "TEXT", kinds
    # the card says so, and the page read the run again, until its outcome
    assert any(
        "Live progress stopped (SHUTTING_DOWN: the server is shutting down)." in state["card"] for state in cut["shown"]
    )
    # at once, while the run still continued, and again once its live events said it completed
    assert any("Read again: the run is still continuing;" in state["card"] for state in cut["shown"]), cut["shown"]
    assert len(cut["reads"]) >= 2, cut["reads"]
    assert all(read == {"agentId": "refund-agent", "runId": run_id} for read in cut["reads"]), cut["reads"]
    final = _lines(cut["final"])
    told = "The refund for order 1043 was not issued: The user declined this tool call. Reason: Refunded by phone"
    assert final.endswith(
        f"Live progress stopped (SHUTTING_DOWN: the server is shutting down). Read again:\nCompleted. Output:\n{told}"
        "\nDismiss"
    ), final
    # the stream had shown the declined call, as declined, and the first delta of the answer
    assert "\nTool call issue_refund declined by " in final
    assert "\nReason\nRefunded by phone\nThe \n" in final


def test_a_declined_call_is_shown_declined_with_its_reason_and_never_as_started(seen: dict[str, Any]) -> None:
    # declined by a person: the reviewer's reason, by whom, and no start nor end of a tool
    cut = _lines(seen["cut"]["final"])
    (by,) = {e["by"] for e in seen["events"]["cut"] if e["type"] == "decision"}
    assert f"Tool call issue_refund declined by {by}\nReason\nRefunded by phone\nThe \n" in cut, cut
    assert "Tool call issue_refund started" not in cut, cut
    assert "Tool call issue_refund ended" not in cut, cut
    assert "What the model was told" not in cut, cut
    # declined by its deadline: said so, with the reason the model was given; the approved call ran
    expiry = _lines(seen["expiry"]["final"])
    (declined,) = [e for e in seen["events"]["expiry"] if e["type"] == "decision" and e["by"] == "expiry"]
    reason = declined["data"]["reason"]
    assert reason.startswith("The approval request for this call expired at "), reason
    assert f"Tool call issue_refund declined on expiry\nReason\n{reason}\n" in expiry, expiry
    assert expiry.count("Tool call issue_refund ended\n") == 1, expiry
    assert "ended with an error" not in expiry, expiry
    assert "Tool call issue_refund started" not in expiry, expiry
    assert expiry.endswith(
        f"Completed. Output:\n{REFUNDED} The refund for order 1045 was not issued: {reason}\nDismiss"
    ), expiry
    # as the server streamed them: one declined call each, the expiry run's approved call started once
    for run in ("cut", "expiry"):
        kinds = [update["kind"] for update in seen["updates"][seen["runs"][run]] if update["type"] == "next"]
        assert kinds.count("TOOL_CALL_DECLINED") == 1, kinds
        assert kinds.count("TOOL_CALL_STARTED") == (1 if run == "expiry" else 0), kinds


def test_a_bulk_decision_shows_each_runs_progress_to_its_outcome(seen: dict[str, Any]) -> None:
    for run_id, final in zip(seen["runs"]["bulk"], seen["bulk"]["finals"], strict=True):
        assert final.startswith(f"Run {run_id} (refund-agent)\n"), final
        assert _lines(final).endswith(f"Completed. Output:\n{REFUNDED}\nDismiss"), final


def test_every_new_element_keeps_its_text_readable_at_rest_hovered_and_focused(seen: dict[str, Any]) -> None:
    tags = {element["tag"] for element in seen["contrast"]}
    # the state, the streamed text, a tool call, an outcome, the note of a stream ended early, Dismiss
    for tag in ("p.state", "li.text", "li.tool", "p.outcome ok", "p.problem", "button"):
        assert tag in tags, tags
    low = [
        f"{element['tag']} {element['label']!r} {state} {measured['color']} on {measured['background']}: "
        f"{measured['ratio']}"
        for element in seen["contrast"]
        for state, measured in element["states"].items()
        if measured["ratio"] < MIN_CONTRAST
    ]
    assert low == [], "\n".join(low)


def test_axe_finds_no_violation_with_the_progress_shown(seen: dict[str, Any]) -> None:
    assert len(seen["axe"]) == 2
    for check in seen["axe"]:
        assert check["violations"] == [], f"{check['label']}: {json.dumps(check['violations'], indent=1)}"


def test_a_finished_runs_progress_can_be_dismissed(seen: dict[str, Any]) -> None:
    assert seen["dismissed"] is True
