"""The reviewers' queue and review claims (issue 45 sections 1 and 2), over HTTP.

``reviewQueue`` lists the pending questions the caller may decide across every agent, earliest
deadline first, then the oldest; questions without a deadline after, oldest first. ``claimReview``
and ``releaseReview`` mark a question as being reviewed by a principal: advice, never a lock,
ended by the decision's own write. On the memory, SQLite and MongoDB stores.
"""

from __future__ import annotations

from typing import Any

import pytest

from runtime.webhooks.messages import WEBHOOK_EVENT_TYPES

from .._auth import TestKey
from .._graphql import REFUND, REFUND_PROMPT, SUPERVISOR, TWO_REFUNDS_PROMPT, WEATHER, WEATHER_PROMPT, GraphQLClient
from .conftest import Serve

X = TestKey(
    "reviewer-x",
    "rg_test_reviewer_x_0123456789abcdefghijklmnopqrstuv",
    scopes=("runs:read", "runs:decide", "runs:start", "refunds:approve"),
)
Y = TestKey(
    "reviewer-y",
    "rg_test_reviewer_y_0123456789abcdefghijklmnopqrstuv",
    scopes=("runs:read", "runs:decide", "runs:start", "refunds:approve"),
)
NO_REFUNDS = TestKey("no-refunds", "rg_test_no_refunds_0123456789abcdefghijklmnopqrstu")
"""Lacks ``refunds:approve``: may not approve a refund the rules give that scope."""
CUSTOMER_7 = TestKey("customer-7-only", "rg_test_customer_7_0123456789abcdefghijklmnopqrstu", resources=("customer-7",))

DEADLINES = [
    {"tool": "issue_refund", "agentId": REFUND, "expiresAfter": 600},
    {"tool": "issue_refund", "agentId": REFUND, "argument": "amount", "above": 100, "expiresAfter": 300},
]
"""A refund waits 600 s, one over $100 300 s: a later start may be due first."""

ITEM = """
  agentId runId toolCallId questionId toolName waitedSeconds expiresAt escalated
  toolCall { toolCallId questionId args }
  run { runId agentId suspendedAt }
  reviewClaim { by since until byMe }
"""
QUEUE = f"""
query($filter: ReviewQueueFilter, $first: Int, $after: String) {{
  reviewQueue(filter: $filter, first: $first, after: $after) {{
    totalCount
    pageInfo {{ hasNextPage endCursor }}
    edges {{ cursor node {{ runId toolCallId }} }}
    nodes {{ {ITEM} }}
  }}
}}"""
CLAIM_ANSWER = """
  __typename
  ... on UserError { code message }
  ... on ReviewAlreadyClaimed { held: reviewClaim { by since until byMe } }
  ... on QuestionNotPending { notPending: questionId }
  ... on ReviewClaimed { runId toolCallId questionId reviewClaim { by since until byMe } }
"""
CLAIM = f"mutation($input: ReviewClaimInput!) {{ claimReview(input: $input) {{ {CLAIM_ANSWER} }} }}"
RELEASE = f"mutation($input: ReviewClaimInput!) {{ releaseReview(input: $input) {{ {CLAIM_ANSWER} }} }}"
APPROVE = """
mutation($input: ApproveToolCallInput!) {
  approveToolCall(input: $input) { __typename ... on UserError { code message } ... on RunOutcome { status } }
}"""
EVENTS = "query($agentId: ID!, $runId: ID!) { runEvents(agentId: $agentId, runId: $runId) { type by data } }"


async def queue(gql: GraphQLClient, **arguments: Any) -> dict[str, Any]:
    connection: dict[str, Any] = (await gql.data(QUEUE, **arguments))["reviewQueue"]
    assert [e["node"]["runId"] for e in connection["edges"]] == [n["runId"] for n in connection["nodes"]]
    return connection


async def walk(gql: GraphQLClient, first: int, **arguments: Any) -> list[dict[str, Any]]:
    """Every item, a page of ``first`` at a time."""
    items: list[dict[str, Any]] = []
    after = None
    while True:
        page = await queue(gql, first=first, after=after, **arguments)
        items.extend(page["nodes"])
        if not page["pageInfo"]["hasNextPage"]:
            return items
        after = page["pageInfo"]["endCursor"]


def question(item: dict[str, Any]) -> dict[str, str]:
    return {
        "agentId": item["agentId"],
        "runId": item["runId"],
        "toolCallId": item["toolCallId"],
        "questionId": item["questionId"],
    }


