"""``SuspendedRun.conversation`` over HTTP, on every store: the conversation that led to the pending
calls, from the stored history, within ``maxBytes``, readable with ``runs:read`` on the run's resource."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from server.settings import ApiKeyConfig, Settings

from .._auth import TestKey
from .._graphql import REFUND, REFUND_PROMPT, SUPERVISOR, TWO_REFUNDS_PROMPT, GraphQLClient

MESSAGES = "messages { index kind text textBytes truncated toolName toolCallId at }"
FIELDS = f"totalMessages totalBytes truncated cut {{ position messages bytes }} {MESSAGES}"
CONVERSATION = f"conversation {{ {FIELDS} }}"
START = f"""
mutation($input: StartRunInput!) {{
  startRun(input: $input) {{ ... on RunOutcome {{ runId status run {{ toolCalls {{ toolCallId }} {CONVERSATION} }} }} }}
}}"""
RUN = f"""
query($agentId: ID!, $runId: ID!, $maxBytes: Int) {{
  suspendedRun(agentId: $agentId, runId: $runId) {{
    runId
    conversation(maxBytes: $maxBytes) {{ {FIELDS} }}
  }}
}}"""
LIST = f"query($agentId: ID!) {{ suspendedRuns(agentId: $agentId, first: 10) {{ nodes {{ runId {CONVERSATION} }} }} }}"
APPROVE = """
mutation($input: ApproveToolCallInput!) {
  approveToolCall(input: $input) { ... on RunOutcome { status run { runId conversation { totalMessages } } } }
}"""

DECIDER = TestKey("test-decider", "rg_test_decider_0123456789abcdefghijklmnopqrstuvw", scopes=("runs:decide",))
"""May decide every run, but read none."""
TENANT = TestKey("test-tenant", "rg_test_tenant_0123456789abcdefghijklmnopqrstuvwx", resources=("customer-7",))
"""Every scope, on runs of resource ``customer-7`` only."""


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """``DECIDER`` and ``TENANT`` beside ``ADMIN``."""
    keys = [ApiKeyConfig.model_validate(key.entry()) for key in (DECIDER, TENANT)]
    return settings.model_copy(update={"api_keys": [*settings.api_keys, *keys]})


def _as(app: Starlette, key: TestKey) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test", headers=key.headers)


async def _refund(gql: GraphQLClient, prompt: str = REFUND_PROMPT, **fields: Any) -> dict[str, Any]:
    outcome = (await gql.data(START, input={"agentId": REFUND, "prompt": prompt, **fields}))["startRun"]
    assert outcome["status"] == "SUSPENDED", outcome
    result: dict[str, Any] = outcome
    return result


async def test_a_pending_refund_shows_the_conversation_that_led_to_it(gql: GraphQLClient) -> None:
    # given a refund waiting for its approval
    started = await _refund(gql)
    [call] = started["run"]["toolCalls"]

    # when its conversation is read, from the run itself
    run = (await gql.data(RUN, agentId=REFUND, runId=started["runId"]))["suspendedRun"]
    conversation = run["conversation"]

    # then it is the customer's prompt, the order lookup and its result, and the refund call waiting
    messages = conversation["messages"]
    assert [(m["index"], m["kind"], m["toolName"]) for m in messages] == [
        (0, "USER_PROMPT", None),
        (1, "TOOL_CALL", "lookup_order"),
        (2, "TOOL_RESULT", "lookup_order"),
        (3, "TOOL_CALL", "issue_refund"),
    ]
    assert messages[0]["text"] == REFUND_PROMPT
    assert messages[1]["text"] == '{"order_id":1042}'
    assert '"item":"Espresso grinder"' in messages[2]["text"]
    assert messages[1]["toolCallId"] == messages[2]["toolCallId"]
    assert messages[3]["text"] == '{"order_id":1042,"amount":49.9}'
    assert messages[3]["toolCallId"] == call["toolCallId"]
    assert all(m["at"].endswith("Z") for m in messages)
    assert all(m["textBytes"] == len(m["text"].encode()) and m["truncated"] is False for m in messages)
    assert conversation["totalMessages"] == 4
    assert conversation["totalBytes"] == sum(m["textBytes"] for m in messages)
    assert (conversation["truncated"], conversation["cut"]) == (False, None)
    # and the startRun outcome and the listing give the same conversation
    assert started["run"]["conversation"] == conversation
    listed = (await gql.data(LIST, agentId=REFUND))["suspendedRuns"]["nodes"]
    assert [n["conversation"] for n in listed if n["runId"] == started["runId"]] == [conversation]


async def test_a_supervisors_run_shows_the_customers_words_and_the_delegation(gql: GraphQLClient) -> None:
    # given a supervisor whose call waits for the refund agent's approval
    outcome = (await gql.data(START, input={"agentId": SUPERVISOR, "prompt": REFUND_PROMPT}))["startRun"]
    assert outcome["status"] == "SUSPENDED", outcome

    # then its conversation is the prompt and its call to the refund agent, waiting
    messages = outcome["run"]["conversation"]["messages"]
    assert [(m["kind"], m["toolName"], m["text"]) for m in messages] == [
        ("USER_PROMPT", None, REFUND_PROMPT),
        ("TOOL_CALL", "ask_refund_agent", '{"request":"Please refund order 1042"}'),
    ]
    assert messages[1]["toolCallId"] == outcome["run"]["toolCalls"][0]["toolCallId"]


async def test_a_conversation_over_max_bytes_keeps_the_prompts_beginning_and_the_call_and_marks_the_cut(
    gql: GraphQLClient,
) -> None:
    # given a refund asked for in a long message (4,000 two-byte characters after the order number)
    prompt = "Please refund order 1042. " + "é" * 4000
    started = await _refund(gql, prompt)

    # when its conversation is read within 200 bytes
    run = (await gql.data(RUN, agentId=REFUND, runId=started["runId"], maxBytes=200))["suspendedRun"]
    conversation = run["conversation"]

    # then the prompt keeps its beginning (in whole characters, with the bytes the rest leaves), the
    # refund call waiting is whole, and the lookup between them is left out where the cut says
    first, *_, last = messages = conversation["messages"]
    assert (first["index"], first["kind"], first["truncated"]) == (0, "USER_PROMPT", True)
    assert prompt.startswith(first["text"])
    assert first["text"].startswith("Please refund order 1042. é")
    assert first["textBytes"] == len(prompt.encode())
    assert (last["index"], last["toolName"], last["truncated"]) == (3, "issue_refund", False)
    assert 199 <= sum(len(m["text"].encode()) for m in messages) <= 200  # a two-byte character may not fit
    assert conversation["truncated"] is True
    assert conversation["totalMessages"] == 4
    cut = conversation["cut"]
    shown = [m["index"] for m in messages]
    assert shown == [*range(cut["position"]), *range(cut["position"] + cut["messages"], 4)]
    assert cut["messages"] >= 1
    assert conversation["totalBytes"] == len(prompt.encode()) + sum(m["textBytes"] for m in messages[1:]) + cut["bytes"]


LISTED = """
query($agentId: ID!, $maxBytes: Int) {
  suspendedRuns(agentId: $agentId, first: 10) { nodes { runId conversation(maxBytes: $maxBytes) { totalMessages } } }
}"""
LISTED_LITERAL = """
query {
  suspendedRuns(agentId: "refund-agent", first: 10) { nodes { runId conversation(maxBytes: <n>) { totalMessages } } }
}"""


def _refused_once(body: dict[str, Any]) -> None:
    """A request error (no ``data``: nothing executed) refusing ``maxBytes`` once, typed."""
    assert "data" not in body, body
    errors = body["errors"]
    assert [(e["extensions"]["code"], e["extensions"]["argument"], "path" in e) for e in errors] == [
        ("BAD_USER_INPUT", "maxBytes", False)
    ], errors
    assert "between 1 and 1048576" in errors[0]["message"], errors


@pytest.mark.parametrize("max_bytes", [0, -1, 1024 * 1024 + 1])
async def test_max_bytes_outside_its_range_is_a_typed_argument_error(gql: GraphQLClient, max_bytes: int) -> None:
    started = await _refund(gql)
    body = await gql.execute(RUN, agentId=REFUND, runId=started["runId"], maxBytes=max_bytes)
    _refused_once(body)


@pytest.mark.parametrize("max_bytes", [0, -1, 1024 * 1024 + 1])
async def test_max_bytes_outside_its_range_on_a_listing_is_refused_once(gql: GraphQLClient, max_bytes: int) -> None:
    # given three refunds waiting, listed once with a good maxBytes (the document is then prepared)
    for _ in range(3):
        await _refund(gql)
    nodes = (await gql.data(LISTED, agentId=REFUND, maxBytes=100))["suspendedRuns"]["nodes"]
    assert len(nodes) == 3

    # when the listing asks each run's conversation with maxBytes out of its range, as a variable and a literal
    by_variable = await gql.execute(LISTED, agentId=REFUND, maxBytes=max_bytes)
    by_literal = await gql.execute(LISTED_LITERAL.replace("<n>", str(max_bytes)))

    # then the request is refused once, before anything runs, not once per run
    _refused_once(by_variable)
    _refused_once(by_literal)


async def test_the_conversation_needs_runs_read_even_in_a_decisions_outcome(app: Starlette, gql: GraphQLClient) -> None:
    # given a run of two refunds, and a principal that may decide but not read
    started = await _refund(gql, TWO_REFUNDS_PROMPT)
    first = started["run"]["toolCalls"][0]["toolCallId"]

    # when it approves one call and asks for the conversation in the outcome (the run still waits)
    async with _as(app, DECIDER) as http:
        decider = GraphQLClient(http)
        data, errors = await decider.errors(
            APPROVE, input={"agentId": REFUND, "runId": started["runId"], "toolCallId": first}
        )

    # then the approval is recorded and the run returned, but its conversation is refused
    assert data == {
        "approveToolCall": {"status": "SUSPENDED", "run": {"runId": started["runId"], "conversation": None}}
    }
    assert [(e["extensions"], e["path"]) for e in errors] == [
        ({"code": "FORBIDDEN", "requiredScope": "runs:read"}, ["approveToolCall", "run", "conversation"])
    ]


APPROVE_WITH_EVENTS = """
mutation($input: ApproveToolCallInput!) {
  approveToolCall(input: $input) { ... on RunOutcome { status run { runId events { type } } } }
}"""


async def test_the_audit_trail_needs_runs_read_even_in_a_decisions_outcome(app: Starlette, gql: GraphQLClient) -> None:
    # given a run of two refunds, and a principal that may decide but not read
    started = await _refund(gql, TWO_REFUNDS_PROMPT)
    first = started["run"]["toolCalls"][0]["toolCallId"]

    # when it approves one call and asks for the run's events in the outcome
    async with _as(app, DECIDER) as http:
        data, errors = await GraphQLClient(http).errors(
            APPROVE_WITH_EVENTS, input={"agentId": REFUND, "runId": started["runId"], "toolCallId": first}
        )

    # then the events (who started and decided what) are refused; the list is not nullable, so the
    # run is null in the outcome, whose status still says the approval was recorded
    assert data == {"approveToolCall": {"status": "SUSPENDED", "run": None}}
    assert [(e["extensions"], e["path"]) for e in errors] == [
        ({"code": "FORBIDDEN", "requiredScope": "runs:read"}, ["approveToolCall", "run", "events"])
    ]
    run = (await gql.data(RUN, agentId=REFUND, runId=started["runId"]))["suspendedRun"]
    assert run is not None  # the approval was recorded and the run still waits for the second call


async def test_a_principal_reads_the_conversations_of_its_own_resources_only(
    app: Starlette, gql: GraphQLClient
) -> None:
    # given a run of the tenant's resource and one of another resource
    own = await _refund(gql, resourceId="customer-7")
    other = await _refund(gql, resourceId="customer-9")

    async with _as(app, TENANT) as http:
        tenant = GraphQLClient(http)
        # when the tenant reads both
        mine = (await tenant.data(RUN, agentId=REFUND, runId=own["runId"]))["suspendedRun"]
        theirs = (await tenant.data(RUN, agentId=REFUND, runId=other["runId"]))["suspendedRun"]
        listed = (await tenant.data(LIST, agentId=REFUND))["suspendedRuns"]["nodes"]

    # then it reads its own run's conversation, and of the other nothing, as if it did not exist
    assert mine["conversation"] == own["run"]["conversation"]
    assert theirs is None
    assert [(n["runId"], n["conversation"]) for n in listed] == [(own["runId"], own["run"]["conversation"])]


async def test_a_finished_run_has_no_conversation_left(gql: GraphQLClient) -> None:
    # given a refund approved and completed (its snapshot and history deleted)
    started = await _refund(gql)
    call = started["run"]["toolCalls"][0]["toolCallId"]
    outcome = await gql.data(APPROVE, input={"agentId": REFUND, "runId": started["runId"], "toolCallId": call})
    assert outcome["approveToolCall"] == {"status": "COMPLETED", "run": None}

    # then the run, and with it its conversation, is gone
    assert (await gql.data(RUN, agentId=REFUND, runId=started["runId"]))["suspendedRun"] is None
