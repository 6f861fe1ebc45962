"""The inbox as the reviewers' queue's page (issue 45 part 6), in headless Chromium.

``inbox-review-queue.mjs`` signs the page in with an API key against a server with the
``json-echo`` test agent and deadlines on refunds, while a second reviewer claims questions
through the API. It records the queue's order across agents, review claims shown, taken and
released, the queue's filters, live updates (one subscription, resumed after a reconnection), a
bulk decision across two agents, the per-agent listing kept at ``?view=agents``, and axe-core's
violations. It runs once for the module; the screenshot of docs/inbox.md is a copy of
``tests/ecosystem/output/inbox-review-queue-claims.png``.
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

OTHER = TestKey("reviewer-b", "rg_test_reviewer_b_0123456789abcdefghijklmnopqrstuv")
"""Another reviewer, who claims questions through the API while the page is open."""

DEADLINES = [
    {"tool": "issue_refund", "agentId": "refund-agent", "expiresAfter": 600},
    {"tool": "issue_refund", "agentId": "refund-agent", "argument": "amount", "above": 100, "expiresAfter": 300},
]
"""A refund waits 600 s, one over $100 (order 1043) 300 s: started first, it is still due first."""


@pytest.fixture(scope="module")
def seen(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: F811
    OUTPUT.mkdir(exist_ok=True)
    log = tmp_path_factory.mktemp("inbox-review-queue") / "runsgate.log"
    variables = {
        "RUNSGATE_AUTH": "on",
        "RUNSGATE_API_KEYS": api_keys_json(ADMIN, OTHER),
        "RUNSGATE_AGENTS": "tests._json_agent:AGENTS",
        "RUNSGATE_TOOL_RULES": json.dumps(DEADLINES),
    }
    with runsgate_process(log, **variables) as base_url:
        found: dict[str, Any] = run_node_json(
            "inbox-review-queue.mjs",
            base_url,
            str(OUTPUT),
            ADMIN.key,
            OTHER.key,
            env={"CHROMIUM_BIN": chromium},
            timeout=600,
        )
    assert found["pageErrors"] == []
    assert found["cspViolations"] == []
    return found


def _step(seen: dict[str, Any], name: str) -> None:
    """The script's step ``name`` went to its end."""
    assert name not in seen["errors"], seen["errors"][name]


def test_one_listing_in_the_queues_order_across_agents(seen: dict[str, Any]) -> None:
    _step(seen, "queue")
    queue, runs = seen["queue"], seen["runs"]
    # one listing across agents, not one per agent
    assert [h for h in queue["headings"] if h.startswith("Review queue")], queue["headings"]
    assert not [h for h in queue["headings"] if h.startswith(("refund-agent", "weather-agent"))], queue["headings"]
    # the earliest deadline first (1043, over $100, though started first), then 1042, then the
    # weather run without a deadline
    assert queue["order"] == [runs["r1043"], runs["r1042"], runs["weather"]], queue["order"]


def test_another_reviewers_claim_is_shown_and_approve_stays(seen: dict[str, Any]) -> None:
    _step(seen, "queue")
    queue = seen["queue"]
    assert "Being reviewed by key:reviewer-b since " in queue["claimOther"], queue
    assert " UTC" in queue["claimOther"], queue
    # advice, not a lock: Approve stays, and there is no Claim on another's claim
    assert (queue["approveOther"], queue["claimButtons"]) == (1, 0), queue


def test_claim_and_release_name_the_question(seen: dict[str, Any]) -> None:
    _step(seen, "claim")
    _step(seen, "release")
    runs = seen["runs"]
    (claim,) = seen["claim"]["sent"]
    assert claim["operation"] == "InboxClaimReview", claim
    assert set(claim["input"]) == {"agentId", "runId", "toolCallId", "questionId"}, claim
    assert (claim["input"]["agentId"], claim["input"]["runId"]) == ("refund-agent", runs["r1043"]), claim
    assert "Being reviewed by you since " in seen["claim"]["text"], seen["claim"]
    (release,) = seen["release"]["sent"]
    assert release["operation"] == "InboxReleaseReview", release
    assert release["input"] == claim["input"], release
    assert "Being reviewed" not in seen["release"]["text"], seen["release"]


