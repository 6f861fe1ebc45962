"""``reviewQueueEvents`` over a real WebSocket to a secured runsgate process, on the memory, SQLite
and MongoDB stores (issue 45 §1 "Live"; docs/api.md "The reviewers' queue, live").

A question the caller may decide enters its queue, changes when claimed and leaves when decided,
each told once with the queue's item (or, leaving, the question's identity); a caller without the
tool's scope or the run's resource never hears of it; ``afterEventId`` resumes after a message;
the filter applies. Every stream starts after a marker event (``afterEventId``), never "now", so
no test depends on when the server starts following the log.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from tests._servers import runsgate_process, store_variables

from .._auth import ADMIN, TestKey, api_keys_json
from .._graphql import REFUND, WEATHER, WEATHER_PROMPT, GraphQLClient, GraphQLWebSocket, document, ws_connect
from ..conftest import STORE_KINDS

X = TestKey(
    "reviewer-x",
    "rg_test_reviewer_x_0123456789abcdefghijklmnopqrstuv",
    scopes=("runs:read", "runs:decide", "runs:start", "refunds:approve"),
)
NO_REFUNDS = TestKey(
    "no-refunds", "rg_test_no_refunds_0123456789abcdefghijklmnopqrstu", scopes=("runs:read", "runs:decide")
)
"""Lacks ``refunds:approve``: may not approve a refund, so never hears of one."""
CUSTOMER_7 = TestKey(
    "customer-7-only",
    "rg_test_customer_7_0123456789abcdefghijklmnopqrstu",
    scopes=("runs:read", "runs:decide", "refunds:approve"),
    resources=("customer-7",),
)
READ_ONLY = TestKey("read-only", "rg_test_read_only_0123456789abcdefghijklmnopqrstuv", scopes=("runs:read",))
RULES = json.dumps([{"tool": "issue_refund", "scope": "refunds:approve"}])
LIMIT = 64 * 1024
"""The server's ``RUNSGATE_MAX_RESPONSE_BYTES``."""

ITEM = "agentId runId toolCallId questionId toolName escalated reviewClaim { by } toolCall { args }"
EVENTS = document(
    f"""
    subscription Queue($filter: ReviewQueueFilter, $afterEventId: ID) {{
      reviewQueueEvents(filter: $filter, afterEventId: $afterEventId) {{
        id eventId cause change at by agentId runId toolCallId questionId toolName item {{ {ITEM} }}
      }}
    }}
    """
)
CLAIM = document(
    """
    mutation Claim($input: ReviewClaimInput!) {
      claimReview(input: $input) { __typename ... on UserError { code message } }
    }
    """
)


