"""A decision request, and the question of a run it names (docs/api.md "Errors"; docs/architecture.md
"Questions").

A decision answers one question: the one it names by ``questionId``, or, naming only a call, the
call's first question. ``find_call`` finds that question among those the run waits on now;
``decided_in_events`` finds the decision that answered one no longer asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from storage import DecisionDocument, DecisionKind, EventDocument, SnapshotDocument, ToolCallDocument

from ..errors import (
    AmbiguousToolCallError,
    DecideThroughSupervisorError,
    InvalidResumeDataError,
    QuestionNotPendingError,
    ResumeDataProblem,
    ToolCallAlreadyDecidedError,
    ToolCallNotFoundError,
    WrongToolCallKindError,
)
from ..running.deferred import question_id


@dataclass(frozen=True, kw_only=True)
class DecisionRequest:
    """One approve / decline / resume request."""

    kind: DecisionKind
    tool_call_id: str | None
    """The call's ``toolCallId`` (or the model's id, when one pending call has it); ``None`` only
    for resume: the one call waiting for resume data (or the call asking ``question_id``)."""
    question_id: str | None = None
    """The question the request decides (its ``questionId``); ``None``: the call's first question."""
    reason: str | None = None
    resume_data: Any = None
    edited_args: Any = None
    """The arguments an approval replaces the model's with (JSON object); ``None``: not edited."""
    idempotency_key: str | None = None


def model_id(call: ToolCallDocument) -> str:
    """The id the model gave ``call`` (``toolCallId`` in documents written before identities)."""
    return call.get("modelToolCallId") or call["toolCallId"]


class FirstQuestionAnswered(Exception):
    """``find_call``: the request names only the call at ``index``, which asks a later question
    than its first: the question the request names was answered (the gate tells by which decision)."""

    def __init__(self, index: int) -> None:
        super().__init__(f"the call at {index} asks a later question")
        self.index = index


@dataclass(frozen=True, kw_only=True)
class Answered:
    """A decision of a run's audit trail (``decided_in_events``), as the run's document held it."""

    decision: DecisionDocument
    tool_call_id: str
    question_id: str | None
    """The question it answered (``None`` in events written before questions had ids)."""


def decided_in_events(
    events: Sequence[EventDocument], tool_call_id: str | None, question_id: str | None
) -> Answered | None:
    """The decision that ``events`` (a run's audit trail, oldest first) recorded on the question
    ``question_id``, or, when ``None``, on the first question of the call ``tool_call_id`` (its
    identity); ``None`` when they record none."""
    found = None
    for event in events:
        if event["type"] != "decision":
            continue
        data = event["data"]
        if question_id is not None and data.get("questionId") == question_id:
            found = event
        elif question_id is None and tool_call_id is not None and data.get("toolCallId") == tool_call_id:
            found = event
            break  # the call's first question
    if found is None:
        return None
    data = found["data"]
    decision: DecisionDocument = {
        "kind": data["kind"],
        "decidedAt": found["at"],
        "decidedBy": found["by"],
        "reason": data.get("reason"),
        "resumeData": None,  # not in the trail
        "idempotencyKey": None,
    }
    if data.get("editedArgs") is not None:
        decision["editedArgs"] = data["editedArgs"]
    return Answered(decision=decision, tool_call_id=data["toolCallId"], question_id=data.get("questionId"))