def test_filters_are_the_queues(seen: dict[str, Any]) -> None:
    _step(seen, "filters")
    filters, runs = seen["filters"], seen["runs"]
    assert filters["claimedByMe"] == [runs["r1043"]], filters
    assert filters["unclaimed"] == [runs["weather"]], filters
    assert filters["tools"] == [runs["r1043"], runs["r1042"]], filters
    sent = [f for f in filters["sent"] if f]
    assert {"claimedByMe": True} in sent, sent
    assert {"unclaimed": True} in sent, sent
    assert {"toolNames": ["issue_refund"]} in sent, sent


def test_claims_and_new_runs_appear_live(seen: dict[str, Any]) -> None:
    _step(seen, "live")
    live, runs = seen["live"], seen["runs"]
    assert "Being reviewed by key:reviewer-b since " in live["claim"], live
    # a new refund (due in 600 s) comes after 1042 (due earlier), before the weather run
    assert live["order"] == [runs["r1043"], runs["r1042"], runs["late"], runs["weather"]], live


def test_the_queue_follows_one_subscription_of_its_own(seen: dict[str, Any]) -> None:
    _step(seen, "stream")
    _step(seen, "reconnect")
    stream = seen["stream"]
    # one subscription for the queue, not one per agent (three agents here)
    assert stream["openBefore"] == ["reviewQueueEvents"], stream
    assert stream["openAfter"] == ["reviewQueueEvents"], stream


def test_another_reviewers_decision_names_the_call_and_the_change(seen: dict[str, Any]) -> None:
    _step(seen, "stream")
    line = seen["stream"]["decisionLine"]
    assert "by key:reviewer-b: issue_refund (call " in line, line
    assert 'declined, reason "Refunded by phone"' in line, line


def test_after_a_reconnection_the_queue_resumes_after_its_last_message(seen: dict[str, Any]) -> None:
    _step(seen, "reconnect")
    stream, runs = seen["stream"], seen["runs"]
    # the page subscribes again after the last message it had, so what happened while it was
    # disconnected comes as messages: another principal's new question enters, logged as one
    assert stream["lastQueueId"], stream
    assert stream["resubscribed"] == [{"operation": "reviewQueueEvents", "afterEventId": stream["lastQueueId"]}], stream
    assert f"New question on run {runs['missed']} (refund-agent): issue_refund (call " in stream["enteredLine"], stream
    assert "order_id 2002" in stream["enteredLine"], stream


def test_a_bulk_decision_sends_one_mutation_per_agent(seen: dict[str, Any]) -> None:
    _step(seen, "bulk")
    runs, sent = seen["runs"], seen["bulk"]["sent"]
    assert [item["operation"] for item in sent] == ["InboxDecideMany", "InboxDecideMany"], sent
    by_agent = {item["input"]["agentId"]: [d["runId"] for d in item["input"]["decisions"]] for item in sent}
    assert by_agent == {"refund-agent": [runs["late"]], "json-echo": [runs["hold"]]}, by_agent


def test_a_whole_number_of_seconds_waited_is_shown(seen: dict[str, Any]) -> None:
    # the server writes a float as Python does (`60.0`); the page keeps such a number as the text
    # it is (JSON.rawJSON); compared with 60 as such, it threw and the page went blank
    whole = seen.get("whole", {})
    assert whole.get("pageErrors") == [], whole
    _step(seen, "whole")
    assert whole["waited"], whole
    assert all(text.startswith("1 min") for text in whole["waited"]), whole


def test_the_per_agent_listing_stays_at_view_agents(seen: dict[str, Any]) -> None:
    _step(seen, "agents")
    headings = seen["agents"]["headings"]
    assert [h for h in headings if h.startswith("refund-agent")], headings
    assert not [h for h in headings if h.startswith("Review queue")], headings


def test_axe_finds_no_violation_on_the_queue(seen: dict[str, Any]) -> None:
    labels = [check["label"] for check in seen["axe"]]
    assert labels == ["the queue", "a question claimed", "the queue filtered", "after a bulk decision across agents"], (
        labels
    )
    for check in seen["axe"]:
        assert check["violations"] == [], f"{check['label']}: {json.dumps(check['violations'], indent=1)}"
