"""JSON round trips used by idempotency storage: outcomes and domain errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from runtime import (
    AgentNotFoundError,
    AmbiguousToolCallError,
    IdempotencyKeyReusedError,
    InvalidResumeDataError,
    ResumeDataProblem,
    RunManager,
    RunNotFoundError,
    RunNotReadyError,
    RunOutcome,
    RunsgateError,
    ToolCallAlreadyDecidedError,
    ToolCallNotFoundError,
    WrongToolCallKindError,
)
from storage import DecisionDocument

DECISION: DecisionDocument = {
    "kind": "declined",
    "decidedAt": datetime(2025, 3, 4, 5, 6, 7, 123000, tzinfo=UTC),
    "decidedBy": "alice",
    "reason": "no",
    "resumeData": None,
    "idempotencyKey": None,
}


async def test_a_suspended_outcome_with_decisions_round_trips_through_json(manager: RunManager) -> None:
    started = await manager.start_run("refund-agent", "Please refund orders 1042 and 1043")
    assert started.run is not None
    waiting = await manager.approve("refund-agent", started.run_id, started.run["toolCalls"][0]["toolCallId"])

    data = json.loads(json.dumps(waiting.to_json()))
    restored = RunOutcome.from_json(data)

    assert restored == waiting
    assert data["run"]["createdAt"].endswith("Z")
    assert restored.run is not None
    assert restored.run["createdAt"].tzinfo is not None


def test_a_completed_outcome_round_trips() -> None:
    outcome = RunOutcome(run_id="r", agent_id="a", status="completed", output={"n": [1, 2]})

    assert RunOutcome.from_json(json.loads(json.dumps(outcome.to_json()))) == outcome


@pytest.mark.parametrize(
    "error",
    [
        AgentNotFoundError("a"),
        AgentNotFoundError("a", ["b", "c"]),
        RunNotFoundError("a", "r"),
        ToolCallNotFoundError("r", "c"),
        ToolCallNotFoundError("r", None),
        ToolCallNotFoundError("r", "c", "q"),
        ToolCallAlreadyDecidedError("r", "c", DECISION),
        WrongToolCallKindError("r", "c", "approval"),
        AmbiguousToolCallError("r", ["c1", "c2"]),
        InvalidResumeDataError([ResumeDataProblem(path=["a", 0], message="bad")]),
        IdempotencyKeyReusedError("k", in_flight=True),
        RunNotReadyError("r", "not yet"),
    ],
)
def test_every_domain_error_round_trips_as_itself(error: RunsgateError) -> None:
    data = json.loads(json.dumps(error.to_json()))
    restored = RunsgateError.from_json(data)

    assert type(restored) is type(error)
    assert restored.message == error.message
    assert restored.details() == error.details()
    assert data["code"] == error.code.value


def test_the_already_decided_error_keeps_the_decision_time() -> None:
    restored = RunsgateError.from_json(ToolCallAlreadyDecidedError("r", "c", DECISION).to_json())

    assert isinstance(restored, ToolCallAlreadyDecidedError)
    assert restored.decision == DECISION