def find_call(doc: SnapshotDocument, request: DecisionRequest) -> int:
    """The index of the call of ``doc`` asking the question ``request`` names, decided or not.

    A ``questionId`` names the call asking it now. Without one, a ``toolCallId`` names the call
    with that identity (failing that, the one pending call whose model id it is), and the request
    its first question; a resume naming neither, the one call waiting for resume data.

    Raises:
        QuestionNotPendingError: ``request.question_id`` is asked by no call of the run (or not by
            the call ``request.tool_call_id`` names): it was answered and the call moved on.
        FirstQuestionAnswered: The request names only a call that asks a later question than its
            first (``question_number`` above 1).
        ToolCallNotFoundError: No such call (or, without an id, none waits for resume data).
        AmbiguousToolCallError: Several pending calls have that identity (documents written
            before identities) or model id, or, without an id, several wait for resume data.
    """
    run_id, calls, named = doc["_id"], doc["toolCalls"], request.tool_call_id
    if request.question_id is not None:
        asked = [
            i
            for i, call in enumerate(calls)
            if question_id(call) == request.question_id and named in (None, call["toolCallId"], model_id(call))
        ]
        if not asked:
            raise QuestionNotPendingError(run_id, named, request.question_id)
        return asked[0]
    index = _only_resume_call(run_id, calls) if named is None else _named_call(run_id, calls, named)
    if calls[index].get("questionNumber", 1) > 1:  # absent before schema version 4: the gate reads the trail
        raise FirstQuestionAnswered(index)
    return index


def _named_call(run_id: str, calls: list[ToolCallDocument], named: str) -> int:
    for key in (lambda c: c["toolCallId"], model_id):
        found = [i for i, call in enumerate(calls) if key(call) == named]
        pending = [i for i in found if calls[i]["decision"] is None]
        if len(pending) > 1:
            raise AmbiguousToolCallError(run_id, [calls[i]["toolCallId"] for i in pending], named)
        if pending or found:
            return (pending or found)[0]
    raise ToolCallNotFoundError(run_id, named)


def check_addressable(doc: SnapshotDocument, *, forwarded: bool) -> None:
    """Whether ``doc`` takes a decision from this path at all, before any of its calls is looked
    up: a sub-run (``parentRunId`` set) takes only the decisions ``forwarded`` from its
    supervisor's run, whatever call, question or kind a direct one names.

    Raises:
        DecideThroughSupervisorError: ``doc`` is a sub-run and the decision is not forwarded.
    """
    parent = doc.get("parentRunId")
    if parent is not None and not forwarded:
        raise DecideThroughSupervisorError(doc["_id"], parent)


def check_decidable(doc: SnapshotDocument, index: int, request: DecisionRequest) -> None:
    """Whether the call at ``index`` takes ``request``'s kind of decision now (after
    ``check_addressable``).

    Raises:
        WrongToolCallKindError: The call waits for the other kind of answer.
        ToolCallAlreadyDecidedError: The call has a decision already.
    """
    call = doc["toolCalls"][index]
    if call["requiresApproval"] != (request.kind != "resumed"):
        expected: Literal["approval", "resume"] = "approval" if call["requiresApproval"] else "resume"
        raise WrongToolCallKindError(doc["_id"], call["toolCallId"], expected)
    if call["decision"] is not None:
        raise ToolCallAlreadyDecidedError(doc["_id"], call["toolCallId"], call["decision"])


def _only_resume_call(run_id: str, calls: list[ToolCallDocument]) -> int:
    resumable = [i for i, call in enumerate(calls) if not call["requiresApproval"]]
    pending = [i for i in resumable if calls[i]["decision"] is None]
    if len(pending) > 1:
        raise AmbiguousToolCallError(run_id, [calls[i]["toolCallId"] for i in pending])
    if pending:
        return pending[0]
    if len(resumable) == 1:
        return resumable[0]  # decided already: check_decidable reports the winning decision
    raise ToolCallNotFoundError(run_id, None)


def validate_resume_data(schema: dict[str, Any] | None, data: Any) -> None:
    """Check ``data`` against the call's ``resumeSchema`` (JSON Schema draft 2020-12).

    Raises:
        InvalidResumeDataError: One problem per validation error, ordered by path.
    """
    if schema is None:
        return
    from jsonschema import Draft202012Validator  # imported on the first resume, not at start

    errors = sorted(Draft202012Validator(schema).iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        raise InvalidResumeDataError(
            [ResumeDataProblem(path=list(error.absolute_path), message=error.message) for error in errors]
        )
