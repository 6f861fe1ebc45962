"""Decisions mean what they say (issue 14, parts 1, 2 and 6), on every store.

- every ``suspend()`` point of a tool call is its own question, with its own payload, schema
  and ``questionId``; answers are delivered in order and never reused; a resume aimed at a
  question no longer pending is refused;
- a resume never approves: only ``approve`` does, in either order (question then approval,
  approval then question), and a decline is final;
- the metadata of ``ApprovalRequired(metadata=...)`` is listed as ``approvalMetadata``.
"""

from __future__ import annotations

from typing import Any

import pytest

from runtime import (
    InvalidResumeDataError,
    QuestionNotPendingError,
    RunManager,
    ToolCallAlreadyDecidedError,
    ToolCallNotFoundError,
    WrongToolCallKindError,
)
from storage import SnapshotDocument

from . import agents

TRIP, PAYMENT, RELEASE = "trip-agent", "payment-agent", "release-agent"


def _only_call(run: SnapshotDocument | None) -> dict[str, Any]:
    assert run is not None
    (call,) = run["toolCalls"]
    return dict(call)


# -- part 1: one question per suspend() ---------------------------------------------------------------


async def test_a_second_suspend_asks_its_own_question_with_its_own_schema(any_manager: RunManager) -> None:
    # given a trip run asking "Which city?"
    started = await any_manager.start_run(TRIP, "plan")
    first = _only_call(started.run)
    assert first["suspendPayload"] == {"question": "Which city?"}
    assert first["resumeSchema"] == agents.CityQ.model_json_schema()
    assert first["questionId"]

    # when the city is given
    after_city = await any_manager.resume(TRIP, started.run_id, None, {"city": "Paris"})

    # then the run suspends again on the second question, under the same call but a new question id
    assert after_city.status == "suspended"
    second = _only_call(after_city.run)
    assert second["toolCallId"] == first["toolCallId"]
    assert second["questionId"]
    assert second["questionId"] != first["questionId"]
    assert second["suspendPayload"] == {"question": "C or F?"}
    assert second["resumeSchema"] == agents.UNITS_SCHEMA
    assert second["decision"] is None
    listed = await any_manager.store.get(TRIP, started.run_id)
    assert _only_call(listed)["questionId"] == second["questionId"]

    # and an answer naming no question is refused: it names the first, answered already
    with pytest.raises(ToolCallAlreadyDecidedError) as first_answered:
        await any_manager.resume(TRIP, started.run_id, None, {"units": "C"})
    assert first_answered.value.question_id == first["questionId"]
    assert first_answered.value.asking == second["questionId"]

    # and the first answer is checked against the second question's schema, not reused
    with pytest.raises(InvalidResumeDataError):
        await any_manager.resume(TRIP, started.run_id, None, {"city": "Paris"}, question_id=second["questionId"])

    # when the units are given, the tool gets each answer at its own question
    done = await any_manager.resume(TRIP, started.run_id, None, {"units": "C"}, question_id=second["questionId"])
    assert done.status == "completed"
    assert done.output == "plan_trip: {'city': 'Paris', 'units': {'units': 'C'}}"


async def test_an_answer_aimed_at_a_question_no_longer_pending_is_refused_and_changes_nothing(
    any_manager: RunManager,
) -> None:
    # given a trip run that moved on to its second question
    started = await any_manager.start_run(TRIP, "plan")
    first = _only_call(started.run)
    await any_manager.resume(TRIP, started.run_id, None, {"city": "Oslo"}, question_id=first["questionId"])
    before = await any_manager.store.get(TRIP, started.run_id)

    # when a late (or duplicate) answer names the first question
    with pytest.raises(QuestionNotPendingError) as caught:
        await any_manager.resume(
            TRIP, started.run_id, first["toolCallId"], {"units": "F"}, question_id=first["questionId"]
        )

    # then it is refused, naming the question, and the second question still waits
    assert caught.value.question_id == first["questionId"]
    assert caught.value.run_id == started.run_id
    after = await any_manager.store.get(TRIP, started.run_id)
    assert after is not None
    assert before is not None
    assert after["toolCalls"] == before["toolCalls"]
    assert after["version"] == before["version"]


async def test_an_answer_to_a_question_already_answered_names_the_winning_decision(
    any_manager: RunManager,
) -> None:
    # a question whose answer is recorded but whose run has not moved on yet is "already decided"
    started = await any_manager.start_run("survey-agent", "questions please")
    assert started.run is not None
    color = started.run["toolCalls"][0]
    await any_manager.resume("survey-agent", started.run_id, color["toolCallId"], "red")
    with pytest.raises(ToolCallAlreadyDecidedError):
        await any_manager.resume(
            "survey-agent", started.run_id, color["toolCallId"], "blue", question_id=color["questionId"]
        )


