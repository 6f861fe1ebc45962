"""Any JSON through the GraphQL API and back, on every store (issue 14, part 5; docs/storage.md
"Stored JSON"), and a run a store cannot hold fails cleanly.

The ``json-echo`` agent (``tests._json_agent``) lists generated JSON as a call's ``args``,
``suspendPayload`` and ``resumeSchema``, accepts generated ``resumeData``, and completes with both
as its output, which the ``completed`` event and the idempotency key keep too.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from .._graphql import DETAILED_SUSPENDED_RUNS, RESUME, GraphQLClient
from .._json_agent import JSON_ECHO
from ..storage.test_stored_json import KEYS, json_values
from .test_json_literals import settings as settings  # the fixture: demo agents and json-echo

SCHEMAS = st.builds(
    lambda comment, examples, nested: {
        "$comment": comment,
        "examples": examples,
        "$defs": {"Nested": {"description": nested, "type": "object"}},
        "$id.note": None,
    },
    st.text(max_size=10),
    st.lists(json_values(8), max_size=3),
    st.text(max_size=10),
)
"""Resume schemas that accept any data, with ``$``-keys, dotted keys and generated JSON in annotations."""


@hypothesis_settings(
    max_examples=8,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    args=json_values(),
    payload=json_values(),
    schema=SCHEMAS,
    resume_data=st.dictionaries(KEYS, json_values(), max_size=4),
)
async def test_any_json_goes_through_the_api_and_every_store_unchanged(
    gql: GraphQLClient, args: Any, payload: Any, schema: dict[str, Any], resume_data: dict[str, Any]
) -> None:
    # given a run whose model asks approval for `args` and whose tool suspends with `payload`, `schema`
    prompt = json.dumps({"hold": args, "ask": {"payload": payload, "schema": schema}})
    run = await gql.suspend(JSON_ECHO, prompt)
    listing = await gql.data(DETAILED_SUSPENDED_RUNS, agentId=JSON_ECHO)
    listed = next(e["node"] for e in listing["suspendedRuns"]["edges"] if e["node"]["runId"] == run["runId"])

    # then the outcome and the listing show them unchanged
    for shown in (run, listed):
        hold, ask = shown["toolCalls"]
        assert hold["args"] == {"value": args}
        assert (ask["suspendPayload"], ask["resumeSchema"]) == (payload, schema)

    # when it is approved and resumed (with an idempotency key) with generated data
    await gql.approve(JSON_ECHO, run["runId"], hold["toolCallId"])
    key = uuid.uuid4().hex
    fields = {"agentId": JSON_ECHO, "runId": run["runId"], "resumeData": resume_data, "idempotencyKey": key}
    outcome = (await gql.data(RESUME, input=fields))["resumeRun"]
    replayed = (await gql.data(RESUME, input=fields))["resumeRun"]

    # then the tools got both unchanged, and the outcome, its replay and the completed event say so
    expected = {"held": args, "answered": resume_data}
    assert outcome["status"] == "COMPLETED", outcome
    assert outcome["output"] == expected
    assert replayed["output"] == expected
    events = await gql.run_events(JSON_ECHO, run["runId"])
    assert [e["data"]["output"] for e in events if e["type"] == "completed"] == [expected]


@pytest.mark.mongo
@pytest.mark.parametrize("settings", ["mongo"], indirect=True)
async def test_a_run_the_store_cannot_hold_fails_with_a_reason_and_a_failed_event(gql: GraphQLClient) -> None:
    # given a tool that suspends with a payload larger than MongoDB's 16 MB document limit
    prompt = json.dumps({"big": 17 * 1024 * 1024})

    # when the run is started
    outcome = await gql.start_run(JSON_ECHO, prompt)

    # then it failed with the store's reason, nothing is listed, and the log says started then failed
    assert outcome["status"] == "FAILED", outcome
    assert "DocumentTooLarge" in outcome["error"]
    assert outcome["run"] is None
    assert await gql.suspended_run(JSON_ECHO, outcome["runId"]) is None
    events = await gql.run_events(JSON_ECHO, outcome["runId"])
    assert [e["type"] for e in events] == ["started", "failed"]
    assert events[1]["data"]["type"] == "DocumentTooLarge"


@pytest.mark.mongo
@pytest.mark.parametrize("settings", ["mongo"], indirect=True)
async def test_a_run_the_store_cannot_hold_after_a_resume_fails_with_a_reason_and_stays_listed(
    gql: GraphQLClient,
) -> None:
    # given a run waiting on a small first question whose next question is over 16 MB
    started = await gql.start_run(JSON_ECHO, json.dumps({"big_later": 17 * 1024 * 1024}))
    assert started["status"] == "SUSPENDED", started

    # when the first question is answered (the tool then asks the second one)
    outcome = await gql.resume(JSON_ECHO, started["runId"], "first answer")

    # then the run failed with the store's reason, stays listed with its decision and lastError,
    # and the log says so
    assert outcome["status"] == "FAILED", outcome
    assert "DocumentTooLarge" in outcome["error"]
    listed = await gql.suspended_run(JSON_ECHO, started["runId"])
    assert listed is not None
    assert listed["toolCalls"][0]["decision"]["kind"] == "RESUMED"
    events = await gql.run_events(JSON_ECHO, started["runId"])
    assert [e["type"] for e in events][-1] == "failed"
    assert events[-1]["data"]["type"] == "DocumentTooLarge"