async def test_the_queue_lists_every_agents_questions_due_first_then_oldest(serve: Serve) -> None:
    served = await serve(keys=[X, Y], tool_rules=DEADLINES)
    gql = served.client(X)
    # given a $49.90 refund (due in 600 s), a data request (no deadline), a $120 refund started
    # later (due in 300 s: first), and a supervisor's card of a $49.90 refund (the refund agent's
    # rules: due in 600 s, after the first refund)
    r1 = await gql.suspend(REFUND, REFUND_PROMPT, threadId="t-1", resourceId="customer-7")
    w1 = await gql.suspend(WEATHER, WEATHER_PROMPT, resourceId="customer-8")
    r2 = await gql.suspend(REFUND, "Please refund order 1043", threadId="t-2", resourceId="customer-7")
    s1 = await gql.suspend(SUPERVISOR, TWO_REFUNDS_PROMPT)
    w2 = await gql.suspend(WEATHER, WEATHER_PROMPT)  # no deadline either: after the first, the older

    page = await queue(gql)

    # then every question is listed once, due first, then without a deadline, oldest first
    assert page["totalCount"] == 5
    listed = [item["runId"] for item in page["nodes"]]
    undated = sorted([w1, w2], key=lambda run: (run["suspendedAt"], run["runId"]))
    assert listed == [r2["runId"], r1["runId"], s1["runId"], *[run["runId"] for run in undated]]
    first = page["nodes"][0]
    assert (first["agentId"], first["toolName"], first["toolCall"]["args"]) == (
        REFUND,
        "issue_refund",
        {"order_id": 1043, "amount": 120},
    )
    assert first["questionId"] == first["toolCall"]["questionId"]
    assert first["toolCallId"] == first["toolCall"]["toolCallId"] == r2["toolCalls"][0]["toolCallId"]
    assert first["expiresAt"] is not None
    assert first["waitedSeconds"] >= 0
    assert (first["reviewClaim"], first["escalated"]) == (None, False)
    assert [item["expiresAt"] is None for item in page["nodes"]] == [False, False, False, True, True]

    # and a walk of pages of one gives the same items
    assert [item["runId"] for item in await walk(gql, 1)] == listed

    # and the filters narrow it
    async def ids(**filter_: Any) -> list[str]:
        found = await queue(gql, filter=filter_)
        assert found["totalCount"] == len(found["nodes"])
        return [item["runId"] for item in found["nodes"]]

    assert await ids(agentIds=[REFUND]) == [r2["runId"], r1["runId"]]
    assert await ids(agentIds=[WEATHER, SUPERVISOR]) == listed[2:]
    assert await ids(agentIds=[WEATHER]) == listed[3:]
    assert await ids(toolNames=["issue_refund"]) == [r2["runId"], r1["runId"], s1["runId"]]
    assert await ids(threadId="t-1") == [r1["runId"]]
    assert await ids(resourceId="customer-7") == [r2["runId"], r1["runId"]]
    assert await ids(expiresBefore=first["expiresAt"]) == []
    assert await ids(expiresBefore="2999-01-01T00:00:00.000Z") == listed[:3]
    assert await ids(escalated=True) == []
    assert await ids(escalated=False) == listed
    assert await ids(unclaimed=True) == listed
    assert await ids(claimedByMe=True) == []


async def test_the_queue_holds_only_what_the_caller_may_decide(serve: Serve) -> None:
    rules = [{"tool": "issue_refund", "scope": "refunds:approve"}]
    served = await serve(keys=[X, NO_REFUNDS, CUSTOMER_7], tool_rules=rules)
    admin = served.client()
    r1 = await admin.suspend(REFUND, REFUND_PROMPT, resourceId="customer-7")
    w1 = await admin.suspend(WEATHER, WEATHER_PROMPT, resourceId="customer-7")
    w2 = await admin.suspend(WEATHER, WEATHER_PROMPT, resourceId="customer-8")

    # a caller without the refund scope is not shown the refund (nor the supervisor's card of one)
    no_refunds = await queue(served.client(NO_REFUNDS))
    assert {item["runId"] for item in no_refunds["nodes"]} == {w1["runId"], w2["runId"]}
    assert no_refunds["totalCount"] == 2
    # a caller of one resource sees only its runs
    seven = await queue(served.client(CUSTOMER_7))
    assert {item["runId"] for item in seven["nodes"]} == {w1["runId"]}  # and no refund scope either
    assert seven["totalCount"] == 1
    assert {item["runId"] for item in (await queue(served.client(X)))["nodes"]} == {
        r1["runId"],
        w1["runId"],
        w2["runId"],
    }


