"""``suspend()``: a tool waiting for outside data (as Mastra's suspend() / resumeData)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import RunContext
from pydantic_ai.exceptions import CallDeferred
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RunUsage

from runtime import InvalidResumeDataError, RunManager, suspend
from runtime.running.decision_toolset import decided_context

from . import agents

SURVEY = "survey-agent"


class Answer(BaseModel):
    value: int


def _ctx(*, approved: bool = False, metadata: Any = None) -> RunContext[None]:
    return RunContext(
        deps=None,
        model=TestModel(),
        usage=RunUsage(),
        tool_call_approved=approved,
        tool_call_metadata=metadata,
    )


def test_the_first_call_defers_with_payload_and_the_models_json_schema() -> None:
    with pytest.raises(CallDeferred) as caught:
        suspend(_ctx(), {"question": "How many?"}, resume_schema=Answer)

    assert caught.value.kind == "question"
    assert caught.value.metadata == {
        "runsgate": {"suspendPayload": {"question": "How many?"}, "resumeSchema": Answer.model_json_schema()}
    }


def test_a_payload_model_is_sent_as_json_and_no_schema_is_none() -> None:
    with pytest.raises(CallDeferred) as caught:
        suspend(_ctx(), Answer(value=1))

    assert caught.value.metadata == {"runsgate": {"suspendPayload": {"value": 1}, "resumeSchema": None}}


def _re_run(*answers: Any, approved: bool = False) -> RunContext[None]:
    """The context runsgate's toolset wrapper gives a call re-run after ``answers`` were given."""
    metadata = {"runsgate": {"decision": "resumed", "approved": approved, "answers": list(answers)}}
    return decided_context(_ctx(approved=True, metadata=metadata))


def test_the_re_call_returns_resume_data_validated_into_the_model() -> None:
    assert suspend(_re_run({"value": 3}), "ignored", resume_schema=Answer) == Answer(value=3)


def test_the_re_call_returns_raw_json_with_a_dict_schema() -> None:
    assert suspend(_re_run([1, 2]), resume_schema={"type": "array"}) == [1, 2]


def test_each_suspend_point_gets_its_own_answer_in_order_and_the_next_one_asks() -> None:
    ctx = _re_run("first", "second")

    assert suspend(ctx, "one?") == "first"
    assert suspend(ctx, "two?") == "second"
    with pytest.raises(CallDeferred) as caught:
        suspend(ctx, "three?")
    assert caught.value.metadata == {"runsgate": {"suspendPayload": "three?", "resumeSchema": None}}


def test_a_re_run_call_sees_whether_it_was_approved_not_that_it_was_re_run() -> None:
    assert _re_run("x").tool_call_approved is False
    assert _re_run("x", approved=True).tool_call_approved is True


def test_an_approval_without_resume_data_suspends_again() -> None:
    with pytest.raises(CallDeferred):
        suspend(_re_run(approved=True), "still waiting")


async def test_calls_waiting_for_data_are_listed_with_payloads_and_resumed_one_by_one(
    manager: RunManager,
) -> None:
    # given
    started = await manager.start_run(SURVEY, "questions please")
    assert started.run is not None
    color, size, report = started.run["toolCalls"]
    assert (color["toolName"], color["suspendPayload"], color["resumeSchema"]) == (
        "ask_color",
        {"question": "Which color?"},
        agents.COLOR_SCHEMA,
    )
    assert (size["toolName"], size["suspendPayload"], size["resumeSchema"]) == (
        "ask_size",
        {"question": "Which size?"},
        None,
    )
    # a plain CallDeferred lists its metadata as the payload
    assert (report["toolName"], report["args"], report["suspendPayload"]) == (
        "fetch_report",
        None,
        {"report": "q3", "queue": "reports"},
    )
    assert all(c["requiresApproval"] is False for c in started.run["toolCalls"])

    # when / then: a value outside the dict schema is refused with the top-level path
    with pytest.raises(InvalidResumeDataError) as caught:
        await manager.resume(SURVEY, started.run_id, color["toolCallId"], "green")
    assert [p.path for p in caught.value.problems] == [[]]

    # when each call is resumed
    first = await manager.resume(SURVEY, started.run_id, color["toolCallId"], "red")
    second = await manager.resume(SURVEY, started.run_id, size["toolCallId"], {"any": ["json", 1]})
    done = await manager.resume(SURVEY, started.run_id, report["toolCallId"], "report body")

    # then the run continued only after the last one, each tool returning its own data
    assert (first.status, second.status) == ("suspended", "suspended")
    assert done.status == "completed"
    assert done.output == "ask_color=red; ask_size={'any': ['json', 1]}; fetch_report=report body"