@pytest.fixture(scope="module", params=STORE_KINDS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A secured runsgate process on the memory store, a SQLite file, then a fresh MongoDB database."""
    folder = tmp_path_factory.mktemp(f"queue-{request.param}")
    store = store_variables(request, folder)
    with runsgate_process(
        folder / "server.log",
        RUNSGATE_AUTH="on",
        RUNSGATE_API_KEYS=api_keys_json(ADMIN, X, NO_REFUNDS, CUSTOMER_7, READ_ONLY),
        RUNSGATE_TOOL_RULES=RULES,
        RUNSGATE_MAX_RESPONSE_BYTES=str(LIMIT),
        RUNSGATE_SUBSCRIPTION_POLL_INTERVAL="0.1",
        RUNSGATE_GRAPHIQL="false",
        **store,
    ) as url:
        yield url


@dataclass
class Stream:
    ws: GraphQLWebSocket
    operation: str

    async def next(self) -> dict[str, Any]:
        """The next message's ``reviewQueueEvents`` (an error fails the test)."""
        message = await self.ws.receive()
        assert (message["id"], message["type"]) == (self.operation, "next"), message
        assert "errors" not in message["payload"], message
        found: dict[str, Any] = message["payload"]["data"]["reviewQueueEvents"]
        return found

    async def until(self, run_id: str) -> list[tuple[str, str, str]]:
        """``(runId, change, cause)`` of each message up to the first of ``run_id``."""
        seen: list[tuple[str, str, str]] = []
        while True:
            message = await self.next()
            seen.append((message["runId"], message["change"], message["cause"]))
            if message["runId"] == run_id:
                return seen


@asynccontextmanager
async def stream(server: str, key: TestKey, **variables: Any) -> AsyncIterator[Stream]:
    async with ws_connect(server, init_payload={"Authorization": f"Bearer {key.key}"}) as ws:
        yield Stream(ws, await ws.subscribe(EVENTS, variables))


async def marker(gql: GraphQLClient) -> str:
    """The id of the last event of a run started now: streams after it see only what follows."""
    run = await gql.suspend(WEATHER, WEATHER_PROMPT, resourceId=f"marker-{uuid.uuid4().hex[:8]}")
    return str((await gql.run_events(WEATHER, run["runId"]))[-1]["id"])


def gql_of(server: str, key: TestKey) -> Any:
    return GraphQLClient.at(server, headers={"Authorization": f"Bearer {key.key}"})


async def test_a_question_enters_changes_and_leaves_only_for_who_may_decide_it(server: str) -> None:
    async with gql_of(server, X) as gql:
        after = await marker(gql)
        async with (
            stream(server, X, afterEventId=after) as mine,
            stream(server, NO_REFUNDS, afterEventId=after) as no_refunds,
            stream(server, CUSTOMER_7, afterEventId=after) as customer_7,
        ):
            # when a refund (customer-8) waits for approval
            refund = await gql.suspend(REFUND, "Please refund order 1042", resourceId="customer-8")
            call = refund["toolCalls"][0]
            entered = await mine.next()

            # then it entered the queue of the reviewer who may approve it, as reviewQueue lists it
            assert (entered["change"], entered["cause"], entered["runId"]) == ("ENTERED", "suspended", refund["runId"])
            assert entered["id"] == f"{entered['eventId']}:0"
            item = entered["item"]
            assert (item["agentId"], item["toolName"], item["toolCallId"]) == (
                REFUND,
                "issue_refund",
                call["toolCallId"],
            )
            assert item["toolCall"]["args"] == call["args"]
            assert (item["reviewClaim"], item["questionId"]) == (None, entered["questionId"])

            # when a data request of customer-7 waits, and the refund is claimed, then approved
            weather = await gql.suspend(WEATHER, WEATHER_PROMPT, resourceId="customer-7")
            assert [(m[0], m[1]) for m in await mine.until(weather["runId"])] == [(weather["runId"], "ENTERED")]
            question = {key: entered[key] for key in ("agentId", "runId", "toolCallId", "questionId")}
            claimed = (await gql.data(CLAIM, input=question))["claimReview"]
            assert claimed["__typename"] == "ReviewClaimed", claimed
            changed = await mine.next()
            assert (changed["change"], changed["cause"]) == ("CHANGED", "reviewClaimed")
            assert changed["item"]["reviewClaim"] == {"by": f"key:{X.name}"}
            assert changed["by"] == f"key:{X.name}"
            outcome = await gql.approve(REFUND, refund["runId"], call["toolCallId"])
            assert outcome["status"] == "COMPLETED", outcome
            left = await mine.next()
            last = await gql.suspend(WEATHER, WEATHER_PROMPT, resourceId="customer-7")

            # then the refund left, named by its question, and nothing else was said of it
            assert (left["change"], left["cause"], left["item"], left["by"]) == (
                "LEFT",
                "decision",
                None,
                f"key:{X.name}",
            )
            assert {key: left[key] for key in question} == question
            assert left["toolName"] == "issue_refund"
            assert await mine.until(last["runId"]) == [(last["runId"], "ENTERED", "suspended")]

            # and who may not approve a refund, or see customer-8, never heard of it
            expected = [(weather["runId"], "ENTERED", "suspended"), (last["runId"], "ENTERED", "suspended")]
            assert await no_refunds.until(last["runId"]) == expected
            assert await customer_7.until(last["runId"]) == expected


async def test_a_stream_resumes_after_a_message_and_the_filter_applies(server: str) -> None:
    async with gql_of(server, X) as gql:
        after = await marker(gql)
        first = await gql.suspend(REFUND, "Please refund order 1042", resourceId="customer-8")
        second = await gql.suspend(WEATHER, WEATHER_PROMPT, resourceId="customer-7")
        third = await gql.suspend(REFUND, "Please refund order 1042", resourceId="customer-9")

        async with stream(server, X, afterEventId=after) as whole:
            messages = [await whole.next() for _ in range(3)]
        assert [(m["runId"], m["change"]) for m in messages] == [
            (first["runId"], "ENTERED"),
            (second["runId"], "ENTERED"),
            (third["runId"], "ENTERED"),
        ]

        # when a stream resumes after the first message, then it goes on with the second
        async with stream(server, X, afterEventId=messages[0]["id"]) as resumed:
            assert [(await resumed.next())["id"] for _ in range(2)] == [m["id"] for m in messages[1:]]
        # and after a run event's id, with the events after it
        async with stream(server, X, afterEventId=messages[1]["eventId"]) as resumed:
            assert (await resumed.next())["id"] == messages[2]["id"]
        # and after an index past its event's changes, as after that event (docs/api.md "Resume")
        async with stream(server, X, afterEventId=f"{messages[1]['eventId']}:999") as resumed:
            assert (await resumed.next())["id"] == messages[2]["id"]

        # when a stream asks for one agent's questions, then it hears of no other's
        async with stream(server, X, afterEventId=after, filter={"agentIds": [REFUND]}) as refunds:
            assert await refunds.until(third["runId"]) == [
                (first["runId"], "ENTERED", "suspended"),
                (third["runId"], "ENTERED", "suspended"),
            ]
        async with stream(server, X, afterEventId=after, filter={"resourceId": "customer-7"}) as of_7:
            assert await of_7.until(second["runId"]) == [(second["runId"], "ENTERED", "suspended")]
            last = await gql.suspend(WEATHER, WEATHER_PROMPT, resourceId="customer-7")
            assert await of_7.until(last["runId"]) == [(last["runId"], "ENTERED", "suspended")]


async def test_a_stream_needs_runs_decide_and_a_valid_resume_id(server: str) -> None:
    async with stream(server, READ_ONLY) as refused:
        message = await refused.ws.receive()
    assert message["payload"]["errors"][0]["extensions"]["code"] == "FORBIDDEN", message
    async with stream(server, X, afterEventId="not-an-id") as bad:
        message = await bad.ws.receive()
    assert message["payload"]["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT", message


async def test_a_stream_of_an_unknown_agent_is_agent_not_found(server: str) -> None:
    async with stream(server, X, filter={"agentIds": ["nope"]}) as unknown:
        message = await unknown.ws.receive()
    assert message["type"] == "next", message
    [error] = message["payload"]["errors"]
    assert (error["extensions"]["code"], error["extensions"]["argument"]) == ("AGENT_NOT_FOUND", "filter.agentIds")


async def test_a_message_over_the_byte_budget_is_refused(server: str) -> None:
    async with gql_of(server, X) as gql:
        after = await marker(gql)
        prompt = "Please refund order 1042. " + "Details follow. " * 1900  # about 30 KiB
        await gql.suspend(REFUND, prompt, resourceId="customer-8")
        large = "item { run { events { data } } }"
        query = EVENTS.replace("item {", f"a: {large} b: {large} c: {large} item {{")
        async with ws_connect(server, init_payload={"Authorization": f"Bearer {X.key}"}) as ws:
            operation = await ws.subscribe(query, {"afterEventId": after})
            message = await ws.receive()
    # then the message that would hold three 30 KiB prompts is the budget's typed error
    assert (message["id"], message["type"]) == (operation, "next"), message
    assert message["payload"]["data"] is None, message
    [error] = message["payload"]["errors"]
    assert error["extensions"] == {"code": "RESPONSE_TOO_LARGE", "maxResponseBytes": LIMIT}, error


RELEASE = document(
    """
    mutation Release($input: ReviewClaimInput!) {
      releaseReview(input: $input) { __typename ... on UserError { code message } }
    }
    """
)


async def test_a_question_leaves_and_enters_again_as_it_stops_and_starts_passing_the_filter(server: str) -> None:
    async with gql_of(server, X) as gql:
        after = await marker(gql)
        async with stream(server, X, afterEventId=after, filter={"unclaimed": True, "agentIds": [REFUND]}) as free:
            refund = await gql.suspend(REFUND, "Please refund order 1042", resourceId="customer-8")
            entered = await free.next()
            assert (entered["runId"], entered["change"]) == (refund["runId"], "ENTERED")
            question = {key: entered[key] for key in ("agentId", "runId", "toolCallId", "questionId")}

            # when it is claimed, then it left the unclaimed queue
            assert (await gql.data(CLAIM, input=question))["claimReview"]["__typename"] == "ReviewClaimed"
            left = await free.next()
            assert (left["change"], left["cause"], left["item"]) == ("LEFT", "reviewClaimed", None)
            assert {key: left[key] for key in question} == question

            # when it is released, then it is back
            assert (await gql.data(RELEASE, input=question))["releaseReview"]["__typename"] == "ReviewClaimed"
            back = await free.next()
            assert (back["change"], back["cause"]) == ("ENTERED", "reviewReleased")
            assert back["item"]["reviewClaim"] is None