async def test_a_review_claim_is_advice_shown_to_others_and_ends_with_the_decision(serve: Serve) -> None:
    served = await serve(keys=[X, Y], tool_rules=[])
    x, y = served.client(X), served.client(Y)
    run = await x.suspend(REFUND, TWO_REFUNDS_PROMPT)
    [item, other] = (await queue(x))["nodes"]
    assert {item["runId"], other["runId"]} == {run["runId"]}

    # when X claims the first question
    claimed = (await x.data(CLAIM, input=question(item)))["claimReview"]
    assert claimed["__typename"] == "ReviewClaimed", claimed
    assert (claimed["reviewClaim"]["by"], claimed["reviewClaim"]["byMe"]) == (f"key:{X.name}", True)
    assert claimed["reviewClaim"]["until"] > claimed["reviewClaim"]["since"]

    # then Y sees who claimed it and since when, and the filters follow
    shown = {i["questionId"]: i for i in (await queue(y))["nodes"]}
    assert shown[item["questionId"]]["reviewClaim"] == {**claimed["reviewClaim"], "byMe": False}
    assert shown[other["questionId"]]["reviewClaim"] is None

    async def questions(client: Any, **filter_: Any) -> list[str]:
        found = await queue(client, filter=filter_)
        assert found["totalCount"] == len(found["nodes"]), filter_  # the total counts the claims too
        return [i["questionId"] for i in found["nodes"]]

    assert await questions(x, claimedByMe=True) == [item["questionId"]]
    assert await questions(y, claimedByMe=True) == []
    assert await questions(y, unclaimed=True) == [other["questionId"]]
    assert await questions(y, unclaimed=False) == [item["questionId"]]
    assert sorted(await questions(y, claimedByMe=False)) == sorted([item["questionId"], other["questionId"]])
    assert await questions(x, claimedByMe=False, unclaimed=True) == [other["questionId"]]

    # and Y may not claim it over X, nor release X's claim
    refused = (await y.data(CLAIM, input=question(item)))["claimReview"]
    assert refused["__typename"] == "ReviewAlreadyClaimed", refused
    assert refused["code"] == "REVIEW_ALREADY_CLAIMED"
    assert refused["held"]["by"] == f"key:{X.name}"
    not_held = (await y.data(RELEASE, input=question(item)))["releaseReview"]
    assert (not_held["__typename"], not_held["code"]) == ("ReviewClaimNotHeld", "REVIEW_CLAIM_NOT_HELD")

    # but Y may still decide it: the decision's write ends the claim
    approved = (await y.data(APPROVE, input={**question(item)}))["approveToolCall"]
    assert approved["__typename"] == "RunOutcome", approved
    [left] = (await queue(x))["nodes"]
    assert left["questionId"] == other["questionId"]
    late = (await x.data(CLAIM, input=question(item)))["claimReview"]
    assert late["__typename"] in {"QuestionNotPending", "ToolCallAlreadyDecided"}, late

    # and X claims and releases the other one; the trail and the webhooks name both
    assert (await x.data(CLAIM, input=question(other)))["claimReview"]["__typename"] == "ReviewClaimed"
    released = (await x.data(RELEASE, input=question(other)))["releaseReview"]
    assert (released["__typename"], released["reviewClaim"]) == ("ReviewClaimed", None)
    assert (await queue(x))["nodes"][0]["reviewClaim"] is None
    events = (await x.data(EVENTS, agentId=REFUND, runId=run["runId"]))["runEvents"]
    trail = [(e["type"], e["by"], e["data"].get("questionId")) for e in events if e["type"].startswith("review")]
    assert trail == [
        ("reviewClaimed", f"key:{X.name}", item["questionId"]),
        ("reviewClaimed", f"key:{X.name}", other["questionId"]),
        ("reviewReleased", f"key:{X.name}", other["questionId"]),
    ]
    assert WEBHOOK_EVENT_TYPES["reviewClaimed"] == "call.review_claimed"
    assert WEBHOOK_EVENT_TYPES["reviewReleased"] == "call.review_released"


