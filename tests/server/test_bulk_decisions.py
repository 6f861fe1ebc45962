"""Bulk decisions (issue 18 part 5) over HTTP: ``decideToolCalls``.

Each item is what ``approveToolCall``, ``declineToolCall`` or ``resumeRun`` would record, checked
and recorded on its own (one item's error does not stop the others), exactly once even against
single decisions racing it; a run whose calls the batch decides continues once; a batch over
``RUNSGATE_MAX_BULK_DECISIONS`` or with a field its kind does not take records nothing; the
batch's idempotency key replays the first answers, also after a restart (SQLite, real processes).
``runtime.demo.LEDGER`` records the refunds really issued.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime.demo import LEDGER
from server.settings import ApiKeyConfig, Settings

from .._auth import TestKey
from .._graphql import REFUND, WEATHER, WEATHER_PROMPT, GraphQLClient, data
from .._servers import runsgate_process, shared_store_env

DECIDE = """
mutation($input: DecideToolCallsInput!) {
  decideToolCalls(input: $input) {
    results {
      __typename
      ... on UserError { code message }
      ... on ToolCallAlreadyDecided { decision { kind decidedBy reason } }
      ... on InvalidToolArguments { problems { path } }
      ... on RunOutcome { runId status output }
    }
  }
}"""
START = """
mutation($input: StartRunInput!) {
  startRun(input: $input) { ... on RunOutcome { runId status run { toolCalls { toolCallId args } } } }
}"""
DECLINE = """
mutation($input: DeclineToolCallInput!) {
  declineToolCall(input: $input) { __typename ... on UserError { code } ... on RunOutcome { status } }
}"""
EVENTS = "query($agentId: ID!, $runId: ID!) { runEvents(agentId: $agentId, runId: $runId) { type data } }"
RUN = """
query($agentId: ID!, $runId: ID!) { suspendedRun(agentId: $agentId, runId: $runId) { toolCalls { decision { kind } } } }
"""

OTHER = TestKey("test-other", "rg_test_other_0123456789abcdefghijklmnopqrstuvwxyz", resources=("customer-9",))
"""May decide only runs of resource ``customer-9``."""


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """At most 5 decisions per batch, two runs decided at once, ``OTHER`` beside ``ADMIN``, and no
    per-tool rule (no default rule of the demo either: every refund here waits for a decision)."""
    return settings.model_copy(
        update={
            "tool_rules": [],
            "max_bulk_decisions": 5,
            "bulk_concurrency": 2,
            "api_keys": [*settings.api_keys, ApiKeyConfig.model_validate(OTHER.entry())],
        }
    )


async def _refund_run(gql: GraphQLClient, orders: str = "1044", **fields: Any) -> tuple[str, list[str]]:
    started = await gql.data(START, input={"agentId": REFUND, "prompt": f"Please refund orders {orders}", **fields})
    outcome = started["startRun"]
    assert outcome["status"] == "SUSPENDED", outcome
    return outcome["runId"], [call["toolCallId"] for call in outcome["run"]["toolCalls"]]


async def _decide(gql: GraphQLClient, decisions: list[dict[str, Any]], **fields: Any) -> list[dict[str, Any]]:
    data = await gql.data(DECIDE, input={"agentId": REFUND, "decisions": decisions, **fields})
    results: list[dict[str, Any]] = data["decideToolCalls"]["results"]
    return results


def _approve(run_id: str, call_id: str, **fields: Any) -> dict[str, Any]:
    return {"runId": run_id, "toolCallId": call_id, "kind": "APPROVED", **fields}


async def _events(gql: GraphQLClient, run_id: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = (await gql.data(EVENTS, agentId=REFUND, runId=run_id))["runEvents"]
    return events


async def test_each_item_is_decided_on_its_own_and_the_answers_come_in_input_order(gql: GraphQLClient) -> None:
    # given a run of one refund (order 1044, $15.50) and a run of two (1080 at $10, 1081 at $11)
    single, (single_call,) = await _refund_run(gql, "1044")
    double, (first, second) = await _refund_run(gql, "1080 and 1081")

    # when one batch approves the first call of the double run with an invalid edit, declines the
    # single run's call, names a missing call and a missing run, approves both calls of the double
    # run, and approves the single run's call (declined by an earlier item)
    results = await _decide(
        gql,
        [
            _approve(double, first, editedArgs={"amount": "lots"}),
            {"runId": single, "toolCallId": single_call, "kind": "DECLINED", "reason": "duplicate"},
            _approve(single, "no-such-call"),
            _approve("f" * 32, first),
            _approve(double, first),
        ],
    )
    more = await _decide(gql, [_approve(double, second), _approve(single, single_call)])

    # then each item got its own answer, in order, and the errors stopped nothing
    assert [r["__typename"] for r in results] == [
        "InvalidToolArguments",
        "RunOutcome",
        "RunNotFound",  # the single run completed (declined) before this item was decided
        "RunNotFound",
        "RunOutcome",
    ], results
    assert results[0]["problems"] == [{"path": ["order_id"]}, {"path": ["amount"]}]
    assert (results[1]["runId"], results[1]["status"]) == (single, "COMPLETED")
    assert "declined" in results[1]["output"]
    assert (results[4]["runId"], results[4]["status"]) == (double, "SUSPENDED")
    # and the single run's call, declined by the first batch and its run finished, is already decided
    assert [r["__typename"] for r in more] == ["RunOutcome", "ToolCallAlreadyDecided"]
    assert more[0]["status"] == "COMPLETED"
    assert (more[1]["decision"]["kind"], more[1]["decision"]["reason"]) == ("DECLINED", "duplicate")
    ledger = sorted(LEDGER, key=lambda entry: entry["orderId"])  # the two calls run concurrently
    assert ledger == [{"orderId": 1080, "amount": 10.0}, {"orderId": 1081, "amount": 11.0}]


async def test_a_run_whose_calls_are_all_decided_by_the_batch_continues_once(gql: GraphQLClient) -> None:
    # given two runs of two refunds each
    runs = [await _refund_run(gql, "1080 and 1081"), await _refund_run(gql, "1082 and 1083")]

    # when one batch approves all four calls, interleaving the runs
    (run_a, (a1, a2)), (run_b, (b1, b2)) = runs
    results = await _decide(gql, [_approve(run_a, a1), _approve(run_b, b1), _approve(run_a, a2), _approve(run_b, b2)])

    # then the first item of each run waits for the second, which continues the run to completion
    assert [r["status"] for r in results] == ["SUSPENDED", "SUSPENDED", "COMPLETED", "COMPLETED"], results
    assert sorted(entry["orderId"] for entry in LEDGER) == [1080, 1081, 1082, 1083]

    # and each run was continued exactly once
    for run_id in (run_a, run_b):
        types = Counter(event["type"] for event in await _events(gql, run_id))
        assert (types["decision"], types["resumed"], types["completed"]) == (2, 1, 1)


async def test_bulk_items_racing_single_decisions_decide_each_call_exactly_once(gql: GraphQLClient) -> None:
    # given five runs of one refund each
    runs = [await _refund_run(gql, str(1080 + i)) for i in range(5)]

    # when a batch approving all five races single declines of the same calls
    bulk, *singles = await asyncio.gather(
        _decide(gql, [_approve(run_id, call_id) for run_id, (call_id,) in runs]),
        *(
            gql.data(DECLINE, input={"agentId": REFUND, "runId": run_id, "toolCallId": call_id})
            for run_id, (call_id,) in runs
        ),
    )

    # then each call was decided by exactly one of them, and only the approved ones were refunded
    approved = []
    for (run_id, _), item, single in zip(runs, bulk, singles, strict=True):
        declined = single["declineToolCall"]
        winners = [item["__typename"] == "RunOutcome", declined["__typename"] == "RunOutcome"]
        assert winners.count(True) == 1, (item, declined)
        loser = declined if winners[0] else item
        assert loser["__typename"] in {"ToolCallAlreadyDecided", "RunNotFound"}, loser
        if winners[0]:
            approved.append(run_id)
        decisions = [event for event in await _events(gql, run_id) if event["type"] == "decision"]
        assert len(decisions) == 1
    assert len(LEDGER) == len(approved)


async def test_a_batch_over_the_limit_or_with_a_field_its_kind_does_not_take_records_nothing(
    gql: GraphQLClient,
) -> None:
    # given a run of one refund
    run_id, (call_id,) = await _refund_run(gql)

    # when a batch of 6 decisions (the limit is 5) is sent, and one with a reason on an approval
    too_many = await gql.execute(DECIDE, input={"agentId": REFUND, "decisions": [_approve(run_id, call_id)] * 6})
    wrong_field = await gql.execute(
        DECIDE, input={"agentId": REFUND, "decisions": [_approve(run_id, call_id, reason="why not")]}
    )

    # then both are refused as bad input naming the argument, and the call is still undecided
    (error,) = too_many["errors"]
    assert error["extensions"] == {"code": "BAD_USER_INPUT", "argument": "input.decisions"}
    assert "at most 5" in error["message"]
    (error,) = wrong_field["errors"]
    assert error["extensions"] == {"code": "BAD_USER_INPUT", "argument": "input.decisions[0].reason"}
    run = (await gql.data(RUN, agentId=REFUND, runId=run_id))["suspendedRun"]
    assert run["toolCalls"] == [{"decision": None}]
    assert LEDGER == []


async def test_items_on_runs_outside_the_callers_resources_answer_run_not_found(
    gql: GraphQLClient, http: httpx.AsyncClient
) -> None:
    # given a run of resource customer-9 and one of customer-1
    mine, (my_call,) = await _refund_run(gql, "1080", resourceId="customer-9")
    theirs, (their_call,) = await _refund_run(gql, "1081", resourceId="customer-1")

    # when OTHER (customer-9 only) approves both in one batch
    http.headers.update(OTHER.headers)
    results = await _decide(gql, [_approve(theirs, their_call), _approve(mine, my_call)])

    # then the other resource's run is reported missing and untouched; its own run completed
    assert [r["__typename"] for r in results] == ["RunNotFound", "RunOutcome"]
    assert results[1]["status"] == "COMPLETED"
    assert LEDGER == [{"orderId": 1080, "amount": 10.0}]


async def test_a_repeated_batch_with_its_idempotency_key_replays_the_first_answers(gql: GraphQLClient) -> None:
    # given a run of one refund, and a batch naming a missing call of it, then approving it, sent with a key
    run_id, (call_id,) = await _refund_run(gql)
    decisions = [_approve(run_id, "no-such-call"), _approve(run_id, call_id)]
    first = await _decide(gql, decisions, idempotencyKey="batch-1")
    assert [r["__typename"] for r in first] == ["ToolCallNotFound", "RunOutcome"]

    # when the same batch is sent again with the same key
    again = await _decide(gql, decisions, idempotencyKey="batch-1")

    # then the first answers come back (the error too, though the run is gone now) and nothing ran twice
    assert again == first
    assert LEDGER == [{"orderId": 1044, "amount": 15.5}]

    # and the key with other decisions answers IdempotencyKeyReused for every item, recording nothing
    reused = await _decide(gql, decisions[:1], idempotencyKey="batch-1")
    assert [(r["__typename"], r["code"]) for r in reused] == [("IdempotencyKeyReused", "IDEMPOTENCY_KEY_REUSED")]


@pytest.mark.process
def test_an_idempotent_batch_repeated_after_a_restart_replays_its_answers(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    log = tmp_path / "runsgate.log"
    store = {**shared_store_env(request, "sqlite", tmp_path), "RUNSGATE_TOOL_RULES": "[]"}
    # given two refund runs on a SQLite file, approved in one batch with a key (and a missing call)
    with runsgate_process(log, **store) as first:
        started = [
            data(first, None, START, input={"agentId": REFUND, "prompt": f"Please refund order {order}"})["startRun"]
            for order in (1080, 1081)
        ]
        decisions = [_approve(started[0]["runId"], "no-such-call")]
        decisions += [_approve(run["runId"], run["run"]["toolCalls"][0]["toolCallId"]) for run in started]
        batch = {"agentId": REFUND, "decisions": decisions, "idempotencyKey": "restart-batch"}
        answered = data(first, None, DECIDE, input=batch)["decideToolCalls"]["results"]
        assert [r["__typename"] for r in answered] == ["ToolCallNotFound", "RunOutcome", "RunOutcome"]
        assert [r["status"] for r in answered[1:]] == ["COMPLETED", "COMPLETED"]

    # when the server restarts on the same file and the batch is sent again
    with runsgate_process(log, **store) as second:
        replayed = data(second, None, DECIDE, input=batch)["decideToolCalls"]["results"]

        # then the first answers come back, and each run was decided once
        assert replayed == answered
        for run in started:
            events = data(second, None, EVENTS, agentId=REFUND, runId=run["runId"])["runEvents"]
            assert [e["type"] for e in events].count("decision") == 1


async def test_a_batch_whose_every_item_is_refused_records_nothing_not_even_its_key(gql: GraphQLClient) -> None:
    # given a run of one refund, and a batch with a key whose only item names a missing call
    run_id, (call_id,) = await _refund_run(gql)
    refused = await _decide(gql, [_approve(run_id, "no-such-call")], idempotencyKey="batch-2")
    assert [r["__typename"] for r in refused] == ["ToolCallNotFound"]

    # when the key is used again for the corrected batch
    corrected = await _decide(gql, [_approve(run_id, call_id)], idempotencyKey="batch-2")

    # then the key was free (a refused request writes nothing): the approval is recorded
    assert [(r["__typename"], r.get("status")) for r in corrected] == [("RunOutcome", "COMPLETED")]
    assert LEDGER == [{"orderId": 1044, "amount": 15.5}]


async def test_an_empty_batch_is_bad_input(gql: GraphQLClient) -> None:
    answer = await gql.execute(DECIDE, input={"agentId": REFUND, "decisions": [], "idempotencyKey": "empty"})

    (error,) = answer["errors"]
    assert error["extensions"] == {"code": "BAD_USER_INPUT", "argument": "input.decisions"}


async def test_a_resume_without_resume_data_is_bad_input_naming_the_field(gql: GraphQLClient) -> None:
    # given a weather run waiting for data (ask_city)
    started = await gql.data(START, input={"agentId": WEATHER, "prompt": WEATHER_PROMPT})
    run_id = started["startRun"]["runId"]
    (call,) = started["startRun"]["run"]["toolCalls"]

    # when it is resumed in a batch without resumeData
    answer = await gql.execute(
        DECIDE,
        input={
            "agentId": WEATHER,
            "decisions": [{"runId": run_id, "toolCallId": call["toolCallId"], "kind": "RESUMED"}],
        },
    )

    # then the batch is refused as bad input naming the missing field, and the run still waits
    (error,) = answer["errors"]
    assert error["extensions"] == {"code": "BAD_USER_INPUT", "argument": "input.decisions[0].resumeData"}
    assert error["message"] == "`input.decisions[0].resumeData` is required for RESUMED decisions"
    assert (await gql.data(RUN, agentId=WEATHER, runId=run_id))["suspendedRun"]["toolCalls"] == [{"decision": None}]
