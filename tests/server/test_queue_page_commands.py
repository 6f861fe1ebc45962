"""The MongoDB commands one ``reviewQueue`` page with its ``totalCount`` sends, beside one
``suspendedRuns`` page with its total (issue 45 "Cost"), on FerretDB 2.5 over DocumentDB, over HTTP.

Each command the app's client sends while one GraphQL request is answered is recorded through
PyMongo's command monitoring (``Commands``: every client made after this module's import reports
to it); no time is measured.
"""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import monitoring

from storage.mongo import review

from .._graphql import REFUND, REFUND_PROMPT, WEATHER, WEATHER_PROMPT, GraphQLClient
from .conftest import Serve

pytestmark = pytest.mark.mongo

QUEUE_PAGE = """{
  reviewQueue(first: 20) {
    totalCount
    edges { cursor node {
      agentId runId toolCallId questionId toolName waitedSeconds expiresAt escalated
      run { runId agentId status suspendedAt toolCalls { toolCallId toolName args } }
      toolCall { toolCallId questionId args }
      reviewClaim { by since until byMe }
    } }
  }
}"""
LISTING_PAGE = """query($agentId: ID!) {
  suspendedRuns(agentId: $agentId, first: 20) {
    totalCount
    edges { cursor node { runId status threadId resourceId createdAt suspendedAt
      toolCalls { toolCallId toolName args requiresApproval suspendPayload } } }
  }
}"""


class Commands(monitoring.CommandListener):
    """Every command sent while ``recording`` is a list (appended to it, as sent)."""

    def __init__(self) -> None:
        self.recording: list[dict[str, Any]] | None = None

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if self.recording is not None:
            self.recording.append(dict(event.command))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


COMMANDS = Commands()
monitoring.register(COMMANDS)


async def sent(
    gql: GraphQLClient, document: str, *, in_order: bool = False, **variables: Any
) -> list[tuple[str, str, Any]]:
    """``(command, collection, limit)`` of each command sent while ``document`` was answered
    (``limit`` ``None`` when the command has none), sorted, or as sent when ``in_order``."""
    COMMANDS.recording = commands = []
    try:
        await gql.data(document, **variables)
    finally:
        COMMANDS.recording = None
    named = [(name := next(iter(command)), str(command[name]), command.get("limit")) for command in commands]
    return named if in_order else sorted(named, key=repr)


@pytest.mark.parametrize("serve", ["mongo"], indirect=True)
async def test_a_queue_page_with_its_total_sends_what_a_listing_page_does(serve: Serve) -> None:
    served = await serve(tool_rules=[{"tool": "issue_refund", "agentId": REFUND, "expiresAfter": 600}])
    gql = served.client()
    # given 30 waiting runs of two agents: more than a page of 20
    for number in range(15):
        await gql.suspend(REFUND, REFUND_PROMPT, resourceId=f"customer-{number}")
        await gql.suspend(WEATHER, WEATHER_PROMPT)

    queue = await sent(gql, QUEUE_PAGE)
    listing = await sent(gql, LISTING_PAGE, agentId=REFUND)

    # the queue: one find of 21 questions (the page and whether more follow) and its kept-count
    # total (the runs and the events not yet counted, then the counts)
    page_and_total = [
        ("find", "run_counts", None),
        ("find", "run_events", None),
        ("find", "run_snapshots", 21),
        ("find", "run_snapshots", None),
    ]
    assert queue == page_and_total
    # the listing: the same, and since its page of 15 runs is short of 21, one more find from its
    # last run for it and the 6 left, which checks that nothing follows (``read_page``: a single
    # batch that the server cut at 16 MiB reads as short)
    assert listing == sorted([*page_and_total, ("find", "run_snapshots", 7)], key=repr)
    # so the queue reads as the listing does, never one read per item; the kept count's read of
    # the runs carrying moves also tells that no run holds an approval by the caller
    # (``refusal_candidates``' only part here), so no run is read where the gate could refuse it a question


APPROVE_FIRST = """mutation($input: ApproveToolCallInput!) {
  approveToolCall(input: $input) { ... on RunOutcome { status } }
}"""


async def approved_once(serve: Serve) -> GraphQLClient:
    """A server under a two-approver rule with three waiting refunds, on the first of which the
    caller gave the first of two approvals (the gate refuses it a second); its client."""
    served = await serve(tool_rules=[{"tool": "issue_refund", "approvals": 2}])
    gql = served.client()
    runs = [await gql.suspend(REFUND, REFUND_PROMPT, resourceId=f"customer-{number}") for number in range(3)]
    first = runs[0]
    given = {"agentId": REFUND, "runId": first["runId"], "toolCallId": first["toolCalls"][0]["toolCallId"]}
    assert (await gql.data(APPROVE_FIRST, input=given))["approveToolCall"] == {"status": "SUSPENDED"}
    return gql


@pytest.mark.parametrize("serve", ["mongo"], indirect=True)
async def test_a_queue_total_reads_its_candidates_after_its_kept_count(serve: Serve) -> None:
    gql = await approved_once(serve)

    commands = await sent(gql, QUEUE_PAGE, in_order=True)
    total = (await gql.data("{ reviewQueue(first: 20) { totalCount nodes { runId } } }"))["reviewQueue"]

    # the page beside its total, whose reads follow one another: the kept count's three, then the
    # candidate runs (a third command at once cost a loaded server more than one more round trip
    # after the count: bench/RESULTS.md "A queue page's commands"), read since its first read
    # found a run holding the caller's approval; the page of 3 questions, short of 21, and the one
    # candidate run, short of 500, are each checked by one more find from their last (``read_page``)
    # (the page's check and the count's first read go out side by side, in either order)
    candidates, counts = commands.index(("find", "run_snapshots", 500)), commands.index(("find", "run_counts", None))
    assert candidates > counts, commands
    assert commands[0] == ("find", "run_snapshots", 21), commands
    assert commands.index(("find", "run_snapshots", 19)) < candidates, commands
    assert commands[candidates + 1 :] == [("find", "run_snapshots", 500)], commands
    assert len(commands) == 7, commands
    assert total["totalCount"] == len(total["nodes"]) == 2, total


@pytest.mark.parametrize("serve", ["mongo"], indirect=True)
async def test_a_queue_total_past_the_approvals_its_count_reads_reads_them_apart(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = await serve(tool_rules=[{"tool": "issue_refund", "approvals": 2}])
    gql = served.client()
    runs = [await gql.suspend(REFUND, REFUND_PROMPT, resourceId=f"customer-{number}") for number in range(3)]
    for run in runs[:2]:  # the caller's first of two approvals, on two questions
        given = {"agentId": REFUND, "runId": run["runId"], "toolCallId": run["toolCalls"][0]["toolCallId"]}
        assert (await gql.data(APPROVE_FIRST, input=given))["approveToolCall"] == {"status": "SUSPENDED"}
    monkeypatch.setattr(review, "APPROVED_READ", 1)  # the count's first read holds one run at most

    commands = await sent(gql, QUEUE_PAGE, in_order=True)
    total = (await gql.data("{ reviewQueue(first: 20) { totalCount nodes { runId } } }"))["reviewQueue"]

    # past it, the runs carrying moves are read alone, then the candidates: the total stays exact
    # (the page of 3 and the 2 candidate runs, each short, are checked by one more find from their
    # last: ``read_page``)
    assert [command[1] for command in commands].count("run_snapshots") == 6, commands
    assert commands[-2:] == [("find", "run_snapshots", 500), ("find", "run_snapshots", 499)], commands
    assert total["totalCount"] == len(total["nodes"]) == 1, total
