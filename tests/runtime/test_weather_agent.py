"""weather-agent end to end: a tool suspends for data (resumed with {name: "San Francisco"})."""

from __future__ import annotations

import pytest

from runtime import InvalidResumeDataError, ResumeDataProblem, RunManager, WrongToolCallKindError
from runtime.demo import CITY_QUESTION, forecast

AGENT = "weather-agent"


async def test_resuming_with_a_city_reports_its_weather(any_manager: RunManager) -> None:
    # given
    started = await any_manager.start_run(AGENT, "What's the weather like?", resource_id="user-7")
    assert started.status == "suspended"
    assert started.run is not None
    assert started.run["resourceId"] == "user-7"
    [call] = started.run["toolCalls"]
    assert call["toolName"] == "ask_city"
    assert call["args"] is None
    assert call["requiresApproval"] is False
    assert call["suspendPayload"] == {"question": CITY_QUESTION}
    schema = call["resumeSchema"]
    assert schema is not None
    assert schema["type"] == "object"
    assert schema["required"] == ["name"]
    assert schema["properties"]["name"]["type"] == "string"

    # when: resumed without naming the call (it is the only one waiting for data)
    outcome = await any_manager.resume(AGENT, started.run_id, None, {"name": "San Francisco"}, principal="eve")

    # then
    sf = forecast("San Francisco")
    assert outcome.status == "completed"
    assert outcome.output == f"The weather in San Francisco: {sf['conditions']}, {sf['temperatureC']}°C."
    assert await any_manager.store.get(AGENT, started.run_id) is None
    events = await any_manager.store.list_events(AGENT, started.run_id)
    assert [e["type"] for e in events][-3:] == ["decision", "resumed", "completed"]
    assert events[-3]["data"]["kind"] == "resumed"


async def test_a_prompt_naming_a_known_city_does_not_ask(manager: RunManager) -> None:
    outcome = await manager.start_run(AGENT, "What's the weather in Paris?")

    assert outcome.status == "completed"
    assert isinstance(outcome.output, str)
    assert outcome.output.startswith("The weather in Paris: ")


@pytest.mark.parametrize(
    ("resume_data", "problems"),
    [
        ({"city": 3}, [ResumeDataProblem(path=[], message="'name' is a required property")]),
        ({"name": 3}, [ResumeDataProblem(path=["name"], message="3 is not of type 'string'")]),
    ],
)
async def test_invalid_resume_data_is_refused_and_records_nothing(
    manager: RunManager, resume_data: object, problems: list[ResumeDataProblem]
) -> None:
    # given
    started = await manager.start_run(AGENT, "What's the weather like?")
    before = await manager.store.get(AGENT, started.run_id)
    events_before = await manager.store.list_events(AGENT, started.run_id)

    # when
    with pytest.raises(InvalidResumeDataError) as caught:
        await manager.resume(AGENT, started.run_id, None, resume_data)

    # then
    assert caught.value.problems == problems
    assert await manager.store.get(AGENT, started.run_id) == before
    assert await manager.store.list_events(AGENT, started.run_id) == events_before


async def test_approving_a_call_that_waits_for_data_names_the_right_mutation(manager: RunManager) -> None:
    started = await manager.start_run(AGENT, "What's the weather like?")
    assert started.run is not None
    call_id = started.run["toolCalls"][0]["toolCallId"]
    before = await manager.store.get(AGENT, started.run_id)

    with pytest.raises(WrongToolCallKindError) as caught:
        await manager.approve(AGENT, started.run_id, call_id)

    assert caught.value.expected == "resume"
    assert "resumeRun" in caught.value.message
    assert await manager.store.get(AGENT, started.run_id) == before
