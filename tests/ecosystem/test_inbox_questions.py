"""Each inbox action decides the question its card showed, and says so when someone else decided
it first, in headless Chromium (issue 41 part 1, the inbox's side).

One tool call may ask two questions in turn: the supervisor's delegated call shows the refund of
order 1042, then, once approved, the refund of order 1043 under the same ``toolCallId``;
json-echo's ``ask_twice`` asks twice for data. ``inbox-questions.mjs`` shows the first question in
Y's page, holds Y's listing as it was while X decides that question through the API, then lets Y
act on the card it still shows, with each action of the page. Each must name the card's
``questionId``, change nothing on the server, tell Y that someone else decided first, and show the
call's new question in its place.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from .._auth import TestKey
from .._graphql import data
from .._servers import runsgate_process
from ._node import OUTPUT, run_node_json
from .test_graphiql_browser import chromium  # noqa: F401  (the fixture)

pytestmark = pytest.mark.usefixtures("node_tools")

X = TestKey("reviewer-x", "rg_test_reviewer_x_0123456789abcdefghijklmnopqrstuv")
Y = TestKey("reviewer-y", "rg_test_reviewer_y_0123456789abcdefghijklmnopqrstuv")
RUN = """
query R($agentId: ID!, $runId: ID!) {
  suspendedRun(agentId: $agentId, runId: $runId) { toolCalls { toolCallId questionId args decision { kind } } }
}
"""
STALE = "issue 41 part 1: the inbox decides a call by its toolCallId, whatever question it asks now"
SHOWN = "The run is shown as it is now, with the call's new question if it asks one."
NOT_PENDING = f"not recorded: the question it answered is no longer pending, someone else decided it first. {SHOWN}"
AGENTS = {"approve": "support-supervisor", "decline": "support-supervisor", "edit": "support-supervisor"}
AGENTS |= {"bulk": "support-supervisor", "resume": "json-echo"}
WHAT = {
    "approve": "Approval of issue_refund",
    "decline": "Decline of issue_refund",
    "edit": "Approval with edited arguments of issue_refund",
    "resume": "Resume of ask_twice",
}
CALL = r"\w+ \(call [^)]+\)"
"""A call as the activity log names it: ``issue_refund (call c_0854ee96…: order_id 1042, amount 49.9)``."""


@pytest.fixture(scope="module")
def seen(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: F811
    OUTPUT.mkdir(exist_ok=True)
    log = tmp_path_factory.mktemp("inbox-questions") / "runsgate.log"
    variables = {
        "RUNSGATE_AUTH": "on",
        "RUNSGATE_API_KEYS": json.dumps([X.entry(), Y.entry()]),
        "RUNSGATE_AGENTS": "tests._json_agent:AGENTS",
    }
    with runsgate_process(log, **variables) as base_url:
        found: dict[str, Any] = run_node_json(
            "inbox-questions.mjs", base_url, str(OUTPUT), X.key, Y.key, env={"CHROMIUM_BIN": chromium}, timeout=300
        )
        # each run as stored once Y's page acted
        found["stored"] = {
            name: data(base_url, X, RUN, agentId=AGENTS[name], runId=run_id)["suspendedRun"]
            for name, run_id in found["runs"].items()
        }
    assert found["pageErrors"] == []
    assert found["cspViolations"] == []
    return found


def _check(seen: dict[str, Any], name: str, decision: dict[str, Any]) -> None:
    """Y's page sent ``decision`` for the first question, was refused, said so, and shows the second."""
    run_id, question, path = seen["runs"][name], seen["questions"][name], seen["paths"][name]
    sent = {"runId": run_id, "toolCallId": question["toolCallId"], "questionId": question["first"], **decision}
    assert len(path["sent"]) == 1, path["sent"]
    (input_,) = path["sent"]
    if name == "bulk":
        (input_,) = input_["decisions"]
    assert {key: input_.get(key) for key in sent} == sent, input_
    # nothing changed on the server: the second question still waits
    stored = seen["stored"][name]
    assert stored is not None, f"{name}: the run left the store, its second question decided"
    (call,) = stored["toolCalls"]
    assert (call["questionId"], call["decision"]) == (question["second"], None), call
    # the page said why (the server may name the decision that won instead), naming the call (a
    # bulk action's item begins with it, another line ends with it and what the reviewer changed),
    # and shows the call's new question in place of the one it decided
    if name == "bulk":
        prefix, suffix = CALL + re.escape(f" on run {run_id}: "), ""
    else:
        prefix, suffix = re.escape(f"{WHAT[name]} on run {run_id}: "), rf" Call: {CALL}(; .+)?\."
    already = r"not recorded, the call was already \w+ by key:reviewer-x at [^.]+ UTC\. " + re.escape(SHOWN)
    why = [re.escape(NOT_PENDING), already]
    assert any(re.fullmatch(prefix + reason + suffix, path["message"]) for reason in why), path["message"]
    assert path["after"] is not None, name


def test_approve_decides_only_the_question_shown(seen: dict[str, Any]) -> None:
    _check(seen, "approve", {})
    assert '"order_id": 1043' in seen["paths"]["approve"]["after"]


def test_decline_decides_only_the_question_shown(seen: dict[str, Any]) -> None:
    _check(seen, "decline", {"reason": "Not this one"})


def test_an_edit_decides_only_the_question_shown(seen: dict[str, Any]) -> None:
    _check(seen, "edit", {"editedArgs": {"order_id": 1042, "amount": 25}})


def test_the_bulk_bar_decides_only_the_question_shown(seen: dict[str, Any]) -> None:
    _check(seen, "bulk", {"kind": "APPROVED"})


def test_the_resume_form_answers_only_the_question_shown(seen: dict[str, Any]) -> None:
    _check(seen, "resume", {"resumeData": {"from": "Y"}})
    assert "Question\nxxxxxxxxxx\n" in seen["paths"]["resume"]["after"]  # the text payload, as the question
