"""``approveToolCall`` / ``declineToolCall`` / ``resumeRun`` over HTTP
(docs/architecture.md "Decide"; docs/api.md "Mutations").

Each mutation answers a ``RunOutcome`` or one ``UserError`` member; an error changes nothing.
``runtime.demo.LEDGER`` records the refunds the refund agent really issued.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from runtime.demo import LEDGER

from .._auth import ADMIN
from .._graphql import (
    APPROVE,
    DECLINE,
    REFUND,
    REFUND_PROMPT,
    RESUME,
    START_RUN,
    SUPERVISOR,
    TWO_REFUNDS_PROMPT,
    WEATHER,
    WEATHER_PROMPT,
    GraphQLClient,
)

UNKNOWN_RUN_ID = "f" * 32


def _call_id(run: dict[str, Any], index: int = 0) -> str:
    call_id: str = run["toolCalls"][index]["toolCallId"]
    return call_id


async def _assert_gone(gql: GraphQLClient, agent_id: str, run_id: str) -> None:
    assert await gql.suspended_run(agent_id, run_id) is None
    assert run_id not in await gql.listed_ids(agent_id)


# -- approve / decline -----------------------------------------------------------------------------


async def test_approving_the_refund_completes_the_run_issues_it_once_and_deletes_the_snapshot(
    gql: GraphQLClient,
) -> None:
    # given a refund run waiting for approval, and no refund issued yet
    run = await gql.suspend(REFUND, REFUND_PROMPT)
    assert LEDGER == []

    # when its issue_refund call is approved
    outcome = await gql.approve(REFUND, run["runId"], _call_id(run))

    # then the run completed, the refund was issued exactly once, and the run is no longer listed
    assert outcome["__typename"] == "RunOutcome"
    assert (outcome["runId"], outcome["agentId"], outcome["status"]) == (run["runId"], REFUND, "COMPLETED")
    assert "Refund of $49.90 for order 1042 issued" in outcome["output"]
    assert outcome["error"] is None
    assert outcome["run"] is None
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]
    await _assert_gone(gql, REFUND, run["runId"])
    assert (await gql.suspended_runs(REFUND))["totalCount"] == 0


async def test_declining_with_a_reason_completes_the_run_without_refunding_and_the_model_gets_the_reason(
    gql: GraphQLClient,
) -> None:
    # given a refund run waiting for approval
    run = await gql.suspend(REFUND, REFUND_PROMPT)

    # when its call is declined with a reason
    reason = "Order 1042 was already refunded by phone"
    outcome = await gql.decline(REFUND, run["runId"], _call_id(run), reason=reason)

    # then the run completed, its answer quotes the reason, and the tool never ran
    assert outcome["__typename"] == "RunOutcome"
    assert outcome["status"] == "COMPLETED"
    assert "not issued" in outcome["output"]
    assert reason in outcome["output"]
    assert LEDGER == []
    await _assert_gone(gql, REFUND, run["runId"])


async def test_a_run_with_two_calls_waits_until_both_are_decided(gql: GraphQLClient) -> None:
    # given a run asking to refund two orders: two pending issue_refund calls
    run = await gql.suspend(REFUND, TWO_REFUNDS_PROMPT)
    calls = run["toolCalls"]
    assert [(c["toolName"], c["args"], c["requiresApproval"]) for c in calls] == [
        ("issue_refund", {"order_id": 1042, "amount": 49.9}, True),
        ("issue_refund", {"order_id": 1043, "amount": 120.0}, True),
    ]
    assert len({c["toolCallId"] for c in calls}) == 2

    # when the first call is approved
    before = datetime.now(UTC)
    first = await gql.approve(REFUND, run["runId"], calls[0]["toolCallId"])
    after = datetime.now(UTC)

    # then the run is still suspended with that one decision recorded, and nothing was refunded yet
    assert first["__typename"] == "RunOutcome"
    assert first["status"] == "SUSPENDED"
    waiting = first["run"]
    assert waiting["runId"] == run["runId"]
    decided, pending = waiting["toolCalls"]
    assert decided["toolCallId"] == calls[0]["toolCallId"]
    decision = decided["decision"]
    assert decision["kind"] == "APPROVED"
    assert decision["decidedAt"].endswith("Z")
    assert (
        before.replace(microsecond=before.microsecond // 1000 * 1000)
        <= datetime.fromisoformat(decision["decidedAt"])
        <= after
    )
    assert decision["decidedBy"] == f"key:{ADMIN.name}"  # the API key's identity
    assert decision["reason"] is None
    assert pending["toolCallId"] == calls[1]["toolCallId"]
    assert pending["decision"] is None
    assert LEDGER == []
    # and the listing shows the run with its recorded decision
    assert await gql.suspended_run(REFUND, run["runId"]) == waiting
    listed = (await gql.suspended_runs(REFUND))["edges"]
    assert [e["node"] for e in listed] == [waiting]

    # when the second call is approved too
    second = await gql.approve(REFUND, run["runId"], calls[1]["toolCallId"])

    # then the run completed with both refunds, each issued once, and is gone
    assert second["status"] == "COMPLETED"
    assert "order 1042" in second["output"]
    assert "order 1043" in second["output"]
    assert sorted(entry["orderId"] for entry in LEDGER) == [1042, 1043]
    await _assert_gone(gql, REFUND, run["runId"])


async def test_one_call_approved_and_the_other_declined_refunds_only_the_approved_one(
    gql: GraphQLClient,
) -> None:
    # given a run with two pending refunds
    run = await gql.suspend(REFUND, TWO_REFUNDS_PROMPT)

    # when the second is declined, then the first approved
    declined = await gql.decline(REFUND, run["runId"], _call_id(run, 1), reason="kettle was never returned")
    assert declined["status"] == "SUSPENDED"
    assert declined["run"]["toolCalls"][1]["decision"]["kind"] == "DECLINED"
    assert declined["run"]["toolCalls"][1]["decision"]["reason"] == "kettle was never returned"
    approved = await gql.approve(REFUND, run["runId"], _call_id(run, 0))

    # then only order 1042 was refunded, and the answer gives the reason for 1043
    assert approved["status"] == "COMPLETED"
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]
    assert "kettle was never returned" in approved["output"]
    await _assert_gone(gql, REFUND, run["runId"])


# -- resume ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("with_call_id", [True, False], ids=["toolCallId", "only-call"])
async def test_resuming_the_weather_run_with_a_city_completes_it(gql: GraphQLClient, with_call_id: bool) -> None:
    # given a weather run waiting for the city
    run = await gql.suspend(WEATHER, WEATHER_PROMPT)

    # when it is resumed with the example's resume data (naming the call, or not: it is the only one)
    fields = {"toolCallId": _call_id(run)} if with_call_id else {}
    outcome = await gql.resume(WEATHER, run["runId"], {"name": "San Francisco"}, **fields)

    # then the run completed with San Francisco's weather, and is gone
    assert outcome["__typename"] == "RunOutcome"
    assert outcome["status"] == "COMPLETED"
    assert "San Francisco" in outcome["output"]
    assert outcome["run"] is None
    await _assert_gone(gql, WEATHER, run["runId"])


@pytest.mark.parametrize(
    ("resume_data", "problems"),
    [
        ({"city": 3}, [([], "'name' is a required property")]),
        ({"name": 3}, [(["name"], "3 is not of type 'string'")]),
        ("San Francisco", [([], "'San Francisco' is not of type 'object'")]),
    ],
)
async def test_resume_data_that_breaks_the_schema_is_rejected_and_the_run_is_unchanged(
    gql: GraphQLClient, resume_data: Any, problems: list[tuple[list[str], str]]
) -> None:
    # given a weather run waiting for a city
    run = await gql.suspend(WEATHER, WEATHER_PROMPT)

    # when it is resumed with data that does not match the call's resumeSchema
    result = await gql.resume(WEATHER, run["runId"], resume_data, toolCallId=_call_id(run))

    # then the answer is InvalidResumeData with each problem's path, and nothing was recorded
    assert result["__typename"] == "InvalidResumeData"
    assert result["code"] == "INVALID_RESUME_DATA"
    assert result["message"]
    assert [(p["path"], p["message"]) for p in result["problems"]] == problems
    stored = await gql.suspended_run(WEATHER, run["runId"])
    assert stored == run
    assert stored is not None
    assert stored["toolCalls"][0]["decision"] is None
    # and valid data still resumes it
    assert (await gql.resume(WEATHER, run["runId"], {"name": "Paris"}))["status"] == "COMPLETED"


# -- errors ----------------------------------------------------------------------------------------


async def test_deciding_a_call_twice_is_already_decided_naming_the_winning_decision(
    gql: GraphQLClient,
) -> None:
    # given a run with two refunds, the first one approved
    run = await gql.suspend(REFUND, TWO_REFUNDS_PROMPT)
    first = await gql.approve(REFUND, run["runId"], _call_id(run))
    winning = first["run"]["toolCalls"][0]["decision"]
    assert winning["kind"] == "APPROVED"

    # when the same call is approved again, then declined
    again = await gql.approve(REFUND, run["runId"], _call_id(run))
    declined = await gql.decline(REFUND, run["runId"], _call_id(run), reason="changed my mind")

    # then both are ToolCallAlreadyDecided carrying the first decision, and nothing changed
    for result in (again, declined):
        assert result["__typename"] == "ToolCallAlreadyDecided"
        assert result["code"] == "TOOL_CALL_ALREADY_DECIDED"
        assert result["runId"] == run["runId"]
        assert result["toolCallId"] == _call_id(run)
        assert result["decision"] == winning
        assert result["message"]
    assert await gql.suspended_run(REFUND, run["runId"]) == first["run"]
    assert LEDGER == []


@pytest.mark.parametrize("edited", [False, True])
async def test_deciding_a_call_of_a_run_that_finished_is_already_decided_naming_its_decision(
    gql: GraphQLClient, edited: bool
) -> None:
    # given a refund approved (with edited arguments, or not), so its run completed and is gone
    run = await gql.suspend(REFUND, REFUND_PROMPT)
    edit = {"editedArgs": {"order_id": 1042, "amount": 10.0}} if edited else {}
    done = await gql.approve(REFUND, run["runId"], _call_id(run), **edit)
    assert done["status"] == "COMPLETED", done
    [event] = [e for e in await gql.run_events(REFUND, run["runId"]) if e["type"] == "decision"]

    # when the same call is approved again, and declined, as a late or duplicate click would
    again = await gql.approve(REFUND, run["runId"], _call_id(run))
    declined = await gql.decline(REFUND, run["runId"], _call_id(run), reason="too late")

    # then both say the call was decided, naming the decision its events recorded; nothing ran again
    for result in (again, declined):
        assert result["__typename"] == "ToolCallAlreadyDecided", result
        assert (result["runId"], result["toolCallId"]) == (run["runId"], _call_id(run))
        assert result["decision"] == {
            "kind": "APPROVED",
            "decidedAt": event["at"],
            "decidedBy": event["by"],
            "reason": None,
        }
    assert len(LEDGER) == 1
    # and a call the run never had is still not found, as is the run for another agent
    assert (await gql.approve(REFUND, run["runId"], "c_" + "0" * 24))["__typename"] == "RunNotFound"
    assert (await gql.approve(WEATHER, run["runId"], _call_id(run)))["__typename"] == "RunNotFound"


async def test_another_agents_run_is_not_found_exactly_like_a_run_that_does_not_exist(
    gql: GraphQLClient,
) -> None:
    # given a weather run, and an id no run has
    weather = await gql.suspend(WEATHER, WEATHER_PROMPT)

    # when refund-agent is asked to approve a call of the weather run, and of the unknown run
    foreign = await gql.approve(REFUND, weather["runId"], _call_id(weather))
    unknown = await gql.approve(REFUND, UNKNOWN_RUN_ID, _call_id(weather))

    # then both are RunNotFound, with the same message but for the id: existence does not leak
    for result, run_id in ((foreign, weather["runId"]), (unknown, UNKNOWN_RUN_ID)):
        assert result["__typename"] == "RunNotFound"
        assert result["code"] == "RUN_NOT_FOUND"
        assert (result["agentId"], result["runId"]) == (REFUND, run_id)
    assert foreign["message"] == unknown["message"].replace(UNKNOWN_RUN_ID, weather["runId"])
    assert foreign["message"] != unknown["message"]
    # and the weather run is untouched
    assert await gql.suspended_run(WEATHER, weather["runId"]) == weather


@pytest.mark.parametrize("mutation", ["approve", "decline", "resume"])
async def test_deciding_on_a_run_of_another_agent_is_run_not_found(gql: GraphQLClient, mutation: str) -> None:
    # given a refund run and a weather run
    refund = await gql.suspend(REFUND, REFUND_PROMPT)
    weather = await gql.suspend(WEATHER, WEATHER_PROMPT)

    # when each is decided through the other agent's id
    if mutation == "resume":
        result = await gql.resume(REFUND, weather["runId"], {"name": "Paris"}, toolCallId=_call_id(weather))
    else:
        decide = gql.approve if mutation == "approve" else gql.decline
        result = await decide(WEATHER, refund["runId"], _call_id(refund))

    # then the run is not found, and neither run changed
    assert result["__typename"] == "RunNotFound"
    assert await gql.suspended_run(REFUND, refund["runId"]) == refund
    assert await gql.suspended_run(WEATHER, weather["runId"]) == weather
    assert LEDGER == []


@pytest.mark.parametrize("mutation", ["approve", "decline"])
async def test_an_unknown_tool_call_is_tool_call_not_found(gql: GraphQLClient, mutation: str) -> None:
    # given a refund run
    run = await gql.suspend(REFUND, REFUND_PROMPT)

    # when a call id it does not have is decided
    decide = gql.approve if mutation == "approve" else gql.decline
    result = await decide(REFUND, run["runId"], "no-such-call")

    # then ToolCallNotFound names the run and the call, and the run is unchanged
    assert result["__typename"] == "ToolCallNotFound"
    assert result["code"] == "TOOL_CALL_NOT_FOUND"
    assert (result["runId"], result["missingToolCallId"]) == (run["runId"], "no-such-call")
    assert await gql.suspended_run(REFUND, run["runId"]) == run


async def test_resuming_an_unknown_tool_call_is_tool_call_not_found(gql: GraphQLClient) -> None:
    # given a weather run
    run = await gql.suspend(WEATHER, WEATHER_PROMPT)

    # when a call id it does not have is resumed
    result = await gql.resume(WEATHER, run["runId"], {"name": "Paris"}, toolCallId="no-such-call")

    # then ToolCallNotFound, and the run is unchanged
    assert result["__typename"] == "ToolCallNotFound"
    assert result["missingToolCallId"] == "no-such-call"
    assert await gql.suspended_run(WEATHER, run["runId"]) == run


@pytest.mark.parametrize("mutation", ["approve", "decline"])
async def test_approving_or_declining_a_call_that_waits_for_data_is_wrong_kind(
    gql: GraphQLClient, mutation: str
) -> None:
    # given a weather run whose ask_city call waits for resume data
    run = await gql.suspend(WEATHER, WEATHER_PROMPT)

    # when that call is approved or declined
    decide = gql.approve if mutation == "approve" else gql.decline
    result = await decide(WEATHER, run["runId"], _call_id(run))

    # then WrongToolCallKind says it expects resume data, and the run is unchanged
    assert result["__typename"] == "WrongToolCallKind"
    assert result["code"] == "WRONG_TOOL_CALL_KIND"
    assert (result["runId"], result["toolCallId"], result["expected"]) == (
        run["runId"],
        _call_id(run),
        "resume",
    )
    assert await gql.suspended_run(WEATHER, run["runId"]) == run


async def test_resuming_a_call_that_waits_for_approval_is_wrong_kind(gql: GraphQLClient) -> None:
    # given a refund run whose issue_refund call waits for approval
    run = await gql.suspend(REFUND, REFUND_PROMPT)

    # when that call is resumed with data
    result = await gql.resume(REFUND, run["runId"], {"ok": True}, toolCallId=_call_id(run))

    # then WrongToolCallKind says it expects an approval; nothing was refunded or changed
    assert result["__typename"] == "WrongToolCallKind"
    assert (result["toolCallId"], result["expected"]) == (_call_id(run), "approval")
    assert await gql.suspended_run(REFUND, run["runId"]) == run
    assert LEDGER == []


@pytest.mark.parametrize(
    ("document", "field", "extra"),
    [
        (APPROVE, "approveToolCall", {"toolCallId": "c"}),
        (DECLINE, "declineToolCall", {"toolCallId": "c", "reason": "no"}),
        (RESUME, "resumeRun", {"resumeData": {"name": "Paris"}}),
    ],
)
async def test_deciding_for_an_unknown_agent_is_agent_not_found(
    gql: GraphQLClient, document: str, field: str, extra: dict[str, Any]
) -> None:
    # given no agent "nope"
    # when a decision is sent for it
    result = (await gql.data(document, input={"agentId": "nope", "runId": UNKNOWN_RUN_ID, **extra}))[field]

    # then AgentNotFound names it and lists the agents the caller may use
    assert result["__typename"] == "AgentNotFound"
    assert result["code"] == "AGENT_NOT_FOUND"
    assert result["agentId"] == "nope"
    known = "refund-agent, support-supervisor, weather-agent"
    assert result["message"] == f"No agent is registered with id 'nope'; known agents: {known}."


RACE_ROUNDS = 6


async def test_racing_decisions_on_one_call_have_exactly_one_winner(gql: GraphQLClient) -> None:
    for _ in range(RACE_ROUNDS):
        # given a refund run waiting for approval, and no refund issued
        LEDGER.clear()
        run = await gql.suspend(REFUND, REFUND_PROMPT)

        # when two approvals and a decline of its call arrive at the same time
        results = await asyncio.gather(
            gql.approve(REFUND, run["runId"], _call_id(run)),
            gql.approve(REFUND, run["runId"], _call_id(run)),
            gql.decline(REFUND, run["runId"], _call_id(run), reason="race"),
        )

        # then exactly one decision was recorded and acted on; the others got a conflict or no run
        summary = [(r["__typename"], r.get("status"), r.get("output")) for r in results]
        winners = [r for r in results if r["__typename"] == "RunOutcome"]
        losers = [r for r in results if r["__typename"] != "RunOutcome"]
        assert len(winners) == 1, summary
        assert winners[0]["status"] == "COMPLETED", summary
        assert {r["__typename"] for r in losers} <= {"ToolCallAlreadyDecided", "RunNotFound"}, summary
        won_approval = "not issued" not in winners[0]["output"]
        assert ([{"orderId": 1042, "amount": 49.9}] if won_approval else []) == LEDGER, summary
        for loser in losers:
            if loser["__typename"] == "ToolCallAlreadyDecided":
                assert loser["decision"]["kind"] == ("APPROVED" if won_approval else "DECLINED")
        await _assert_gone(gql, REFUND, run["runId"])


# -- idempotency -----------------------------------------------------------------------------------


async def test_repeating_an_approval_with_its_idempotency_key_returns_the_first_outcome_and_refunds_once(
    gql: GraphQLClient,
) -> None:
    # given a refund run, approved with an idempotency key
    run = await gql.suspend(REFUND, REFUND_PROMPT)
    first = await gql.approve(REFUND, run["runId"], _call_id(run), idempotencyKey="approve-1042")
    assert first["status"] == "COMPLETED"

    # when the same request is sent again with the same key
    again = await gql.approve(REFUND, run["runId"], _call_id(run), idempotencyKey="approve-1042")

    # then it answers the first outcome, and the refund was issued once
    assert again == first
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]


async def test_an_idempotency_key_reused_with_other_arguments_is_rejected(gql: GraphQLClient) -> None:
    # given two refund runs, the first approved with a key
    used = await gql.suspend(REFUND, REFUND_PROMPT)
    other = await gql.suspend(REFUND, REFUND_PROMPT)
    assert (await gql.approve(REFUND, used["runId"], _call_id(used), idempotencyKey="k-1"))["status"] == "COMPLETED"

    # when the key is sent again to approve the other run
    result = await gql.approve(REFUND, other["runId"], _call_id(other), idempotencyKey="k-1")

    # then IdempotencyKeyReused names the key, and the other run was not approved
    assert result["__typename"] == "IdempotencyKeyReused"
    assert result["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert result["idempotencyKey"] == "k-1"
    assert await gql.suspended_run(REFUND, other["runId"]) == other
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]


async def test_repeating_start_run_with_its_idempotency_key_starts_one_run(gql: GraphQLClient) -> None:
    # given a refund run started with an idempotency key
    first = await gql.start_run(REFUND, REFUND_PROMPT, idempotencyKey="start-1")

    # when the same start is sent again
    again = await gql.start_run(REFUND, REFUND_PROMPT, idempotencyKey="start-1")

    # then it is the same run, listed once
    assert again == first
    assert await gql.listed_ids(REFUND) == [first["runId"]]


async def test_an_idempotency_key_reused_to_start_another_run_is_rejected(gql: GraphQLClient) -> None:
    # given a refund run started with a key
    first = await gql.start_run(REFUND, REFUND_PROMPT, idempotencyKey="start-2")

    # when the key is sent again with another prompt
    result = (
        await gql.data(
            START_RUN, input={"agentId": REFUND, "prompt": "Please refund order 1043", "idempotencyKey": "start-2"}
        )
    )["startRun"]

    # then IdempotencyKeyReused names the key, and no second run was started
    assert result["__typename"] == "IdempotencyKeyReused"
    assert result["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert result["idempotencyKey"] == "start-2"
    assert await gql.listed_ids(REFUND) == [first["runId"]]


# -- supervisor ------------------------------------------------------------------------------------


async def test_approving_the_supervisors_call_completes_it_and_the_sub_agents_run(gql: GraphQLClient) -> None:
    # given a supervisor run delegating a refund, with the inner run listed under refund-agent
    outer = await gql.suspend(SUPERVISOR, REFUND_PROMPT)
    [inner_id] = await gql.listed_ids(REFUND)

    # when the supervisor's issue_refund call is approved
    outcome = await gql.approve(SUPERVISOR, outer["runId"], _call_id(outer))

    # then the supervisor's run completed with the refund agent's answer, refunded once
    assert outcome["__typename"] == "RunOutcome"
    assert outcome["status"] == "COMPLETED"
    assert "Refund of $49.90 for order 1042 issued" in outcome["output"]
    assert LEDGER == [{"orderId": 1042, "amount": 49.9}]
    # and both snapshots are gone
    await _assert_gone(gql, SUPERVISOR, outer["runId"])
    await _assert_gone(gql, REFUND, inner_id)
    assert (await gql.suspended_runs(SUPERVISOR))["totalCount"] == 0
    assert (await gql.suspended_runs(REFUND))["totalCount"] == 0


async def test_declining_the_supervisors_call_completes_both_runs_without_refunding(
    gql: GraphQLClient,
) -> None:
    # given a supervisor run delegating a refund
    outer = await gql.suspend(SUPERVISOR, REFUND_PROMPT)
    [inner_id] = await gql.listed_ids(REFUND)

    # when the supervisor's issue_refund call is declined with a reason
    outcome = await gql.decline(SUPERVISOR, outer["runId"], _call_id(outer), reason="not eligible for refunds")

    # then the supervisor relays the refusal with the reason, nothing was refunded, both runs are gone
    assert outcome["status"] == "COMPLETED"
    assert "not eligible for refunds" in outcome["output"]
    assert LEDGER == []
    await _assert_gone(gql, SUPERVISOR, outer["runId"])
    await _assert_gone(gql, REFUND, inner_id)


async def test_resuming_a_finished_run_again_naming_no_call_is_already_decided(gql: GraphQLClient) -> None:
    # given a weather run resumed without naming its one call, so it completed and is gone
    run = await gql.suspend(WEATHER, WEATHER_PROMPT)
    done = await gql.resume(WEATHER, run["runId"], {"name": "Paris"})
    assert done["status"] == "COMPLETED", done
    [event] = [e for e in await gql.run_events(WEATHER, run["runId"]) if e["type"] == "decision"]

    # when it is resumed again the same way, as a late or repeated request would
    again = await gql.resume(WEATHER, run["runId"], {"name": "Paris"})

    # then the answer names the call and the decision its events recorded, as a stored run's would
    assert again["__typename"] == "ToolCallAlreadyDecided", again
    assert (again["runId"], again["toolCallId"]) == (run["runId"], _call_id(run))
    assert again["decision"] == {"kind": "RESUMED", "decidedAt": event["at"], "decidedBy": event["by"], "reason": None}