async def test_a_rule_may_require_a_review_claim_before_a_decision(serve: Serve) -> None:
    served = await serve(keys=[X, Y], tool_rules=[{"tool": "issue_refund", "requireReviewClaim": True}])
    x, y = served.client(X), served.client(Y)
    run = await x.suspend(REFUND, REFUND_PROMPT)
    [item] = (await queue(x))["nodes"]

    # without a claim, or with another's, the decision is refused and nothing changes
    refused = (await x.data(APPROVE, input=question(item)))["approveToolCall"]
    assert (refused["__typename"], refused["code"]) == ("ReviewClaimRequired", "REVIEW_CLAIM_REQUIRED"), refused
    assert (await x.data(CLAIM, input=question(item)))["claimReview"]["__typename"] == "ReviewClaimed"
    by_y = (await y.data(APPROVE, input=question(item)))["approveToolCall"]
    assert by_y["__typename"] == "ReviewClaimRequired", by_y

    # with the decider's own claim it is recorded
    approved = (await x.data(APPROVE, input=question(item)))["approveToolCall"]
    assert (approved["__typename"], approved["status"]) == ("RunOutcome", "COMPLETED"), approved
    assert run["runId"] not in {i["runId"] for i in (await queue(x))["nodes"]}


async def test_a_review_claim_names_a_question_never_a_call_by_its_state(serve: Serve) -> None:
    served = await serve(keys=[X], tool_rules=[])
    x = served.client(X)
    await x.suspend(REFUND, REFUND_PROMPT)
    [item] = (await queue(x))["nodes"]
    stale = (await x.data(CLAIM, input={**question(item), "questionId": "not-a-question"}))["claimReview"]
    assert stale["__typename"] == "QuestionNotPending", stale
    missing = (await x.data(CLAIM, input={**question(item), "runId": "no-such-run"}))["claimReview"]
    assert missing["__typename"] == "RunNotFound", missing
    assert (await queue(x))["nodes"][0]["reviewClaim"] is None


NATURAL_CLAIM = """
mutation($input: ReviewClaimInput!) {
  claimReview(input: $input) {
    __typename
    ... on ReviewClaimed { reviewClaim { by until } }
    ... on ReviewAlreadyClaimed { reviewClaim { by until } }
  }
}"""


async def test_both_answers_of_a_claim_select_review_claim_without_an_alias(serve: Serve) -> None:
    served = await serve(keys=[X, Y], tool_rules=[])
    x, y = served.client(X), served.client(Y)
    await x.suspend(REFUND, REFUND_PROMPT)
    [item] = (await queue(x))["nodes"]

    claimed = (await x.data(NATURAL_CLAIM, input=question(item)))["claimReview"]
    refused = (await y.data(NATURAL_CLAIM, input=question(item)))["claimReview"]

    assert (claimed["__typename"], claimed["reviewClaim"]["by"]) == ("ReviewClaimed", f"key:{X.name}")
    assert (refused["__typename"], refused["reviewClaim"]) == ("ReviewAlreadyClaimed", claimed["reviewClaim"])


UNKNOWN_AGENT = 'query { reviewQueue(filter: {agentIds: ["refund-agent", "nope"]}) { totalCount } }'


async def test_an_unknown_agent_in_the_queues_filter_is_agent_not_found(serve: Serve) -> None:
    served = await serve()
    body = await served.client().execute(UNKNOWN_AGENT)

    assert body["data"] is None, body
    [error] = body["errors"]
    assert (error["extensions"]["code"], error["extensions"]["argument"]) == ("AGENT_NOT_FOUND", "filter.agentIds")
    assert error["message"] == (
        "No agent is registered with id 'nope'; known agents: refund-agent, support-supervisor, weather-agent."
    )


@pytest.mark.parametrize("name", ["agentIds", "toolNames"])
async def test_an_empty_list_in_the_queues_filter_is_bad_user_input(serve: Serve, name: str) -> None:
    served = await serve()
    body = await served.client().execute(f"query {{ reviewQueue(filter: {{{name}: []}}) {{ totalCount }} }}")

    assert body["data"] is None, body
    [error] = body["errors"]
    assert (error["extensions"]["code"], error["extensions"]["argument"]) == ("BAD_USER_INPUT", f"filter.{name}")
    assert error["message"] == f"`filter.{name}` is empty, so it would match nothing: leave it out to list them all"
