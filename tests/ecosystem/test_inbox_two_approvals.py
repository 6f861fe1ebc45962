"""Two reviewers' tabs on the inbox's queue page while a refund needs two approvals (issue 45 part 6).

``inbox-two-approvals.mjs`` opens alice's tab and bob's tab on a server whose tool rules ask two
approvals of each refund; alice approves the first of two refunds ("1 of 2"). Bob's tab logs a line
that says so (not an empty one, as when a message that enters his queue had no line), and alice's
card, which the server drops from her own queue (she may not approve twice), keeps its place with
its result, so the next card's Approve button does not move.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .._auth import TestKey, api_keys_json
from .._servers import runsgate_process
from ._node import OUTPUT, run_node_json
from .test_graphiql_browser import chromium  # noqa: F401  (the fixture)

pytestmark = pytest.mark.usefixtures("node_tools")

ALICE = TestKey("alice", "rg_test_alice_0123456789abcdefghijklmnopqrstuvwxyz")
BOB = TestKey("bob", "rg_test_bob_0123456789abcdefghijklmnopqrstuvwxyzab")
TWO_APPROVALS = [{"tool": "issue_refund", "agentId": "refund-agent", "approvals": 2}]


@pytest.fixture(scope="module")
def seen(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: F811
    OUTPUT.mkdir(exist_ok=True)
    log = tmp_path_factory.mktemp("inbox-two-approvals") / "runsgate.log"
    variables = {
        "RUNSGATE_AUTH": "on",
        "RUNSGATE_API_KEYS": api_keys_json(ALICE, BOB),
        "RUNSGATE_TOOL_RULES": json.dumps(TWO_APPROVALS),
    }
    with runsgate_process(log, **variables) as base_url:
        found: dict[str, Any] = run_node_json(
            "inbox-two-approvals.mjs",
            base_url,
            str(OUTPUT),
            ALICE.key,
            BOB.key,
            env={"CHROMIUM_BIN": chromium},
            timeout=300,
        )
    assert found["pageErrors"] == []
    assert found["cspViolations"] == []
    return found


def _step(seen: dict[str, Any], name: str) -> None:
    """The script's step ``name`` went to its end."""
    assert name not in seen["errors"], seen["errors"][name]


def test_another_reviewers_first_approval_logs_a_line_that_says_so(seen: dict[str, Any]) -> None:
    _step(seen, "approval")
    approval, first = seen["approval"], seen["runs"]["first"]
    assert approval["line"] is not None, approval["lines"]
    assert f"on run {first}: approved by key:alice, more approvals needed." in approval["line"], approval
    assert "" not in approval["lines"], approval["lines"]


def test_the_approvers_card_keeps_its_place_with_its_result(seen: dict[str, Any]) -> None:
    _step(seen, "settled")
    settled = seen["settled"]
    assert settled["slot"] is not None, settled
    assert settled["slot"]["text"].startswith("Approved: issue_refund (call "), settled
    assert settled["slot"]["text"].endswith(
        f"on run {seen['runs']['first']}: 1 of 2 approvals given; waits for another approver."
    ), settled
    assert settled["slot"]["height"] == pytest.approx(settled["height"], abs=1), settled
    # the next card's Approve button stayed where it was, at every frame
    assert settled["nextPlaces"] == [round(settled["nextBefore"])], settled