async def test_a_tool_re_asking_until_the_answer_is_valid_gets_each_new_answer(any_manager: RunManager) -> None:
    started = await any_manager.start_run("guess-agent", "guess")
    first = _only_call(started.run)

    odd = await any_manager.resume("guess-agent", started.run_id, None, 3)

    assert odd.status == "suspended"
    again = _only_call(odd.run)
    assert again["suspendPayload"] == {"question": "An even number?", "attempt": 1}
    assert again["questionId"] != first["questionId"]
    even = await any_manager.resume("guess-agent", started.run_id, None, 8, question_id=again["questionId"])
    assert even.status == "completed"
    assert even.output == "guess_even: 8"


# -- part 2: a resume never approves ------------------------------------------------------------------


async def test_a_tool_that_needs_approval_after_its_question_suspends_for_the_approval(
    any_manager: RunManager,
) -> None:
    # given a payment run asking for an amount
    started = await any_manager.start_run(PAYMENT, "pay ACME")
    asked = _only_call(started.run)
    assert asked["requiresApproval"] is False

    # when the amount is given
    answered = await any_manager.resume(PAYMENT, started.run_id, None, 1_000_000)

    # then nothing is paid: the same call now waits for an approval, showing the tool's metadata
    assert agents.PAID == []
    assert answered.status == "suspended"
    approval = _only_call(answered.run)
    assert approval["toolCallId"] == asked["toolCallId"]
    assert approval["requiresApproval"] is True
    assert approval["questionId"] != asked["questionId"]
    assert approval["approvalMetadata"] == {"payee": "ACME", "amount": 1_000_000, "risk": "high"}
    assert approval["decision"] is None

    # and resume data cannot stand in for the approval, named or not
    with pytest.raises(WrongToolCallKindError):
        await any_manager.resume(PAYMENT, started.run_id, approval["toolCallId"], 5, question_id=approval["questionId"])
    with pytest.raises(ToolCallNotFoundError):
        await any_manager.resume(PAYMENT, started.run_id, None, 5)
    assert agents.PAID == []

    # and an approval naming only the call names its first question, answered already
    with pytest.raises(ToolCallAlreadyDecidedError):
        await any_manager.approve(PAYMENT, started.run_id, approval["toolCallId"])

    # when its question is approved, the tool runs once with the amount given
    done = await any_manager.approve(
        PAYMENT, started.run_id, approval["toolCallId"], question_id=approval["questionId"]
    )
    assert done.status == "completed"
    assert agents.PAID == [1_000_000]
    assert done.output == "pay: paid 1000000 to ACME"


async def test_declining_after_the_question_is_final(any_manager: RunManager) -> None:
    started = await any_manager.start_run(PAYMENT, "pay ACME")
    answered = await any_manager.resume(PAYMENT, started.run_id, None, 12)
    approval = _only_call(answered.run)
    call_id, question = approval["toolCallId"], approval["questionId"]

    done = await any_manager.decline(PAYMENT, started.run_id, call_id, reason="too much", question_id=question)

    assert done.status == "completed"
    assert agents.PAID == []
    assert "declined" in str(done.output)
    # a late approval of that question of the finished run names the decline its events recorded
    with pytest.raises(QuestionNotPendingError) as late:
        await any_manager.approve(PAYMENT, started.run_id, call_id, question_id=question)
    assert late.value.decision is not None
    assert (late.value.decision["kind"], late.value.decision["reason"]) == ("declined", "too much")
    # and one naming only the call names the answer to its first question
    with pytest.raises(ToolCallAlreadyDecidedError) as first:
        await any_manager.approve(PAYMENT, started.run_id, call_id)
    assert (first.value.decision["kind"], first.value.question_id) == ("resumed", _only_call(started.run)["questionId"])
    assert agents.PAID == []


async def test_a_tool_approved_first_then_asking_suspends_for_the_question_and_stays_approved(
    any_manager: RunManager,
) -> None:
    # given a release run waiting for approval
    started = await any_manager.start_run(RELEASE, "release")
    approval = _only_call(started.run)
    assert approval["requiresApproval"] is True
    assert approval["approvalMetadata"] is None

    # when it is approved, the tool asks its question before doing anything
    asked = await any_manager.approve(RELEASE, started.run_id, approval["toolCallId"])
    assert asked.status == "suspended"
    question = _only_call(asked.run)
    assert question["toolCallId"] == approval["toolCallId"]
    assert question["requiresApproval"] is False
    assert question["suspendPayload"] == {"question": "Release notes for 1.2?"}
    assert agents.RELEASED == []

    # when the question is answered, the tool still sees its approval
    done = await any_manager.resume(RELEASE, started.run_id, None, "bug fixes", question_id=question["questionId"])
    assert done.status == "completed"
    assert agents.RELEASED == ["1.2 (approved): bug fixes"]
