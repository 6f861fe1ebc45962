"""Deadlines that remind and escalate, over HTTP (issue 45 part 3; docs/api.md "Reminders and
escalation").

A tool rule's ``remindAfter`` and ``escalateAfter`` give each question it covers a reminder and
an escalation: a ``reminded`` and an ``escalated`` event in the run's trail, each once, sent as
the signed webhooks ``call.reminded`` and ``call.escalated``. A question decided first gets
neither. On the memory store, a SQLite file and MongoDB.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from server.settings import WebhookConfig

from .._auth import ALL, TestKey
from .._graphql import REFUND, REFUND_PROMPT, SUPERVISOR, TWO_REFUNDS_PROMPT, WAIT, GraphQLClient
from .._receiver import Receiver, new_secret, receiving
from .conftest import Serve

NOTICES = [{"tool": "issue_refund", "remindAfter": 0.3, "escalateAfter": 0.6, "expiresAfter": 3600}]
FAST = {"webhook_poll_interval": 0.05, "subscription_lookback": 1.0, "public_url": "https://runs.example.com"}

AUDITOR = TestKey("auditor", "rg_test_auditor_0123456789abcdefghijklmnopqrstuvwxyz", (*ALL, "webhooks:read"))


async def _events_until(
    gql: GraphQLClient, run_id: str, kinds: set[str], agent_id: str = REFUND
) -> list[dict[str, Any]]:
    async with asyncio.timeout(WAIT):
        while True:
            events = await gql.run_events(agent_id, run_id)
            if kinds <= {e["type"] for e in events}:
                return events
            await asyncio.sleep(0.05)


async def test_a_waiting_question_is_reminded_then_escalated_once_each(serve: Serve) -> None:
    with receiving(new_secret()) as receiver:
        hook = WebhookConfig.model_validate(
            {"url": receiver.url, "secret": receiver.secret, "events": ["call.reminded", "call.escalated"]}
        )
        served = await serve(tool_rules=NOTICES, webhooks=[hook], keys=[AUDITOR], **FAST)
        gql = served.client(AUDITOR)
        # given a run with two questions, one decided at once, one left waiting
        run = await gql.suspend(REFUND, TWO_REFUNDS_PROMPT)
        decided, call = run["toolCalls"]
        await gql.approve(REFUND, run["runId"], decided["toolCallId"])

        # when the reminder and the escalation fall due
        events = await _events_until(gql, run["runId"], {"reminded", "escalated"})
        await asyncio.sleep(0.3)  # time for a second recording, were there one
        events = await gql.run_events(REFUND, run["runId"])

        # then the waiting one was reminded, then escalated, once each, by the deadline
        notices = [e for e in events if e["type"] in ("reminded", "escalated")]
        waiting = [e for e in notices if e["data"]["toolCallId"] == call["toolCallId"]]
        assert [(e["type"], e["by"]) for e in waiting] == [("reminded", "deadline"), ("escalated", "deadline")]
        assert all(isinstance(e["data"]["questionId"], str) for e in waiting)
        # and the decided one never after its decision (a loaded machine may remind it before)
        decision = next(i for i, e in enumerate(events) if e["type"] == "decision")
        assert all(e["data"]["toolCallId"] != decided["toolCallId"] for e in events[decision:] if e in notices)
        # and each was sent as a signed webhook naming the question
        notified = {e["id"] for e in waiting}
        await asyncio.to_thread(
            receiver.wait_for, lambda r: notified <= {x.payload["data"]["eventId"] for x in r.received}
        )
        _assert_sent(receiver, run["runId"], call["toolCallId"], notified)


def _assert_sent(receiver: Receiver, run_id: str, tool_call_id: str, event_ids: set[str]) -> None:
    sent = [r for r in receiver.received if r.payload["data"]["eventId"] in event_ids]
    assert sorted(r.payload["type"] for r in {r.payload["data"]["eventId"]: r for r in sent}.values()) == [
        "call.escalated",
        "call.reminded",
    ]
    for received in sent:
        assert received.verified
        data = received.payload["data"]
        assert data["runId"] == run_id
        assert data["event"]["data"]["toolCallId"] == tool_call_id
        assert tool_call_id in [c["toolCallId"] for c in data["pendingCalls"]]


async def test_a_rule_without_notices_sends_none(serve: Serve) -> None:
    served = await serve(tool_rules=[{"tool": "issue_refund", "expiresAfter": 3600}], **FAST)
    gql = served.client()
    run = await gql.suspend(REFUND, REFUND_PROMPT)
    await asyncio.sleep(0.3)
    kinds = [e["type"] for e in await gql.run_events(REFUND, run["runId"])]
    assert kinds == ["started", "suspended"]


def test_a_rule_with_notices_is_accepted() -> None:
    from server.settings import ToolRuleConfig

    rule = ToolRuleConfig.model_validate(
        {"tool": "issue_refund", "remindAfter": 60, "escalateAfter": 120, "recipients": {"escalated": ["key:boss"]}}
    )
    assert rule.model_dump()["recipients"] == {"waiting": [], "reminded": [], "escalated": ["key:boss"]}


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"tool": "issue_refund", "remindAfter": 0}, "remindAfter"),
        ({"tool": "issue_refund", "escalateAfter": -1}, "escalateAfter"),
        ({"tool": "issue_refund", "recipients": {"waiting": ["alice"]}}, "recipients"),
        ({"tool": "issue_refund", "recipients": {"later": ["key:alice"]}}, "recipients"),
    ],
)
def test_a_wrong_notice_setting_is_refused(rule: dict[str, Any], message: str) -> None:
    from pydantic import ValidationError

    from server.settings import ToolRuleConfig

    with pytest.raises(ValidationError, match=message):
        ToolRuleConfig.model_validate(rule)


ESCALATED_QUEUE = """
query($filter: ReviewQueueFilter) {
  reviewQueue(filter: $filter, first: 10) { totalCount nodes { runId toolCallId escalated } }
}"""


async def test_an_escalated_question_says_so_in_the_queue(serve: Serve) -> None:
    served = await serve(tool_rules=NOTICES, **FAST)
    gql = served.client()
    run = await gql.suspend(REFUND, REFUND_PROMPT)
    (call,) = run["toolCalls"]
    await _events_until(gql, run["runId"], {"escalated"})

    queue = (await gql.data(ESCALATED_QUEUE))["reviewQueue"]
    assert [(n["runId"], n["toolCallId"], n["escalated"]) for n in queue["nodes"]] == [
        (run["runId"], call["toolCallId"], True)
    ]
    escalated = (await gql.data(ESCALATED_QUEUE, filter={"escalated": True}))["reviewQueue"]
    assert [n["runId"] for n in escalated["nodes"]] == [run["runId"]]
    not_escalated = (await gql.data(ESCALATED_QUEUE, filter={"escalated": False}))["reviewQueue"]
    assert not_escalated["nodes"] == []


async def test_a_sub_runs_question_is_noticed_only_on_its_supervisors_run(serve: Serve) -> None:
    served = await serve(tool_rules=NOTICES, **FAST)
    gql = served.client()
    outer = await gql.suspend(SUPERVISOR, REFUND_PROMPT)
    events = await _events_until(gql, outer["runId"], {"reminded", "escalated"}, SUPERVISOR)
    await asyncio.sleep(0.3)  # time for the sub-run's notices, were there any

    noticed = [e for e in events if e["type"] in ("reminded", "escalated")]
    assert [e["type"] for e in noticed] == ["reminded", "escalated"]
    sub_runs = (await gql.suspended_runs(REFUND))["nodes"]
    assert sub_runs, "the supervisor's refund waits in a sub-run of refund-agent"
    for sub_run in sub_runs:
        kinds = [e["type"] for e in await gql.run_events(REFUND, sub_run["runId"])]
        assert "reminded" not in kinds, kinds
        assert "escalated" not in kinds, kinds
