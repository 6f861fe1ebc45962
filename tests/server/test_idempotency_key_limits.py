"""An ``idempotencyKey`` is 1 to 255 bytes of UTF-8 (``resolvers.documents.limits.INPUT_LIMITS``): an empty
or longer one is ``BAD_USER_INPUT`` naming it, on every mutation that takes one, before anything
is read or written. Found by a new user's trial: a 900,000-character key was stored."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.demo import LEDGER

from .._graphql import APPROVE, DECLINE, RESUME, START_RUN, GraphQLClient

DECIDE = """mutation($input: DecideToolCallsInput!) { decideToolCalls(input: $input) {
  results { __typename ... on RunOutcome { status } } } }"""
REFUND = "refund-agent"


@pytest.mark.parametrize(
    ("key", "problem"),
    [("", "is empty"), ("k" * 256, "is 256 bytes"), ("é" * 128, "is 256 bytes")],  # bytes, not characters
)
async def test_an_empty_or_overlong_key_is_refused_on_every_mutation_and_nothing_changes(
    gql: GraphQLClient, key: str, problem: str
) -> None:
    run = await gql.suspend(REFUND, "Please refund order 1042")
    weather = await gql.suspend("weather-agent", "What is the weather?")
    call = {"agentId": REFUND, "runId": run["runId"], "toolCallId": run["toolCalls"][0]["toolCallId"]}
    attempts: list[tuple[str, dict[str, Any]]] = [
        (START_RUN, {"agentId": REFUND, "prompt": "Please refund order 1044"}),
        (APPROVE, call),
        (DECLINE, call),
        (RESUME, {"agentId": "weather-agent", "runId": weather["runId"], "resumeData": {"name": "Paris"}}),
        (
            DECIDE,
            {
                "agentId": REFUND,
                "decisions": [{"runId": run["runId"], "toolCallId": call["toolCallId"], "kind": "APPROVED"}],
            },
        ),
    ]
    for document, fields in attempts:
        data, errors = await gql.errors(document, input={**fields, "idempotencyKey": key})
        assert data is None, errors
        assert errors[0]["extensions"]["code"] == "BAD_USER_INPUT", errors
        assert "input.idempotencyKey" in errors[0]["message"], errors
        assert problem in errors[0]["message"], errors

    assert LEDGER == []  # the $15.50 refund would have been issued at once
    still = await gql.suspended_run(REFUND, run["runId"])
    assert still is not None
    assert still["toolCalls"][0]["decision"] is None
    asking = await gql.suspended_run("weather-agent", weather["runId"])
    assert asking is not None
    assert asking["toolCalls"][0]["decision"] is None


async def test_a_key_of_255_bytes_is_taken(gql: GraphQLClient) -> None:
    outcome = await gql.start_run(REFUND, "Please refund order 1044", idempotencyKey="k" * 255)
    assert outcome["status"] == "COMPLETED"
